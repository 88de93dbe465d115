"""RegionPool: the staging regions a Client reuses for the automatic region
path (uploads, batch uploads and downloads of host arrays, the prefetch
ring), whether its daemon is on this host at all (asked once), and the
caller's own SharedRegions (so arrays inside them travel as slices, with no
copy) -- the C++ client's client/src/region_pool.cc.

lease_for(path, nbytes) decides: "stream" never takes a region; "auto" (and
"inplace", for the transfers that are not written in place) does when the
daemon is on this host and nbytes >= 256 KiB; "region" always
(FailedPreconditionError for a daemon elsewhere). It hands out the smallest
free region that fits, else creates one (rounded up to a MiB). A returned
region stays registered for the next transfer; at most 8 regions and 1 GiB
of them wait free (the largest is always kept). Client.close() unregisters
every region. Thread-safe.
"""
from __future__ import annotations

import concurrent.futures
import os
import threading
import weakref
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from placement import errors
from placement._transport import TransferPath
from placement._shared_region import SharedRegion, same_host_socket

AUTO_MIN_BYTES = 256 << 10  # smaller transfers stay on the stream under "auto"
MAX_FREE_REGIONS = 8
MAX_FREE_BYTES = 1 << 30  # of free regions, beyond the one always kept
_MIB = 1 << 20


class Lease:
    """A borrowed staging region; back to the pool on release() (or `with`
    exit), or unregistered by discard() when the daemon may still be
    writing into it (a failed download)."""

    def __init__(self, pool: "RegionPool", region: SharedRegion) -> None:
        self._pool = pool
        self.region: Optional[SharedRegion] = region

    def release(self) -> None:
        region, self.region = self.region, None
        if region is not None:
            self._pool._give_back(region)

    def discard(self) -> None:
        region, self.region = self.region, None
        if region is not None:
            region.close()  # UnregisterRegion waits for the daemon's copies

    def __enter__(self) -> SharedRegion:
        assert self.region is not None
        return self.region

    def __exit__(self, kind: Any, *exc: Any) -> None:
        self.release()


class RegionPool:
    """See module docstring."""

    def __init__(self, client: Any) -> None:  # a placement.Client
        self._client = client
        self._lock = threading.Lock()
        self._checked = False
        self._socket: Optional[str] = None  # the region socket when same-host
        self._free: List[SharedRegion] = []
        self._closed = False
        self._user: "weakref.WeakSet[SharedRegion]" = weakref.WeakSet()
        self._made: "weakref.WeakSet[SharedRegion]" = weakref.WeakSet()  # staging, free or lent
        self._generation = 0  # bumped by forget(); older regions are not reused
        self._forget_listeners: List[Callable[[], None]] = []

    # --- The caller's regions -----------------------------------------------------
    def track(self, region: SharedRegion) -> None:
        with self._lock:
            self._user.add(region)

    def untrack(self, region: SharedRegion) -> None:
        with self._lock:
            self._user.discard(region)

    def locate(self, array: np.ndarray) -> Optional[Tuple[SharedRegion, int]]:
        """The caller's region holding every byte of `array`, and where."""
        if array.nbytes == 0:
            return None
        with self._lock:
            regions = list(self._user)
        for region in regions:
            offset = region.locate(array)
            if offset is not None:
                return region, offset
        return None

    # --- The decision -------------------------------------------------------------
    def path(self, override: Any = None) -> TransferPath:
        return TransferPath.of(override) if override is not None \
            else TransferPath.of(self._client.options.transfer_path)

    def same_host_socket(self) -> Optional[str]:
        """The daemon's region socket when it shares this host, else None
        (asked once; errors are the daemon's and not remembered)."""
        with self._lock:
            if not self._checked:
                self._socket = same_host_socket(self._client)
                self._checked = True
            return self._socket

    def use_region(self, path: TransferPath, nbytes: int) -> bool:
        """Whether a transfer of `nbytes` takes a region under `path`
        (INPLACE is AUTO here: it only changes single-array uploads, which
        placement._inplace writes before they get here)."""
        if path is TransferPath.INPLACE:
            path = TransferPath.AUTO
        if path is TransferPath.STREAM:
            return False
        if path is TransferPath.AUTO and nbytes < AUTO_MIN_BYTES:
            return False
        with self._lock:
            if not self._checked:
                try:
                    self._socket = same_host_socket(self._client)
                except errors.PlacementError:
                    if path is TransferPath.REGION:
                        raise
                    return False  # "auto": the stream reports the real error, if any
                self._checked = True
            same_host = self._socket is not None
        if path is TransferPath.REGION and not same_host:
            raise errors.FailedPreconditionError(
                f"transfer_path='region': the daemon at {self._client.target} is not on this "
                f"host (or has no region socket); use 'auto' or 'stream'")
        return same_host

    def lease_for(self, path: TransferPath, nbytes: int) -> Optional[Lease]:
        """A staging region of at least `nbytes` when `path` takes one, else
        None (the stream). Under "auto" a region that cannot be made falls
        back to the stream; under "region" its error is raised."""
        for attempt in (0, 1):
            if not self.use_region(path, nbytes) or nbytes == 0:
                return None
            try:
                return self.borrow(nbytes)
            except errors.UnavailableError:
                # The region socket is gone: the daemon restarted (a TCP
                # daemon's socket is named after its instance). Ask again.
                self.forget()
                if attempt == 0:
                    continue
                if path is TransferPath.REGION:
                    raise
                return None
            except errors.PlacementError:
                if path is TransferPath.REGION:
                    raise
                return None
        return None

    # --- Borrow and return ----------------------------------------------------------
    def borrow(self, nbytes: int) -> Lease:
        with self._lock:
            if self._closed:
                raise errors.FailedPreconditionError("the client was closed")
            fitting = [r for r in self._free if r.size >= nbytes]
            if fitting:
                best = min(fitting, key=lambda r: r.size)
                self._free.remove(best)
                return Lease(self, best)
            socket = self._socket
            generation = self._generation
        size = max(_MIB, -(-nbytes // _MIB) * _MIB)
        region = SharedRegion(size, "placement-staging", client=self._client, _socket=socket,
                              _track=False)
        region.pool_generation = generation
        with self._lock:
            self._made.add(region)
        return Lease(self, region)

    def _give_back(self, region: SharedRegion) -> None:
        dropped: List[SharedRegion] = []
        with self._lock:
            if self._closed or region.pool_generation != self._generation:
                dropped.append(region)
            else:
                self._free.append(region)
                # Past either bound, drop the smallest (the largest serves any transfer).
                while (len(self._free) > MAX_FREE_REGIONS or
                       (len(self._free) > 1 and sum(r.size for r in self._free) > MAX_FREE_BYTES)):
                    smallest = min(self._free, key=lambda r: r.size)
                    self._free.remove(smallest)
                    dropped.append(smallest)
        for r in dropped:  # unregistered outside the lock
            r.close()

    def forget(self) -> None:
        """Starts afresh after the daemon said it does not know a staging
        region (it restarted -- with another region socket -- or the session
        that owned the regions ended): drops the free regions, and those
        lent now when they come back, and asks again whether the daemon is
        on this host."""
        with self._lock:
            dropped, self._free = self._free, []
            self._generation += 1
            self._checked = False
            self._socket = None
            listeners = list(self._forget_listeners)
        for r in dropped:
            r.close()  # NOT_FOUND from the daemon is ignored; the mapping goes
        for listener in listeners:
            listener()

    def on_forget(self, listener: Callable[[], None]) -> None:
        """Calls `listener()` after every forget() (what else the client
        keeps of the daemon's memory goes with the pool: placement._inplace's
        mappings)."""
        with self._lock:
            self._forget_listeners.append(listener)

    def free_regions(self) -> List[SharedRegion]:
        with self._lock:
            return list(self._free)

    def close(self) -> None:
        """Unregisters every staging region (a transfer still using one then
        fails NOT_FOUND) and the caller's regions. Idempotent."""
        with self._lock:
            self._closed = True
            regions = list(self._made) + list(self._user)
            self._free = []
        for r in regions:
            r.close()


# --- Copies into and out of regions -----------------------------------------------
_PARALLEL_MIN_BYTES = 16 << 20
_PIECE_MIN_BYTES = 8 << 20
_executor: Optional[concurrent.futures.ThreadPoolExecutor] = None
_executor_lock = threading.Lock()


def _threads() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


def copy_threads() -> int:
    """How many threads copy_executor runs."""
    return _threads() - 1 or 1


def copy_executor() -> concurrent.futures.ThreadPoolExecutor:
    """The process's copy threads (min(cores, 8) - 1; the caller copies a
    piece itself)."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=copy_threads(), thread_name_prefix="placement-copy")
        return _executor


def for_each_slice(n: int, fn: Callable[[int, int], Any]) -> None:
    """fn(begin, end) over [0, n) in page-aligned slices: from 16 MiB on up
    to min(cores, 8) slices of at least 8 MiB, the first on the caller's
    thread, the others on the copy threads (`fn` must release the GIL to
    gain: numpy's copy and ctypes calls do) -- the C++ ForEachSlice. Returns
    once every call returned; raises the first error."""
    pieces = min(_threads(), n // _PIECE_MIN_BYTES)
    if n < _PARALLEL_MIN_BYTES or pieces < 2:
        fn(0, n)
        return
    step = (-(-n // pieces) + 4095) // 4096 * 4096
    executor = copy_executor()
    futures = [executor.submit(fn, a, min(n, a + step)) for a in range(step, n, step)]
    try:
        fn(0, step)
    finally:
        for f in futures:
            f.exception()  # waits
    for f in futures:
        f.result()


def parallel_copy(dst: np.ndarray, src: np.ndarray) -> None:
    """dst[:] = src for uint8 arrays of one length, in slices on threads
    (for_each_slice; the C++ client's ParallelCopy)."""
    for_each_slice(len(src), lambda a, b: np.copyto(dst[a:b], src[a:b]))


def forced_socket(client: Any) -> str:
    """The daemon's region socket for a transfer forced in place
    (TransferPath.INPLACE); FailedPreconditionError when the daemon is not
    on this host."""
    socket = client.regions.same_host_socket()
    if socket is None:
        raise errors.FailedPreconditionError(
            f"transfer_path='inplace': the daemon at {client.target} is not on "
            f"this host (or has no region socket); use 'auto' or 'stream'")
    return socket


def auto_socket(client: Any) -> Optional[str]:
    """The daemon's region socket for a transfer AUTO takes in place, or
    None: the other path then reports the daemon's error, if any."""
    try:
        return client.regions.same_host_socket()
    except errors.PlacementError:
        return None


def lasting_refusal(error: Optional[errors.PlacementError],
                    words: Tuple[str, ...]) -> Optional[str]:
    """Why AUTO should stop trying an in-place path for good after `error`
    (UNIMPLEMENTED, or a FAILED_PRECONDITION naming one of `words`: the
    platform, fd passing), as "CODE: message"; None when the refusal was the
    call's own (a small or remote shard) and later calls may try again."""
    if error is None:
        return None
    if isinstance(error, errors.UnimplementedError) or (
            isinstance(error, errors.FailedPreconditionError)
            and any(w in error.message.lower() for w in words)):
        return f"{error.code.name}: {error.message}"
    return None
