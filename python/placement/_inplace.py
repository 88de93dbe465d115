"""Uploads written in place (ViewService.ReserveUpload / CommitUpload /
CancelUpload; docs/api/views.md "Writing in place", docs/python.md): against
a same-host CPU daemon the client copies each shard's box of the array
straight into the daemon's device memory -- one copy of the bytes, where the
staged region path makes two (into the staging region, then the daemon's).

    1. ReserveUpload(header): the daemon allocates the tensor's shards and
       answers one UploadSlot per (shard, device) -- a replicated shard is a
       slot per device -- and a single-use fd token.
    2. The token is redeemed on the region socket as a view token is
       ("V" + token + "\\n"; placement._region_fd.redeem_view): the fds of
       the daemon's memory files, read-write.
    3. Each fd's file is mapped whole through the Client's MappingCache
       (placement._mapping_cache), which keeps mappings between uploads: the
       daemon reuses a tenant's freed blocks for its next reservations, so
       the next upload of a training loop writes pages already mapped.
    4. Slot by slot, the box tensor.shards[slot.shard_index].ranges of the
       array is copied, row-major, to [offset, offset + size_bytes) of its
       fd's file.
    5. CommitUpload publishes the tensor. Nothing is written to a slot after
       it: the mappings stay, but only a later reservation that hands the
       same memory out again is written through them (the daemon's rule:
       memory a tenant was given writable is reused only for that tenant).

Any failure after the reservation cancels it (CancelUpload: its memory is
freed at once) and is raised. Two failures committed nothing and the upload
is made once more, as Tensors._staged_call does for a staging region the
daemon forgot: a CommitUpload answered NOT_FOUND (the reservation expired,
or the daemon restarted or the session ended meanwhile), and a region socket
that cannot be reached (a restarted daemon's new socket is asked for; AUTO
takes the staged path when there is none).

When it is used (placement._tensors.Tensors.upload, and upload_batch of a
single array, which device_put of one array is): TransferPath.AUTO for
arrays of AUTO_MIN_BYTES or more that lie in none of the caller's
SharedRegions (those travel as slices with no copy here), without
process_local, against a same-host daemon; TransferPath.INPLACE always.
Under AUTO a daemon that cannot (FAILED_PRECONDITION, UNIMPLEMENTED) means
the staged path; UNIMPLEMENTED, a platform that cannot and fd passing off
are remembered for the client's life, a shard too small or on another
daemon only for the call.
"""
from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from placement import _dtypes, _progress, _region_fd, _region_pool, errors
from placement._inplace_read import InplaceReads, copy_box
from placement._mapping_cache import CacheStats, Mapping, MappingCache, has_no_pages
from placement._transport import TransferPath
from placement.v1 import tensor_service_pb2 as pb
from placement.v1 import types_pb2
from placement.v1 import view_service_pb2 as vpb

# Smaller arrays take the staged path under AUTO: below this, a reservation's
# extra round trips cost more than the copy they save.
AUTO_MIN_BYTES = 1 << 20

# Words of the daemon's FAILED_PRECONDITION answers that hold for every later
# reservation of this client: the platform cannot hand out device memory
# (CUDA), or fd passing is off. Any other FAILED_PRECONDITION (a shard under
# 256 KiB, past the memory-file bound, on another daemon) is the call's own.
_LASTING_WORDS = ("platform", "cuda", "region_socket", "fd passing")



class InplaceUploads:
    """The in-place upload path of one Client, and its MappingCache.
    Thread-safe: uploads may run at once (each pins the mappings it
    writes)."""

    def __init__(self, client: Any) -> None:  # a placement.Client
        self._client = client
        self.cache = MappingCache(client.options.inplace_mapping_bytes)
        #: Downloads read in place (placement._inplace_read), through the same cache.
        self.reads = InplaceReads(client, self.cache)
        self._lock = threading.Lock()
        self._off: Optional[str] = None  # why AUTO no longer tries, for this client
        self._uploads = 0  # committed in place
        self._fallbacks = 0  # AUTO uploads that took the staged path after trying

    # --- The decision ---------------------------------------------------------------
    def region_socket(self, path: TransferPath, array: np.ndarray) -> Optional[str]:
        """The daemon's region socket when this upload is to be written in
        place under `path`, else None (the staged path decides). INPLACE:
        FailedPreconditionError when the daemon is not on this host."""
        if path is TransferPath.INPLACE:
            return _region_pool.forced_socket(self._client)
        if path is not TransferPath.AUTO or array.nbytes < AUTO_MIN_BYTES:
            return None
        with self._lock:
            if self._off is not None:
                return None
        if self._client.regions.locate(array) is not None:
            return None  # already shared: the region path copies nothing here
        return _region_pool.auto_socket(self._client)

    def upload(self, array: np.ndarray, header: pb.UploadHeader, socket: str,
               path: TransferPath,
               written: Optional[Callable[[int], None]]) -> Optional[types_pb2.TensorInfo]:
        """The committed tensor, or None when AUTO is to take the staged
        path. `written(n)`, when given, is told as the bytes are written,
        piece by piece (of array.nbytes in all; a replicated array's
        replicas share them)."""
        for attempt in (0, 1):
            try:
                response = self._reserve(header)
            except (errors.FailedPreconditionError, errors.UnimplementedError) as e:
                return self._cannot(e, path)
            except errors.ResourceExhaustedError as e:
                # --max_upload_reservations is the path's own bound; a budget
                # or quota the staged upload meets as well.
                if path is TransferPath.AUTO and "reservation" in e.message:
                    return self._cannot(e, path)
                raise
            try:
                info = self._write_and_commit(array, response, socket, written)
            except (_SocketGone, _CommitNotFound) as e:
                # The daemon restarted (a TCP daemon's region socket is named
                # after its instance; its files are new ones), or the
                # reservation ended before the commit: nothing was committed.
                self._client.regions.forget()  # and the mappings (Tensors.on_forget)
                again = self._client.regions.same_host_socket()
                if attempt == 1 or again is None:
                    if path is TransferPath.AUTO and isinstance(e, _SocketGone):
                        return self._cannot(None, path)
                    raise e.error from None
                socket = again
                continue
            with self._lock:
                self._uploads += 1
            return info
        raise AssertionError("unreachable")

    def _cannot(self, error: Optional[errors.PlacementError],
                path: TransferPath) -> Optional[types_pb2.TensorInfo]:
        """A daemon that cannot write this upload in place: None (AUTO) or
        FailedPreconditionError (INPLACE)."""
        if path is TransferPath.INPLACE:
            if isinstance(error, errors.UnimplementedError):
                raise errors.FailedPreconditionError(
                    f"transfer_path='inplace': the daemon at {self._client.target} does not "
                    f"serve ReserveUpload (an older placementd); use 'auto'") from None
            assert error is not None
            raise error
        with self._lock:
            self._fallbacks += 1
            off = _region_pool.lasting_refusal(error, _LASTING_WORDS)
            if off is not None:
                self._off = off
        return None

    # --- The protocol ---------------------------------------------------------------
    def _reserve(self, header: pb.UploadHeader) -> vpb.ReserveUploadResponse:
        return self._client.unary(self._client.view_stub.ReserveUpload,
                                  vpb.ReserveUploadRequest(header=header), idempotent=False)

    def _cancel(self, reservation_id: str) -> None:
        """Best effort: the reservation also ends at its expiry, or when this
        process exits (it redeemed the token)."""
        try:
            self._client.unary(self._client.view_stub.CancelUpload,
                               vpb.CancelUploadRequest(reservation_id=reservation_id),
                               idempotent=False)
        except (errors.PlacementError, ValueError):  # ValueError: the channel was closed
            pass

    def _write_and_commit(self, array: np.ndarray, response: vpb.ReserveUploadResponse,
                          socket: str,
                          written: Optional[Callable[[int], None]]) -> types_pb2.TensorInfo:
        reservation = response.reservation_id
        mappings: List[Optional[Mapping]] = []
        try:
            try:
                fds = _region_fd.redeem_view(socket, response.fd_token)
            except errors.UnavailableError as e:
                raise _SocketGone(e) from None
            try:
                mappings = self._map(fds, response.slots)
                try:
                    _write_slots(array, response, fds, mappings, written)
                finally:
                    for m in mappings:
                        if m is not None:
                            self.cache.release(m)
            finally:
                for fd in fds:
                    os.close(fd)  # the mappings keep the memory
        except BaseException:
            self._cancel(reservation)
            raise
        try:
            return self._client.unary(
                self._client.view_stub.CommitUpload,
                vpb.CommitUploadRequest(reservation_id=reservation), idempotent=False).tensor
        except errors.NotFoundError as e:
            raise _CommitNotFound(e) from None
        except BaseException:
            # The commit may or may not have happened (a lost reply): a
            # cancel of a committed reservation is NOT_FOUND and changes
            # nothing; of an uncommitted one it frees the memory now.
            self._cancel(reservation)
            raise

    def _map(self, fds: Sequence[int],
             slots: Sequence[vpb.UploadSlot]) -> List[Optional[Mapping]]:
        """One pinned mapping per fd (the cache's when it maps that file),
        each covering what its slots name; None for an fd no slot writes. On
        failure nothing stays pinned."""
        need = [0] * len(fds)
        for s in slots:
            if s.size_bytes == 0:
                continue
            if not 0 <= s.fd_index < len(fds):
                raise errors.InternalError(
                    f"upload slot of shard {s.shard_index} names fd {s.fd_index}; "
                    f"{len(fds)} were handed over")
            if s.offset < 0 or s.size_bytes < 0 or s.offset + s.size_bytes > s.mapping_bytes:
                raise errors.InternalError(
                    f"upload slot of shard {s.shard_index}: [{s.offset}, "
                    f"{s.offset + s.size_bytes}) is outside its {s.mapping_bytes}-byte file")
            need[s.fd_index] = max(need[s.fd_index], s.mapping_bytes)
        mappings: List[Optional[Mapping]] = []
        try:
            for fd, size in zip(fds, need):
                mappings.append(self.cache.acquire(fd, size) if size > 0 else None)
        except BaseException:
            for m in mappings:
                if m is not None:
                    self.cache.release(m)
            raise
        return mappings

    # --- State ----------------------------------------------------------------------
    def stats(self) -> "InplaceStats":
        downloads, download_fallbacks, download_off, read_only = self.reads.counters()
        with self._lock:
            return InplaceStats(self._uploads, self._fallbacks, self._off, self.cache.stats(),
                                downloads, download_fallbacks, download_off, read_only)

    def close(self) -> None:
        self.cache.close()


@dataclasses.dataclass(frozen=True)
class InplaceStats:
    """What a client's in-place paths did: uploads committed in place, AUTO
    uploads that took the staged path after the daemon said it cannot, why
    AUTO stopped trying for good (None: it tries), and the mapping cache's
    counters (writable shards of downloads count there too); downloads read
    in place (placement._inplace_read), AUTO downloads that took the staged
    path after trying, why AUTO stopped reading in place, and sealed shards
    mapped read-only for a download (never cached)."""

    uploads: int
    fallbacks: int
    off: Optional[str]
    cache: CacheStats
    downloads: int = 0
    download_fallbacks: int = 0
    download_off: Optional[str] = None
    read_only_mappings: int = 0


class _Retryable(Exception):
    """A failure after which nothing was committed: the upload may be made
    again. `error` is what to raise when it is not."""

    def __init__(self, error: errors.PlacementError) -> None:
        super().__init__(error.message)
        self.error = error


class _SocketGone(_Retryable):
    """The region socket could not be reached to redeem the token."""


class _CommitNotFound(_Retryable):
    """CommitUpload answered NOT_FOUND (an expired reservation, or one of a
    session or daemon that is gone)."""


def _write_slots(array: np.ndarray, response: vpb.ReserveUploadResponse, fds: Sequence[int],
                 mappings: Sequence[Optional[Mapping]],
                 written: Optional[Callable[[int], None]]) -> None:
    """Copies every slot's box of `array` into its mapping (a file with no
    pages yet through its fd: Mapping.fill_fresh), telling `written` (when
    given) the array's share of the bytes of each piece of a slot
    (_progress.row_pieces); without it each slot is copied whole."""
    tensor = response.tensor
    dtype = _dtypes.from_proto(tensor.dtype)
    if dtype != array.dtype or tuple(tensor.shape) != array.shape:
        raise errors.InternalError(
            f"the reservation is {_dtypes.describe(tensor.dtype, tuple(tensor.shape))}; "
            f"the array is {array.dtype}{list(array.shape)}")
    total = sum(s.size_bytes for s in response.slots)
    done = 0
    reported = 0
    for s in response.slots:
        if s.size_bytes == 0:
            continue
        if not 0 <= s.shard_index < len(tensor.shards):
            raise errors.InternalError(
                f"an upload slot names shard {s.shard_index} of {len(tensor.shards)}")
        box, box_shape = _box(tensor.shards[s.shard_index], array.shape)
        if int(np.prod(box_shape, dtype=np.int64)) * dtype.itemsize != s.size_bytes:
            raise errors.InternalError(
                f"upload slot of shard {s.shard_index}: {s.size_bytes} bytes for a box of "
                f"{list(box_shape)} {dtype}")
        mapping = mappings[s.fd_index]
        assert mapping is not None  # _map made one for every fd a slot writes
        source = array[box].reshape(box_shape if box_shape else (1,))
        fresh = source.flags.c_contiguous and has_no_pages(fds[s.fd_index])
        target = mapping.bytes[s.offset:s.offset + s.size_bytes].view(dtype).reshape(source.shape)
        row_bytes = source[:1].nbytes
        # In pieces along the leading axis while progress is told: it moves
        # within a slot.
        pieces = _progress.row_pieces(len(source), row_bytes) if written is not None \
            else [(0, len(source))]
        for r0, r1 in pieces:
            at = s.offset + r0 * row_bytes
            if fresh:
                mapping.fill_fresh(fds[s.fd_index], at, source[r0:r1].reshape(-1).view(np.uint8))
            else:
                mapping.populate(at, s.offset + r1 * row_bytes)
                copy_box(target[r0:r1], source[r0:r1])
            done += (r1 - r0) * row_bytes
            share = done * array.nbytes // total  # replicas write the array's bytes again
            if written is not None:
                written(share - reported)
            reported = share
        del target


def _box(shard: types_pb2.ShardInfo,
         shape: Tuple[int, ...]) -> Tuple[Tuple[slice, ...], Tuple[int, ...]]:
    """The shard's box of the global array: slices and shape."""
    if len(shard.ranges) != len(shape):
        raise errors.InternalError(
            f"a shard has {len(shard.ranges)} ranges for an array of rank {len(shape)}")
    slices = []
    dims = []
    for r, n in zip(shard.ranges, shape):
        if not 0 <= r.begin <= r.end <= n:
            raise errors.InternalError(f"a shard range [{r.begin}, {r.end}) outside [0, {n})")
        slices.append(slice(r.begin, r.end))
        dims.append(r.end - r.begin)
    return tuple(slices), tuple(dims)
