"""Zero-copy shard views (docs/api/views.md): a trainer on the daemon's host
reads the shards the daemon holds in place, as read-only numpy arrays over
the daemon's own memory -- Ray's zero-copy numpy reads, for placed tensors.

    view = placement.views.view(x)            # x: a RemoteArray (or an id)
    view.arrays[0]                            # shard 0, read-only, no copy
    np.asarray(x)                             # RemoteArray does this itself

RemoteArray uses views by itself against a local daemon: ``np.asarray(x)``
and ``x.addressable_shards[i].data`` are read-only arrays over the daemon's
memory (a sharded array is assembled from its shard views: one copy here,
no transfer); elsewhere they download.

Lifetime: the export behind a view lasts while any of its arrays (or the
view) is alive, and ends (Unexport, queued to the client's background
thread) once the last is collected, or at ``close()``. While it lasts the
daemon keeps the shards' memory -- also when the tensor is deleted
meanwhile -- and no process can write it: the bytes cannot change under a
reader. The daemon also ends it when its session ends or this process
exits; an array that outlives its export keeps reading the shard's last
bytes, never another tensor's.

A CUDA daemon's shards are device memory: ``ShardView.cuda_ipc_handle``
(open with cudaIpcOpenMemHandle, e.g. through CuPy) and no numpy array.
"""
from __future__ import annotations

import mmap
import os
import threading
import weakref
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from placement import _default, _dtypes, _region_fd, errors
from placement.v1 import view_service_pb2


@dataclass(frozen=True)
class ShardView:
    """One viewed shard: its index into the tensor's shards, device, shape
    and global index (slices), and `data`: a read-only numpy array over the
    daemon's memory (None on a CUDA daemon)."""

    shard_index: int
    device_id: int
    index: Tuple[slice, ...]
    shape: Tuple[int, ...]
    data: Optional[np.ndarray]
    copied: bool
    cuda_ipc_handle: bytes
    offset: int


class _Export:
    """Ends the export once every mapping of it is gone (finalizers of the
    mmaps) and the view released it."""

    def __init__(self, client: Any, export_id: str) -> None:
        self._client = client
        self.export_id = export_id
        self._holds = 1  # the view itself; each mapping adds one
        self._lock = threading.Lock()

    def hold(self) -> None:
        with self._lock:
            self._holds += 1

    def drop(self) -> None:
        with self._lock:
            self._holds -= 1
            last = self._holds == 0
        if last:
            self._client.release_export_later(self.export_id)


class TensorView:
    """See module docstring. `arrays` / `shards` in the order asked for
    (default: every shard the daemon holds, mesh order)."""

    def __init__(self, client: Any, tensor_id: str, shard_indices: Optional[Sequence[int]] = None):
        socket = client.regions.same_host_socket()
        if socket is None:
            raise errors.FailedPreconditionError(
                f"the daemon at {client.target} does not share this host (host/boot id, a unix "
                f"or loopback target, a region socket); views need a same-host daemon: download "
                f"instead")
        request = view_service_pb2.ExportShardsRequest(tensor_id=tensor_id,
                                                       shard_indices=list(shard_indices or []))
        response = client.unary(client.view_stub.ExportShards, request, idempotent=False)
        self._client = client
        self.tensor = response.tensor
        self.export_id = response.export.export_id
        try:
            fds = _region_fd.redeem_view(socket, response.fd_token)
        except BaseException:
            client.release_export_later(self.export_id)
            raise
        self._export = _Export(client, self.export_id)
        self._finalizer = weakref.finalize(self, self._export.drop)
        dtype = _dtypes.from_proto(self.tensor.dtype)
        shards: List[ShardView] = []
        try:
            for s in response.shards:
                info = self.tensor.shards[s.shard_index]
                shape = tuple(info.shape)
                data = None
                if s.fd_index >= 0:
                    data = self._map(fds[s.fd_index], s.offset, s.size_bytes, dtype, shape)
                elif s.size_bytes == 0 and not s.cuda_ipc_handle:
                    data = np.empty(shape, dtype)
                    data.flags.writeable = False
                index = tuple(slice(None) if (r.begin, r.end) == (0, n) else slice(r.begin, r.end)
                              for r, n in zip(info.ranges, self.tensor.shape))
                shards.append(ShardView(s.shard_index, s.device_id, index, shape, data, s.copied,
                                        s.cuda_ipc_handle, s.offset))
        except BaseException:
            self._finalizer()  # the export ends with the mappings made so far
            raise
        finally:
            for fd in fds:
                os.close(fd)  # the mappings keep the memory
        self.shards = shards

    def _map(self, fd: int, offset: int, size: int, dtype: np.dtype,
             shape: Tuple[int, ...]) -> np.ndarray:
        page = mmap.PAGESIZE
        start = offset // page * page
        mm = mmap.mmap(fd, offset - start + size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ,
                       offset=start)
        if hasattr(mmap, "MADV_HUGEPAGE"):
            # The daemon's 2 MiB pages mapped whole where it has them.
            mm.madvise(mmap.MADV_HUGEPAGE)
        self._export.hold()
        weakref.finalize(mm, self._export.drop)
        # frombuffer of a read-only mapping: a read-only array (a write
        # raises here; through a pointer it would fault).
        return np.frombuffer(mm, dtype=dtype, count=size // dtype.itemsize,
                             offset=offset - start).reshape(shape)

    @property
    def arrays(self) -> List[Optional[np.ndarray]]:
        return [s.data for s in self.shards]

    def assemble(self) -> np.ndarray:
        """The whole array from the viewed shards (one copy here, no
        transfer), read-only: each distinct box once. A single shard holding
        the whole array is returned as it is (no copy).
        FailedPreconditionError when the shards do not cover the array (other
        nodes hold some, a selection, a CUDA daemon) or it is partial."""
        shape = tuple(self.tensor.shape)
        if self.tensor.sharding.partial_axes:
            raise errors.FailedPreconditionError(
                f"tensor {self.tensor.id} is partial: its shards are contributions to reduce")
        for s in self.shards:
            if s.data is not None and s.shape == shape:
                return s.data
        out = np.empty(shape, _dtypes.from_proto(self.tensor.dtype))
        seen = set()
        covered = 0
        for s in self.shards:
            key = tuple((sl.start, sl.stop) for sl in s.index)
            if s.data is None or key in seen:
                continue
            seen.add(key)
            out[s.index] = s.data
            covered += s.data.size
        if covered < out.size:
            raise errors.FailedPreconditionError(
                f"the viewed shards hold {covered} of the {out.size} elements of tensor "
                f"{self.tensor.id}; download instead")
        out.flags.writeable = False  # read-only like every view (to_numpy() gives a copy)
        return out

    def close(self) -> None:
        """Releases the view's hold: the export ends once no array of it is
        alive any more (at once when the caller keeps none)."""
        self.shards = []
        self._finalizer()

    def __enter__(self) -> "TensorView":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def view(x: Any, shard_indices: Optional[Sequence[int]] = None, *,
         client: Any = None) -> TensorView:
    """A TensorView of `x` (a RemoteArray, or a tensor id or name with
    `client`, default: the default client)."""
    tensor_id = getattr(x, "id", x)
    owner = getattr(x, "client", None) if client is None else client
    return TensorView(_default.resolve(owner), str(tensor_id), shard_indices)


@dataclass(frozen=True)
class ExportInfo:
    export_id: str
    tensor_id: str
    tenant: str
    session_id: str
    num_shards: int
    size_bytes: int
    reader_pid: int


def list_exports(client: Any = None) -> Tuple[List[ExportInfo], int, int]:
    """The caller's open exports and its totals since the daemon started
    (exports made, bytes exposed): what `placectl top` shows."""
    c = _default.resolve(client)
    response = c.unary(c.view_stub.ListExports, view_service_pb2.ListExportsRequest(),
                       idempotent=True)
    exports = [ExportInfo(e.export_id, e.tensor_id, e.tenant, e.session_id, e.num_shards,
                          e.size_bytes, e.reader_pid) for e in response.exports]
    return exports, response.exports_total, response.bytes_total


__all__ = ["ExportInfo", "ShardView", "TensorView", "list_exports", "view"]
