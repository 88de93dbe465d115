"""Same-host shared-memory regions (placement.v1.RegionService,
docs/api/regions.md): memory this process shares with a daemon on the same
machine, so tensor bytes move at memory speed instead of through gRPC.

Transfers use regions by themselves when the daemon is on this host
(TransportOptions.transfer_path "auto": the Client's pooled staging regions,
one copy on this side). SharedRegion is for callers who want to fill or read
the shared memory in place, with no copy on this side at all:

    with placement.SharedRegion(64 << 20) as region:
        x = region.ndarray(np.float32, (1024, 16384))  # fill x in place
        r = placement.device_put(x, sharding)           # the daemon reads the region
        y = region.ndarray(np.float32, (1024, 16384), offset=x.nbytes)
        r.to_numpy(out=y)                               # the daemon writes into it

Any array that lies inside a live SharedRegion of the client (a view from
`ndarray()`, or a slice of one) travels as a region slice, whatever its size.

A SharedRegion belongs to the client that made it; its memory may be used
from any thread, and the caller orders its own accesses against the
transfers it starts. close() (also `with`, and the client's close())
unregisters it -- the daemon first finishes the transfers using it -- and
unmaps it here once no numpy view of it is left.
"""
from __future__ import annotations

import mmap
import os
import threading
import weakref
from typing import TYPE_CHECKING, Any, List, Optional, Sequence

import numpy as np

from placement import _region_fd, errors
from placement.v1 import region_service_pb2 as rpb

if TYPE_CHECKING:
    from placement.client import Client

MAX_NAME_BYTES = 128


def same_host(client: Optional["Client"] = None) -> bool:
    """Whether regions can reach the daemon: its GetStatus host_id and
    boot_id equal this machine's, it reports a region socket, and the target
    is a unix socket or a loopback address. GetStatus errors are raised."""
    c = _resolve(client)
    return _same_host_socket(c) is not None


def _same_host_socket(client: "Client") -> Optional[str]:
    """The daemon's region socket when regions can reach it, else None."""
    if not _region_fd.local_target(client.target):
        return None
    status = client.status()
    if (status.region_socket and status.host_id and status.host_id == _region_fd.host_id()
            and status.boot_id == _region_fd.boot_id()):
        return str(status.region_socket)
    return None


def list_regions(client: Optional["Client"] = None) -> List[rpb.RegionInfo]:
    """The caller's registered regions (an admin's: all), sorted by id."""
    c = _resolve(client)
    return list(c.unary(c.region_stub.ListRegions, rpb.ListRegionsRequest(),
                        idempotent=True).regions)


def register_fd(client: "Client", fd: int, size_bytes: int = 0, name: str = "", *,
                region_socket: Optional[str] = None) -> rpb.RegionInfo:
    """Passes `fd` (a memfd sealed with F_SEAL_SHRINK) over the daemon's
    region socket and registers `size_bytes` of it (0 = all); the fd stays
    the caller's. UnavailableError when the socket cannot be reached; the
    daemon's errors otherwise (an unsealed memfd: InvalidArgumentError)."""
    if region_socket is None:
        region_socket = str(client.status().region_socket)
        if not region_socket:
            raise errors.FailedPreconditionError(
                "the daemon has no region socket (--region_socket is off); use the gRPC stream")
    token = _region_fd.pass_fd(region_socket, fd)
    request = rpb.RegisterRegionRequest(name=name, size_bytes=size_bytes, fd_token=token)
    return client.unary(client.region_stub.RegisterRegion, request, idempotent=False).region


def unregister(client: "Client", region_id: str) -> None:
    """UnregisterRegion: waits for the transfers using the region, then the
    daemon unmaps it. NotFoundError for ids the caller does not see."""
    client.unary(client.region_stub.UnregisterRegion,
                 rpb.UnregisterRegionRequest(region_id=region_id), idempotent=False)


class SharedRegion:
    """A sealed memfd of `size_bytes`, mapped here and registered with the
    daemon of `client` (the default client when None). See module docstring.

    FailedPreconditionError when the daemon is not on this host;
    InvalidArgumentError for size_bytes < 1 or a name over 128 bytes;
    ResourceExhaustedError when the memory cannot be made; the daemon's
    errors otherwise (RESOURCE_EXHAUSTED past --max_regions).
    """

    def __init__(self, size_bytes: int, name: str = "", *,
                 client: Optional["Client"] = None, _socket: Optional[str] = None,
                 _track: bool = True) -> None:
        self._client = _resolve(client)
        self._lock = threading.Lock()
        self._registered = False
        self._mmap: Optional[mmap.mmap] = None
        self.pool_generation: Optional[int] = None  # set by the staging pool for its regions
        size_bytes = int(size_bytes)
        if size_bytes < 1:
            raise errors.InvalidArgumentError(f"size_bytes must be >= 1, got {size_bytes}")
        if len(name.encode()) > MAX_NAME_BYTES:
            raise errors.InvalidArgumentError(
                f"region name has {len(name.encode())} bytes; at most {MAX_NAME_BYTES}")
        if _socket is None:
            _socket = _same_host_socket(self._client)
            if _socket is None:
                raise errors.FailedPreconditionError(
                    f"the daemon at {self._client.target} does not share this host (host/boot "
                    f"id, a unix or loopback target, a region socket); shared-memory regions "
                    f"need a same-host daemon")
        fd = _region_fd.create_sealed_memfd(name or "placement-region", size_bytes)
        try:
            try:
                self._mmap = mmap.mmap(fd, size_bytes, flags=mmap.MAP_SHARED,
                                       prot=mmap.PROT_READ | mmap.PROT_WRITE)
            except OSError as e:
                raise errors.ResourceExhaustedError(
                    f"cannot map a {size_bytes}-byte region: {e.strerror}") from None
            self._info = register_fd(self._client, fd, size_bytes, name, region_socket=_socket)
        except BaseException:
            if self._mmap is not None:
                self._mmap.close()
                self._mmap = None
            raise
        finally:
            os.close(fd)  # both mappings keep the memory
        self._registered = True
        self._size = size_bytes
        # Dropped without close(): unregistered by the client's background
        # thread (no RPC inside the collector); the mapping goes with it.
        self._finalizer = weakref.finalize(self, self._client.release_region_later, self.id)
        self._finalizer.atexit = False
        #: Every byte of the region, as a writable uint8 array (no copy).
        self.bytes: np.ndarray = np.frombuffer(self._mmap, dtype=np.uint8)
        self._address = int(self.bytes.ctypes.data)
        if _track:
            self._client.regions.track(self)

    # --- What it is -------------------------------------------------------------
    @property
    def id(self) -> str:
        return str(self._info.region_id)

    @property
    def info(self) -> rpb.RegionInfo:
        return self._info

    @property
    def size(self) -> int:
        return self._size

    @property
    def client(self) -> "Client":
        return self._client

    @property
    def closed(self) -> bool:
        return not self._registered

    def ndarray(self, dtype: Any, shape: Sequence[int], offset: int = 0) -> np.ndarray:
        """A writable C-contiguous array of `dtype` and `shape` over the
        region's bytes from `offset` (no copy). OutOfRangeError when it does
        not fit."""
        self._check_open()
        dt = np.dtype(dtype)
        shape = tuple(int(d) for d in shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        if offset < 0 or nbytes < 0 or offset > self._size or nbytes > self._size - offset:
            raise errors.OutOfRangeError(
                f"{dt}{list(shape)} ({nbytes} bytes) at offset {offset} does not fit in "
                f"region {self.id} ({self._size} bytes)")
        return self.bytes[offset:offset + nbytes].view(dt).reshape(shape)

    def locate(self, array: np.ndarray) -> Optional[int]:
        """The offset of a C-contiguous `array` whose bytes lie inside this
        region, else None."""
        if not self._registered or not array.flags.c_contiguous:
            return None
        start = int(array.__array_interface__["data"][0]) - self._address
        if 0 <= start and array.nbytes <= self._size - start:
            return start
        return None

    # --- Lifetime ---------------------------------------------------------------
    def _check_open(self) -> None:
        if not self._registered:
            raise errors.FailedPreconditionError(f"region {self.id} was closed")

    def unregister(self) -> None:
        """Unregisters now (idempotent; the daemon finishes the transfers
        using the region first); the memory stays mapped here until close()."""
        with self._lock:
            if not self._registered:
                return
            self._registered = False
        self._finalizer.detach()
        self._client.regions.untrack(self)
        unregister(self._client, self.id)

    def close(self) -> None:
        """Unregisters (errors from a daemon already gone are ignored) and
        unmaps, unless numpy views of the region are still alive: then the
        mapping goes with the last of them. Idempotent."""
        try:
            self.unregister()
        except (errors.PlacementError, ValueError):  # ValueError: the channel was closed
            pass
        self._unmap()

    def _unmap(self) -> None:
        if self._mmap is None:
            return
        self.bytes = np.empty(0, np.uint8)
        try:
            self._mmap.close()
        except BufferError:
            pass  # views remain: the mapping ends with the last of them
        self._mmap = None

    def __enter__(self) -> "SharedRegion":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "" if self._registered else ", closed"
        return f"SharedRegion({self.id!r}, {self._size} bytes{state})"


def _resolve(client: Optional["Client"]) -> "Client":
    from placement.client import resolve
    return resolve(client)


def upload_from_region(region: SharedRegion, offset: int, dtype: Any, shape: Sequence[int],
                       device: Any = None, *, name: str = "") -> Any:
    """A RemoteArray of `dtype` and `shape` whose bytes the daemon reads
    from `region` at `offset` (no copy on this side), placed on `device`
    (a device, id or sharding, as device_put takes; None: the first)."""
    from placement import _placing
    from placement.array import RemoteArray
    c = region.client
    target = device if device is not None else c.devices()[0]
    info = c.tensors.upload_from_region(region, offset, np.dtype(dtype), tuple(shape),
                                        _placing.sharding_rule(c, target), name=name)
    return RemoteArray(c, info)


def download_to_region(array: Any, region: SharedRegion, offset: int = 0) -> np.ndarray:
    """Downloads the whole of RemoteArray `array` into `region` at `offset`
    (the daemon writes it there; no copy on this side) and returns the numpy
    view of those bytes. OutOfRangeError when it does not fit."""
    out = region.ndarray(array.dtype, array.shape, offset)
    array.to_numpy(out=out)
    return out
