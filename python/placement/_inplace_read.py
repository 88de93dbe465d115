"""Downloads read in place (ViewService.ExportShards with for_copy;
docs/api/views.md "Reading to copy", docs/python.md "Downloads read in
place"): against a same-host CPU daemon the client copies each shard's box
straight out of the daemon's device memory into the result -- one copy of
the bytes, where the staged region path makes two (the daemon's into a
staging region, then out of it).

    1. ExportShards(tensor_id, shard_indices, for_copy=True), one shard per
       distinct box (replica 0 where there is one): the daemon hands over
       each shard of 256 KiB or more as its memory file re-opened read-write
       and NOT sealed (ShardView.writable, mapping_bytes = the file's size),
       so its block stays reusable; smaller shards (private copies) and
       blocks it cannot hand out so come sealed and read-only.
    2. The token is redeemed on the region socket as a view's is
       ("V" + token + "\\n"; placement._region_fd.redeem_view).
    3. A writable fd is mapped through the Client's MappingCache
       (placement._mapping_cache, shared with uploads written in place), so
       a tensor uploaded in place -- or any block the daemon reused for this
       tenant -- is read through the mapping the client already has: no new
       mapping, no page to map in. A sealed fd is mapped PROT_READ (a
       read-write mapping of it fails with EPERM) for this download only and
       unmapped after the copy.
    4. Each distinct box is copied once, row-major, from [offset, offset +
       size_bytes) of its fd's file into the result at the shard's ranges.
    5. Unexport, at once and always (also when anything before failed),
       after the last read: a shard is never read after its Unexport.

When (placement._tensors.Tensors.download of a whole tensor):
TransferPath.AUTO for tensors of AUTO_MIN_BYTES or more against a same-host
daemon whose shards are all on it (cluster: this node's), not partial (its
shards are contributions to reduce: the daemon's Download reduces them),
and not into an `out` lying in one of the caller's SharedRegions (the daemon
writes that itself, no copy here); TransferPath.INPLACE always
(FailedPreconditionError where it cannot). Under AUTO a daemon that cannot
(FAILED_PRECONDITION, UNIMPLEMENTED, RESOURCE_EXHAUSTED for --max_exports or
a small shard's copy, a region socket that cannot be reached, a CUDA
daemon's shards without fds) means the staged path; UNIMPLEMENTED, fd
passing off and a platform without fds are remembered for the client's
life.

A daemon that predates for_copy ignores it and exports every shard sealed:
the bytes still arrive with one copy, but a sealed block is never reused by
the daemon (it is replaced by a fresh memory file when freed).
"""
from __future__ import annotations

import mmap
import os
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from placement import _dtypes, _progress, _region_fd, _region_pool, errors
from placement._mapping_cache import _MADV_POPULATE_READ, Mapping, MappingCache
from placement._transport import TransferPath
from placement.v1 import tensor_service_pb2 as pb
from placement.v1 import types_pb2
from placement.v1 import view_service_pb2 as vpb

# Smaller tensors take the staged path under AUTO (as uploads do): below
# this, the export's round trips cost more than the copy they save.
AUTO_MIN_BYTES = 1 << 20

# Words of the daemon's FAILED_PRECONDITION answers to ExportShards that hold
# for its life: fd passing off (server/view/export_registry.cc).
_LASTING_WORDS = ("region socket", "region_socket", "fd passing")

Box = Tuple[Tuple[int, int], ...]


class InplaceReads:
    """The in-place download path of one Client; its writable mappings are
    the upload path's MappingCache. Thread-safe."""

    def __init__(self, client: Any, cache: MappingCache) -> None:  # a placement.Client
        self._client = client
        self.cache = cache
        self._lock = threading.Lock()
        self._off: Optional[str] = None  # why AUTO no longer tries, for this client
        self._downloads = 0  # read in place
        self._fallbacks = 0  # AUTO downloads that took the staged path after trying
        self._read_only = 0  # sealed shards mapped read-only (for one download each)

    # --- The decision ---------------------------------------------------------------
    def region_socket(self, path: TransferPath, nbytes: int) -> Optional[str]:
        """The daemon's region socket when a whole download of `nbytes` is
        to be read in place under `path`, else None. INPLACE:
        FailedPreconditionError when the daemon is not on this host."""
        if path is TransferPath.INPLACE:
            return _region_pool.forced_socket(self._client)
        if path is not TransferPath.AUTO or nbytes < AUTO_MIN_BYTES:
            return None
        with self._lock:
            if self._off is not None:
                return None
        return _region_pool.auto_socket(self._client)

    def download(self, tensor_id: str, info: Optional[types_pb2.TensorInfo],
                 out: Optional[np.ndarray], socket: str, path: TransferPath,
                 progress: Optional[_progress.ProgressFn]
                 ) -> Optional[Tuple[pb.DownloadHeader, np.ndarray]]:
        """The whole tensor, read in place into `out` (or a new array): its
        DownloadHeader and the array. None when AUTO is to take the staged
        path; INPLACE raises FailedPreconditionError instead. `info` (None:
        unknown) picks one shard per box to export, else every shard of this
        daemon is."""
        if info is not None:
            why = self._not_assemblable(info)
            if why is not None:
                return self._cannot(errors.FailedPreconditionError(why), path, counted=False)
        request = vpb.ExportShardsRequest(tensor_id=tensor_id, for_copy=True)
        if info is not None:
            request.shard_indices.extend(_one_per_box(info))
        try:
            response = self._client.unary(self._client.view_stub.ExportShards, request,
                                          idempotent=False)
        except (errors.FailedPreconditionError, errors.UnimplementedError,
                errors.ResourceExhaustedError) as e:
            return self._cannot(e, path)
        try:
            result = self._read(response, out, socket, progress)
        except _Cannot as e:
            return self._cannot(e.error, path, lasting=e.lasting)
        finally:
            self._unexport(response.export.export_id)
        with self._lock:
            self._downloads += 1
        return result

    def _not_assemblable(self, info: types_pb2.TensorInfo) -> Optional[str]:
        """Why the whole of `info` cannot be read in place here, or None."""
        if info.sharding.partial_axes:
            return (f"tensor {info.id} is partial: its shards are contributions to reduce, "
                    f"which only the daemon's Download does")
        client = self._client
        if client.process_count > 1:
            here = client.process_index
            if any(s.process_index != here for s in info.shards):
                return (f"tensor {info.id} has shards on other daemons of the cluster; only "
                        f"this daemon's can be read in place")
        return None

    def _cannot(self, error: Optional[errors.PlacementError], path: TransferPath, *,
                counted: bool = True, lasting: bool = False) -> None:
        """A download that cannot be read in place: None (AUTO) or
        FailedPreconditionError (INPLACE)."""
        if path is TransferPath.INPLACE:
            if isinstance(error, errors.UnimplementedError):
                raise errors.FailedPreconditionError(
                    f"transfer_path='inplace': the daemon at {self._client.target} cannot "
                    f"export shards ({error.message}); use 'auto'") from None
            assert error is not None
            raise error  # FAILED_PRECONDITION, or the bound or socket that stopped it
        with self._lock:
            if counted:
                self._fallbacks += 1
            off = (f"{error.code.name}: {error.message}" if lasting and error is not None
                   else _region_pool.lasting_refusal(error, _LASTING_WORDS))
            if off is not None:
                self._off = off
        return None

    # --- The protocol ---------------------------------------------------------------
    def _unexport(self, export_id: str) -> None:
        """Ends the export now; when the daemon cannot be told, the client's
        background thread tries again (the export also ends with this
        process or the client's session)."""
        if not export_id:
            return
        try:
            # A retry after a lost reply meets NOT_FOUND: the export ended.
            self._client.unary(self._client.view_stub.Unexport,
                               vpb.UnexportRequest(export_id=export_id), idempotent=True)
        except errors.NotFoundError:
            pass
        except (errors.PlacementError, ValueError):  # ValueError: the channel was closed
            self._client.release_export_later(export_id)

    def _read(self, response: vpb.ExportShardsResponse, out: Optional[np.ndarray], socket: str,
              progress: Optional[_progress.ProgressFn]) -> Tuple[pb.DownloadHeader, np.ndarray]:
        tensor = response.tensor
        shape = tuple(tensor.shape)
        dtype = _dtypes.from_proto(tensor.dtype)
        if out is not None and (out.dtype != dtype or out.shape != shape):
            raise errors.InvalidArgumentError(
                f"out is {out.dtype}{list(out.shape)}; the download of '{tensor.id}' is "
                f"{_dtypes.describe(tensor.dtype, shape)} ({dtype})")
        if tensor.sharding.partial_axes:
            raise _Cannot(errors.FailedPreconditionError(
                f"tensor {tensor.id} is partial: its shards are contributions to reduce, which "
                f"only the daemon's Download does"))
        boxes = _boxes(response)  # before any fd is taken: a shard elsewhere is _Cannot
        try:
            fds = _region_fd.redeem_view(socket, response.fd_token)
        except (errors.UnavailableError, errors.NotFoundError) as e:
            raise _Cannot(e) from None
        total = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        tracker = _progress.Tracker(progress, total)
        pinned: List[Mapping] = []
        private: List[mmap.mmap] = []
        sources: Dict[int, Any] = {}
        src: Optional[np.ndarray] = None
        try:
            sources = self._map(response, fds, pinned, private)
            target = out if out is not None else np.empty(shape, dtype)
            for view_index, (slices, box_shape) in boxes:
                view = response.shards[view_index]
                src = sources[view_index][view.offset:view.offset + view.size_bytes] \
                    .view(dtype).reshape(box_shape)
                dst = target[slices]
                if src.ndim == 0 or not tracker.listening:
                    copy_box(dst, src)
                    tracker.add(view.size_bytes)
                else:
                    # In pieces along the leading axis while progress is
                    # told: it moves within a shard.
                    for r0, r1 in _progress.row_pieces(len(src), src[:1].nbytes):
                        copy_box(dst[r0:r1], src[r0:r1])
                        tracker.add(src[r0:r1].nbytes)
                src = dst = None
        finally:
            # No array of a mapping may outlive this (not even in a traceback's
            # frame): the read-only ones are unmapped now.
            src = None
            sources.clear()
            for fd in fds:
                os.close(fd)
            for m in pinned:
                self.cache.release(m)  # kept mapped: the daemon reuses the block
            for mm in private:
                try:
                    mm.close()
                except BufferError:
                    pass  # an array of it is still alive: the mapping ends with it
        tracker.finish()
        header = pb.DownloadHeader(dtype=tensor.dtype, shape=tensor.shape, total_bytes=total)
        return header, target

    def _map(self, response: vpb.ExportShardsResponse, fds: Sequence[int],
             pinned: List[Mapping], private: List[mmap.mmap]) -> Dict[int, Any]:
        """Per ShardView index with bytes: a uint8 array in whose
        [offset, offset + size_bytes) the shard's bytes are, with those pages
        mapped in. Writable fds through the cache (appended to `pinned`),
        sealed ones mapped read-only here (appended to `private`)."""
        out: Dict[int, Any] = {}
        by_fd: Dict[int, Mapping] = {}
        for i, view in enumerate(response.shards):
            if view.size_bytes == 0:
                continue
            if view.fd_index < 0:
                # A platform without fds (CUDA: an IPC handle): not for AUTO again.
                raise _Cannot(errors.FailedPreconditionError(
                    f"shard {view.shard_index} of tensor {response.tensor.id} came without an "
                    f"fd (the daemon's platform hands out no host memory)"), lasting=True)
            if not 0 <= view.fd_index < len(fds):
                raise errors.InternalError(
                    f"shard view {view.shard_index} names fd {view.fd_index}; "
                    f"{len(fds)} were handed over")
            if view.offset < 0 or view.size_bytes < 0:
                raise errors.InternalError(
                    f"shard view {view.shard_index}: offset {view.offset}, size "
                    f"{view.size_bytes}")
            fd = fds[view.fd_index]
            if view.writable:
                if view.offset + view.size_bytes > view.mapping_bytes:
                    raise errors.InternalError(
                        f"shard view {view.shard_index}: [{view.offset}, "
                        f"{view.offset + view.size_bytes}) is outside its "
                        f"{view.mapping_bytes}-byte file")
                mapping = by_fd.get(view.fd_index)
                if mapping is None:
                    mapping = self.cache.acquire(fd, view.mapping_bytes)
                    pinned.append(mapping)
                    by_fd[view.fd_index] = mapping
                mapping.populate(view.offset, view.offset + view.size_bytes)
                out[i] = mapping.bytes
            else:
                out[i] = self._map_read_only(fd, view, private)
        return out

    def _map_read_only(self, fd: int, view: vpb.ShardView,
                       private: List[mmap.mmap]) -> "_Shifted":
        """The pages of a sealed fd that hold the shard, PROT_READ, sliced
        with the file's offsets."""
        page = mmap.PAGESIZE
        start = view.offset // page * page
        length = view.offset - start + view.size_bytes
        try:
            mm = mmap.mmap(fd, length, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ, offset=start)
        except (OSError, ValueError) as e:
            raise errors.InternalError(
                f"cannot map shard view {view.shard_index} ({length} bytes at {start}): "
                f"{getattr(e, 'strerror', None) or e}") from None
        private.append(mm)
        with self._lock:
            self._read_only += 1
        try:
            mm.madvise(_MADV_POPULATE_READ)  # one call instead of a fault per page
        except (OSError, ValueError):
            pass  # before Linux 5.14: the reads fault the pages in
        data = np.frombuffer(mm, dtype=np.uint8)
        # Indexed like the file: [offset, offset + size) of the result is the shard.
        return _Shifted(data, start)

    # --- State ----------------------------------------------------------------------
    def counters(self) -> Tuple[int, int, Optional[str], int]:
        """(downloads read in place, AUTO fallbacks after trying, why AUTO
        stopped trying, sealed shards mapped read-only)."""
        with self._lock:
            return self._downloads, self._fallbacks, self._off, self._read_only


class _Shifted:
    """A uint8 array of a file's bytes from `start` on, sliced with the
    file's offsets."""

    def __init__(self, data: np.ndarray, start: int) -> None:
        self._data = data
        self._start = start

    def __getitem__(self, s: slice) -> np.ndarray:
        return self._data[s.start - self._start:s.stop - self._start]


class _Cannot(Exception):
    """The daemon's export cannot be read in place here: AUTO takes the
    staged path (after the Unexport), INPLACE raises `error`. `lasting`:
    remembered for the client's life."""

    def __init__(self, error: errors.PlacementError, lasting: bool = False) -> None:
        super().__init__(error.message)
        self.error = error
        self.lasting = lasting


def _one_per_box(info: types_pb2.TensorInfo) -> List[int]:
    """Indices of one shard per distinct non-empty box of `info` (replica 0
    where the box has one, else the first), in mesh order."""
    chosen: Dict[Box, int] = {}
    for i, s in enumerate(info.shards):
        if s.size_bytes == 0:
            continue
        key = tuple((r.begin, r.end) for r in s.ranges)
        if key not in chosen or (s.replica_id == 0 and info.shards[chosen[key]].replica_id != 0):
            chosen[key] = i
    return sorted(chosen.values())


def _boxes(response: vpb.ExportShardsResponse
           ) -> List[Tuple[int, Tuple[Tuple[slice, ...], Tuple[int, ...]]]]:
    """(ShardView index, (slices, shape)) for each distinct non-empty box of
    the exported shards, checked to cover the whole tensor and to match
    their views' sizes. _Cannot when they do not cover it (shards of
    another daemon)."""
    tensor = response.tensor
    shape = tuple(tensor.shape)
    itemsize = _dtypes.from_proto(tensor.dtype).itemsize
    seen = set()
    out = []
    covered = 0
    for i, view in enumerate(response.shards):
        if not 0 <= view.shard_index < len(tensor.shards):
            raise errors.InternalError(
                f"a shard view names shard {view.shard_index} of {len(tensor.shards)}")
        shard = tensor.shards[view.shard_index]
        if len(shard.ranges) != len(shape):
            raise errors.InternalError(
                f"a shard has {len(shard.ranges)} ranges for an array of rank {len(shape)}")
        key = tuple((r.begin, r.end) for r in shard.ranges)
        for (begin, end), n in zip(key, shape):
            if not 0 <= begin <= end <= n:
                raise errors.InternalError(f"a shard range [{begin}, {end}) outside [0, {n})")
        box_shape = tuple(end - begin for begin, end in key)
        elements = int(np.prod(box_shape, dtype=np.int64))
        if elements == 0 or key in seen:
            continue
        if elements * itemsize != view.size_bytes:
            raise errors.InternalError(
                f"shard view {view.shard_index}: {view.size_bytes} bytes for a box of "
                f"{list(box_shape)} x {itemsize} bytes")
        seen.add(key)
        covered += elements
        out.append((i, (tuple(slice(b, e) for b, e in key), box_shape)))
    total = int(np.prod(shape, dtype=np.int64))
    if covered != total:
        raise _Cannot(errors.FailedPreconditionError(
            f"the exported shards of tensor {tensor.id} hold {covered} of its {total} "
            f"elements (the others are on other daemons of the cluster)"))
    return out


# Boxes of this many bytes or more are copied on threads, in pieces of at
# least _PIECE_MIN_BYTES (measured on the 2-core VM: 8 MiB out of a memory
# file in 0.33 ms on 2 threads against 0.55-0.64 ms on one; 4 MiB, which
# the caches still hold, is faster on one).
_PARALLEL_MIN_BYTES = 8 << 20
_PIECE_MIN_BYTES = 4 << 20


def copy_box(dst: np.ndarray, src: np.ndarray) -> None:
    """dst[...] = src (same shape): copies of _PARALLEL_MIN_BYTES or more on
    up to min(cores, 8) threads (the caller's included) -- whole bytes where
    both are C-contiguous, else runs of rows. Downloads copy a memory file's
    mapping into the caller's array with it, uploads the caller's array
    into a mapping. Why threads: one thread does not reach the memory's
    bandwidth (a fresh 2-core VM, 2026-11-27: 256 MiB copied in 24-26 ms on
    one thread, 13.7 ms on two, either direction), and on some hosts a
    page-aligned source copied by glibc's memcpy into a destination a few
    bytes further on in its page (a numpy array's data starts 16 bytes into
    its page) takes ~3x as long on one thread as an equally aligned copy
    (an earlier VM: 69 ms against 24.5 ms; two threads 25.5 ms either way).
    No thread still copies when this returns or raises (the caller unmaps
    next)."""
    nbytes = src.nbytes
    if dst.flags.c_contiguous and src.flags.c_contiguous:
        if dst.ndim == 0:
            np.copyto(dst, src)
            return
        dst, src = dst.reshape(-1).view(np.uint8), src.reshape(-1).view(np.uint8)
    rows = dst.shape[0] if dst.ndim else 1
    pieces = min(_region_pool._threads(), nbytes // _PIECE_MIN_BYTES, rows)
    if nbytes < _PARALLEL_MIN_BYTES or pieces < 2:
        np.copyto(dst, src)
        return
    step = -(-rows // pieces)
    if dst.ndim == 1 and dst.dtype == np.uint8:
        step = (step + 4095) // 4096 * 4096  # whole pages each
    executor = _region_pool.copy_executor()
    futures = []
    try:
        for a in range(step, rows, step):
            futures.append(executor.submit(np.copyto, dst[a:a + step], src[a:a + step]))
        np.copyto(dst[:step], src[:step])
    finally:
        for f in futures:
            f.exception()  # waits
    for f in futures:
        f.result()
