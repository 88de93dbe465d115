"""SharedRegion, and registering memory with a same-host daemon
(RegionService.RegisterRegion / UnregisterRegion). The public module is
placement.regions (see its docstring); this one sits below placement.client
in the import order, for the Client's staging pool (placement._region_pool)
and transfers (placement._tensors, placement._staging).
"""
from __future__ import annotations

import mmap
import os
import threading
import weakref
from typing import Any, Optional, Sequence

import numpy as np

from placement import _default, _region_fd, errors
from placement.types import RegionInfo
from placement.v1 import region_service_pb2 as rpb

MAX_NAME_BYTES = 128


def same_host_socket(client: Any) -> Optional[str]:
    """The daemon's region socket when regions can reach it, else None."""
    if not _region_fd.local_target(client.target):
        return None
    status = client.status()
    if (status.region_socket and status.host_id and status.host_id == _region_fd.host_id()
            and status.boot_id == _region_fd.boot_id()):
        return str(status.region_socket)
    return None


def register_fd(client: Any, fd: int, size_bytes: int = 0, name: str = "", *,
                region_socket: Optional[str] = None) -> RegionInfo:
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
    return RegionInfo.from_proto(
        client.unary(client.region_stub.RegisterRegion, request, idempotent=False).region)


def unregister(client: Any, region_id: str) -> None:
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
                 client: Optional[Any] = None, _socket: Optional[str] = None,
                 _track: bool = True) -> None:
        self._client = _default.resolve(client)
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
            _socket = same_host_socket(self._client)
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
        return self._info.id

    @property
    def info(self) -> RegionInfo:
        return self._info

    @property
    def size(self) -> int:
        return self._size

    @property
    def client(self) -> Any:
        """The placement.Client the region belongs to."""
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
