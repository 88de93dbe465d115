"""TensorService calls: uploads and downloads, place, assemble.

Three paths for tensor bytes, chosen per transfer (TransportOptions.
transfer_path) by placement._inplace, placement._inplace_read and the
Client's RegionPool (docs/api/regions.md):
  * in place, against a same-host daemon that can: single-array uploads of
    1 MiB or more are written in place (placement._inplace: the client
    copies each shard's box straight into the daemon's device memory and
    commits), whole downloads of 1 MiB or more read in place
    (placement._inplace_read: the client copies each distinct box straight
    out of the daemon's device memory and unexports);
  * the gRPC stream: a header, then ~chunk_bytes messages framed straight
    from the caller's array (placement._wire; one copy per chunk, no
    whole-array copy); downloads write each received chunk straight into the
    result array. No message ever needs a raised size limit.
  * a same-host region: arrays inside the caller's SharedRegions are named
    where they lie; others are copied once into a pooled staging region and
    named there (one RegionSlice message per array); downloads ask the
    daemon to write into a region (the caller's, else a staging one copied
    out once).
Stream deadlines are TransportOptions.stream_timeout; unary ones
TransportOptions.timeout.
"""
from __future__ import annotations

from typing import (Any, Callable, Iterable, Iterator, List, Optional, Sequence,
                    Tuple, TypeVar)

import grpc
import numpy as np

from placement import _dtypes, _inplace, _inplace_read, _progress, _staging, _wire, errors
from placement._region_pool import parallel_copy
from placement._transport import TransferPath
from placement._shared_region import SharedRegion
from placement.v1 import tensor_service_pb2 as pb
from placement.v1 import types_pb2

_SERVICE = "/placement.v1.TensorService/"
_T = TypeVar("_T")


def _byte_view(array: np.ndarray) -> memoryview:
    """The bytes of a C-contiguous array, without copying."""
    return array.reshape(-1).view(np.uint8).data


def _stream_error(e: grpc.RpcError) -> errors.PlacementError:
    return errors.from_rpc_error(e)


class Tensors:
    """The TensorService of one client. Thread-safe."""

    def __init__(self, client: Any) -> None:  # a placement.Client
        self.client = client
        channel = client.transport.channel
        self._upload = channel.stream_unary(
            _SERVICE + "Upload", request_serializer=_wire.serializer,
            response_deserializer=pb.UploadResponse.FromString)
        self._upload_batch = channel.stream_unary(
            _SERVICE + "UploadBatch", request_serializer=_wire.serializer,
            response_deserializer=pb.UploadBatchResponse.FromString)
        self._download = channel.unary_stream(
            _SERVICE + "Download", request_serializer=pb.DownloadRequest.SerializeToString,
            response_deserializer=_wire.download_deserializer(pb.DownloadHeader))
        #: The in-place upload path and its mapping cache (placement._inplace).
        self.inplace = _inplace.InplaceUploads(client)
        # A daemon that forgot the pool's regions restarted or ended the
        # session: its memory files are not handed out again.
        client.regions.on_forget(self.inplace.cache.clear)

    @property
    def chunk(self) -> int:
        return self.client.options.chunk_bytes

    # --- Upload -----------------------------------------------------------------
    def upload(self, array: np.ndarray, rule: Optional[pb.PlacementRule] = None,
               name: str = "", *, path: Any = None,
               process_local: Optional[pb.ProcessLocal] = None,
               progress: Optional[_progress.ProgressFn] = None) -> types_pb2.TensorInfo:
        """One array (JAX's rules: a spec longer than the rank is an error).
        `path` overrides TransportOptions.transfer_path. With
        `process_local`, `array` is this process's part of a
        multi-controller upload (placement.cluster). `progress(done, total)`
        follows the bytes (placement._progress)."""
        array = _dtypes.as_host_array(array)
        header = self._upload_header(array.dtype, array.shape, rule, name)
        if process_local is not None:
            header.header.process_local.CopyFrom(process_local)
        tracker = _progress.Tracker(progress, array.nbytes)
        if process_local is None:
            done = self._upload_in_place(array, header.header, path, tracker)
            if done is not None:
                return done

        def requests(staged: _staging.Staged) -> Iterator[object]:
            yield header
            if 0 in staged.slices:
                yield pb.UploadRequest(region=staged.slices[0])
                return
            data = _byte_view(array)
            step = self.chunk
            for off in range(0, len(data), step):
                piece = data[off:off + step]
                yield _wire.upload_chunk(piece)
                tracker.add(len(piece))  # gRPC asks for the next message once this one went

        info = self._staged_call([array], path,
                                 lambda staged: self._upload_messages(requests(staged)))
        tracker.finish()
        return info

    def _upload_in_place(self, array: np.ndarray, header: pb.UploadHeader, path: Any,
                         tracker: _progress.Tracker) -> Optional[types_pb2.TensorInfo]:
        """The tensor, when `path` writes this upload in place
        (placement._inplace) and the daemon could; else None: the caller
        takes the stream or a staging region."""
        chosen = self.client.regions.path(path)
        if chosen not in (TransferPath.AUTO, TransferPath.INPLACE):
            return None
        socket = self.inplace.region_socket(chosen, array)
        if socket is None:
            return None
        info = self.inplace.upload(array, header, socket, chosen,
                                   tracker.add if tracker.listening else None)
        if info is not None:
            tracker.finish()
        return info

    def _staged_call(self, arrays: Sequence[np.ndarray], path: Any,
                     send: Callable[[_staging.Staged], _T]) -> _T:
        """send(staged), with `arrays` staged as the path says (no slices on
        the stream). A NOT_FOUND naming a staging region means the daemon no
        longer knows the pool's regions (it restarted, or the session owning
        them ended); the daemon then failed the call without committing
        anything, so the pool starts afresh and the call is made once more."""
        pool = self.client.regions
        chosen = pool.path(path)
        for attempt in (0, 1):
            staged = _staging.stage(pool, chosen, arrays)
            try:
                result = send(staged)
            except errors.NotFoundError as e:
                gone = staged.names_staging(e)
                staged.finish(e)
                recover = self.client.transport.recover_session
                if attempt == 0 and recover is not None and recover(e):
                    pool.forget()  # the daemon that forgot the session forgot its regions
                    continue
                if not gone or attempt == 1:
                    raise
                pool.forget()
                continue
            except BaseException:
                staged.release()
                raise
            staged.release()
            return result
        raise AssertionError("unreachable")

    def upload_from_region(self, region: SharedRegion, offset: int, dtype: np.dtype,
                           shape: Tuple[int, ...], rule: Optional[pb.PlacementRule] = None,
                           name: str = "") -> types_pb2.TensorInfo:
        """An array whose bytes the daemon reads from `region` at `offset`."""
        header = self._upload_header(dtype, shape, rule, name)
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        messages: List[object] = [header]
        if nbytes > 0:
            messages.append(pb.UploadRequest(region=_staging.region_slice(region, offset, nbytes)))
        return self._upload_messages(messages)

    def _upload_header(self, dtype: Any, shape: Sequence[int],
                       rule: Optional[pb.PlacementRule], name: str) -> pb.UploadRequest:
        header = pb.UploadRequest()
        h = header.header
        h.dtype = _dtypes.to_proto(dtype)
        h.shape.extend(shape)
        h.name = name
        h.owner = self.client.owner
        if rule is not None:
            h.rule.CopyFrom(rule)
        return header

    def _upload_messages(self, messages: Iterable[object]) -> types_pb2.TensorInfo:
        try:
            return self._upload(iter(messages), timeout=self.client.options.stream_timeout).tensor
        except grpc.RpcError as e:
            raise _stream_error(e) from None

    def upload_batch(self, arrays: Sequence[Tuple[str, np.ndarray]],
                     rule: Optional[pb.PlacementRule] = None,
                     name: str = "", *, path: Any = None,
                     process_local: Optional[pb.ProcessLocal] = None,
                     progress: Optional[_progress.ProgressFn] = None
                     ) -> List[types_pb2.TensorInfo]:
        """A group under one rule, all or nothing (UploadBatch); results in
        `arrays` order. `path` overrides TransportOptions.transfer_path. With
        `process_local`, the arrays are this process's parts of a
        multi-controller batch: array `key` commits as "<global_name>/<key>".
        A batch of one array is written in place as upload() would (no
        process_local), under the name the batch would give it."""
        if process_local is None and len(arrays) == 1:
            key, array = arrays[0]
            single = self._upload_header(array.dtype, array.shape, rule,
                                         f"{name}/{key}" if name else "")
            done = self._upload_in_place(array, single.header, path,
                                         _progress.Tracker(progress, array.nbytes))
            if done is not None:
                return [done]
        header = pb.UploadBatchRequest()
        header.header.name = name
        header.header.owner = self.client.owner
        if rule is not None:
            header.header.rule.CopyFrom(rule)
        if process_local is not None:
            header.header.process_local.CopyFrom(process_local)
        fill_batch_header(header.header, arrays)
        tracker = _progress.Tracker(progress, sum(a.nbytes for _, a in arrays))

        def requests(staged: _staging.Staged) -> Iterator[object]:
            yield header
            for index, (_, array) in enumerate(arrays):
                found = staged.slices.get(index)
                if found is not None:
                    message = pb.UploadBatchRequest()
                    message.chunk.array_index = index
                    message.chunk.region.CopyFrom(found)
                    yield message
                    tracker.add(array.nbytes)
                else:
                    data = _byte_view(array)
                    for off in range(0, len(data), self.chunk):
                        piece = data[off:off + self.chunk]
                        yield _wire.batch_chunk(2, index, piece)
                        tracker.add(len(piece))

        def send(staged: _staging.Staged) -> pb.UploadBatchResponse:
            try:
                return self._upload_batch(requests(staged),
                                          timeout=self.client.options.stream_timeout)
            except grpc.RpcError as e:
                raise _stream_error(e) from None

        response = self._staged_call([a for _, a in arrays], path, send)
        if len(response.tensors) != len(arrays):
            raise errors.InternalError(f"UploadBatch of {len(arrays)} arrays returned "
                                       f"{len(response.tensors)} tensors")
        tracker.finish()
        return [t.tensor for t in response.tensors]

    # --- Download ---------------------------------------------------------------
    def download(self, tensor_id: str, *, device_id: Optional[int] = None,
                 process_index: Optional[int] = None,
                 info: Optional[types_pb2.TensorInfo] = None,
                 out: Optional[np.ndarray] = None,
                 path: Any = None,
                 progress: Optional[_progress.ProgressFn] = None
                 ) -> Tuple[pb.DownloadHeader, np.ndarray]:
        """The whole array, one device's shard, or one node's rows (loadax
        global_to_host_array). Retried on UNAVAILABLE before any byte came.

        `info` (the tensor's TensorInfo, when the caller has it) sizes the
        region path without a Describe call; `out` (a writable C-contiguous
        array of the result's dtype and shape) receives the bytes and is
        returned -- with no copy here when it lies in one of the caller's
        SharedRegions; `path` overrides TransportOptions.transfer_path
        (a whole download is read in place under "auto" and "inplace":
        placement._inplace_read); `progress(done, total)` follows the bytes
        (placement._progress)."""
        request = _download_request(tensor_id, device_id, process_index)
        request.chunk_size_bytes = self.chunk
        if out is not None and (not isinstance(out, np.ndarray) or not out.flags.c_contiguous
                                or not out.flags.writeable):
            raise errors.InvalidArgumentError(
                "out must be a writable C-contiguous numpy array")
        if out is not None and info is not None and request.whole:
            _check_out(tensor_id, info.dtype, tuple(info.shape), out)  # before any byte moves
        pool = self.client.regions
        chosen = pool.path(path)
        if request.whole and chosen in (TransferPath.AUTO, TransferPath.INPLACE):
            done, info = self._download_in_place(tensor_id, info, out, chosen, progress)
            if done is not None:
                return done
        if chosen is not TransferPath.STREAM:
            found = pool.locate(out) if out is not None else None
            if found is not None:  # the daemon writes straight into the caller's region
                header = self._download_to_region(request, found[0], found[1], out.nbytes,
                                                  caller_room=True)
                _check_out(tensor_id, header.dtype, tuple(header.shape), out)
                _progress.Tracker(progress, header.total_bytes).finish()
                return header, out
            if out is not None:
                room = out.nbytes
            else:
                if info is None:
                    info = self.describe(tensor_id)
                room = _staging.download_room(info, _dtypes.from_proto(info.dtype), device_id,
                                              process_index)
            for attempt in (0, 1):
                lease = pool.lease_for(chosen, room)
                if lease is None:
                    break
                region = lease.region
                assert region is not None
                try:
                    header = self._download_to_region(request, region, 0, room,
                                                      caller_room=out is not None)
                except errors.NotFoundError as e:
                    lease.discard()
                    if region.id not in e.message or attempt == 1:
                        raise
                    pool.forget()  # the daemon forgot the pool's regions: see _staged_call
                    continue
                except BaseException:
                    lease.discard()  # the daemon may still be writing into it
                    raise
                try:
                    target = _target(tensor_id, header, out)
                    parallel_copy(_staging.as_bytes(target), region.bytes[:header.total_bytes])
                finally:
                    lease.release()
                _progress.Tracker(progress, header.total_bytes).finish()
                return header, _shaped(header, target, out)
        return self._download_stream(request, tensor_id, out, progress)

    def _download_in_place(self, tensor_id: str, info: Optional[types_pb2.TensorInfo],
                           out: Optional[np.ndarray], path: TransferPath,
                           progress: Optional[_progress.ProgressFn]
                           ) -> Tuple[Optional[Tuple[pb.DownloadHeader, np.ndarray]],
                                      Optional[types_pb2.TensorInfo]]:
        """The whole download read in place (placement._inplace_read) when
        `path` reads it so and the daemon could, else None: the caller takes
        a region or the stream. Also `info`, described here when it was
        needed and not given."""
        if path is TransferPath.AUTO and out is not None and \
                self.client.regions.locate(out) is not None:
            return None, info  # the daemon writes into the caller's region: no copy here
        reads = self.inplace.reads
        nbytes = info.size_bytes if info is not None else \
            out.nbytes if out is not None else _inplace_read.AUTO_MIN_BYTES
        socket = reads.region_socket(path, nbytes)
        if socket is None:
            return None, info
        if info is None and out is None:
            info = self.describe(tensor_id)
            if path is TransferPath.AUTO and info.size_bytes < _inplace_read.AUTO_MIN_BYTES:
                return None, info
        return reads.download(tensor_id, info, out, socket, path, progress), info

    def download_to_region(self, tensor_id: str, region: SharedRegion, offset: int = 0,
                           size: int = 0, *, device_id: Optional[int] = None,
                           process_index: Optional[int] = None) -> pb.DownloadHeader:
        """The daemon writes the selection into `region` at `offset` (at
        most `size` bytes; 0 = the rest of the region)."""
        request = _download_request(tensor_id, device_id, process_index)
        if size == 0 and 0 <= offset <= region.size:
            size = region.size - offset
        return self._download_to_region(request, region, offset, size)

    def _download_to_region(self, request: pb.DownloadRequest, region: SharedRegion,
                            offset: int, size: int, *,
                            caller_room: bool = False) -> pb.DownloadHeader:
        """With `caller_room`, `size` is the caller's `out`: a larger
        download is InvalidArgumentError naming both sizes."""
        request.destination.CopyFrom(_staging.region_slice(region, offset, size))

        def attempt() -> pb.DownloadHeader:
            header = None
            for message in self._download(request, timeout=self.client.options.stream_timeout):
                if isinstance(message, pb.DownloadHeader):
                    header = message
                elif len(message):
                    raise errors.InternalError(
                        f"download of '{request.tensor_id}' into region {region.id}: the daemon "
                        f"sent bytes on the stream")
            if header is None:
                raise errors.InternalError(
                    f"download of '{request.tensor_id}': the stream ended without a header")
            return header

        # Idempotent: a retry writes the same bytes into the same place.
        try:
            return self.client.transport.run(attempt, idempotent=True)
        except errors.OutOfRangeError as e:
            if not caller_room:
                raise
            raise errors.InvalidArgumentError(
                f"out holds {size} bytes; tensor '{request.tensor_id}' needs more ({e})") from None

    def _download_stream(self, request: pb.DownloadRequest, tensor_id: str,
                         out: Optional[np.ndarray],
                         progress: Optional[_progress.ProgressFn] = None
                         ) -> Tuple[pb.DownloadHeader, np.ndarray]:
        started = False

        def attempt() -> Tuple[pb.DownloadHeader, np.ndarray]:
            nonlocal started
            header = None
            target = None
            data = None
            pos = 0
            tracker = _progress.Tracker(None, 0)
            for message in self._download(request, timeout=self.client.options.stream_timeout):
                if isinstance(message, pb.DownloadHeader):
                    started = True
                    header = message
                    target = _target(tensor_id, header, out)
                    data = _staging.as_bytes(target)
                    tracker = _progress.Tracker(progress, header.total_bytes)
                    continue
                if data is None or pos + len(message) > len(data):
                    raise errors.InternalError(
                        f"download of '{tensor_id}': the daemon sent more bytes than its "
                        f"header announced, or a chunk before the header")
                data[pos:pos + len(message)] = message
                pos += len(message)
                tracker.add(len(message))
            if header is None or data is None or pos != len(data):
                raise errors.InternalError(
                    f"download of '{tensor_id}': got {pos} of "
                    f"{header.total_bytes if header else '?'} bytes")
            tracker.finish()
            return header, _shaped(header, target, out)

        return self.client.transport.run(attempt, idempotent=True, retryable=lambda: not started)

    # --- Metadata, lifetime, placement -------------------------------------------
    def describe(self, tensor_id: str) -> types_pb2.TensorInfo:
        return self.client.unary(self.client.tensor_stub.Describe,
                                 pb.DescribeRequest(tensor_id=tensor_id), idempotent=True).tensor

    def list(self, name_prefix: str = "", mesh_id: str = "") -> List[types_pb2.TensorInfo]:
        out: List[types_pb2.TensorInfo] = []
        request = pb.ListTensorsRequest(name_prefix=name_prefix, mesh_id=mesh_id)
        while True:  # every page
            response = self.client.unary(self.client.tensor_stub.List, request, idempotent=True)
            out.extend(response.tensors)
            if not response.next_page_token:
                return out
            request.page_token = response.next_page_token

    def place(self, tensor_ids: Sequence[str], rule: pb.PlacementRule, *, donate: bool = False,
              name: str = "") -> List[types_pb2.TensorInfo]:
        request = pb.PlaceRequest(tensor_ids=list(tensor_ids), rule=rule, name=name,
                                  source=pb.SOURCE_HANDLING_DONATE if donate
                                  else pb.SOURCE_HANDLING_KEEP)
        return list(self.client.unary(self.client.tensor_stub.Place, request,
                                      idempotent=False).tensors)

    def assemble(self, shape: Sequence[int], placement: types_pb2.Placement,
                 tensor_ids: Sequence[str], *, donate: bool = False,
                 name: str = "") -> types_pb2.TensorInfo:
        request = pb.AssembleRequest(shape=list(shape), placement=placement,
                                     tensor_ids=list(tensor_ids), name=name,
                                     source=pb.SOURCE_HANDLING_DONATE if donate
                                     else pb.SOURCE_HANDLING_KEEP)
        return self.client.unary(self.client.tensor_stub.Assemble, request,
                                 idempotent=False).tensor


def _download_request(tensor_id: str, device_id: Optional[int],
                      process_index: Optional[int]) -> pb.DownloadRequest:
    """What to download: one device's shard, one node's rows, or the whole
    array."""
    request = pb.DownloadRequest(tensor_id=tensor_id)
    if device_id is not None:
        request.device_id = device_id
    elif process_index is not None:
        request.process_index = process_index
    else:
        request.whole = True
    return request


def _check_out(tensor_id: str, dtype: Any, shape: Tuple[int, ...], out: np.ndarray) -> None:
    """The caller's `out` must have exactly the download's dtype and shape."""
    expected = _dtypes.from_proto(dtype)
    if out.dtype != expected or out.shape != shape:
        raise errors.InvalidArgumentError(
            f"out is {out.dtype}{list(out.shape)}; the download of '{tensor_id}' is "
            f"{_dtypes.describe(dtype, shape)} ({expected})")


def _target(tensor_id: str, header: pb.DownloadHeader, out: Optional[np.ndarray]) -> np.ndarray:
    """Where the downloaded bytes go: the caller's `out` (checked), else a
    new flat byte array."""
    if out is None:
        return np.empty(header.total_bytes, dtype=np.uint8)
    _check_out(tensor_id, header.dtype, tuple(header.shape), out)
    return out


def _shaped(header: pb.DownloadHeader, target: np.ndarray,
            out: Optional[np.ndarray]) -> np.ndarray:
    if out is not None:
        return out
    return target.view(_dtypes.from_proto(header.dtype)).reshape(tuple(header.shape))


def fill_batch_header(header: pb.BatchHeader,
                      arrays: Sequence[Tuple[str, np.ndarray]]) -> None:
    for key, array in arrays:
        a = header.arrays.add()
        a.key = key
        a.dtype = _dtypes.to_proto(array.dtype)
        a.shape.extend(array.shape)


def batch_chunks(outer_field: int, index: int, array: np.ndarray,
                 chunk: int) -> Iterator[bytes]:
    """Framed BatchChunk messages of one array (UploadBatch: field 2,
    Prefetch: field 3)."""
    data = _byte_view(array)
    for off in range(0, len(data), chunk):
        yield _wire.batch_chunk(outer_field, index, data[off:off + chunk])

