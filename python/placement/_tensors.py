"""TensorService calls: chunked uploads and downloads, place, assemble.

Uploads stream a header, then ~chunk_bytes messages framed straight from the
caller's array (placement._wire; one copy per chunk, no whole-array copy);
downloads write each received chunk straight into the result array. No
message ever needs a raised size limit. Stream deadlines are
TransportOptions.stream_timeout; unary ones TransportOptions.timeout.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, List, Optional, Sequence, Tuple

import grpc
import numpy as np

from placement import _dtypes, _wire, errors
from placement.v1 import tensor_service_pb2 as pb
from placement.v1 import types_pb2

if TYPE_CHECKING:
    from placement.client import Client

_SERVICE = "/placement.v1.TensorService/"


def _byte_view(array: np.ndarray) -> memoryview:
    """The bytes of a C-contiguous array, without copying."""
    return array.reshape(-1).view(np.uint8).data


def _stream_error(e: grpc.RpcError) -> errors.PlacementError:
    return errors.from_rpc_error(e)


class Tensors:
    """The TensorService of one client. Thread-safe."""

    def __init__(self, client: "Client") -> None:
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

    @property
    def chunk(self) -> int:
        return self.client.options.chunk_bytes

    # --- Upload -----------------------------------------------------------------
    def upload(self, array: np.ndarray, rule: Optional[pb.PlacementRule] = None,
               name: str = "") -> types_pb2.TensorInfo:
        """One array (JAX's rules: a spec longer than the rank is an error)."""
        array = _dtypes.as_host_array(array)
        header = pb.UploadRequest()
        h = header.header
        h.dtype = _dtypes.to_proto(array.dtype)
        h.shape.extend(array.shape)
        h.name = name
        h.owner = self.client.owner
        if rule is not None:
            h.rule.CopyFrom(rule)

        def requests() -> Iterator[object]:
            yield header
            data = _byte_view(array)
            step = self.chunk
            for off in range(0, len(data), step):
                yield _wire.upload_chunk(data[off:off + step])

        try:
            return self._upload(requests(), timeout=self.client.options.stream_timeout).tensor
        except grpc.RpcError as e:
            raise _stream_error(e) from None

    def upload_batch(self, arrays: Sequence[Tuple[str, np.ndarray]],
                     rule: Optional[pb.PlacementRule] = None,
                     name: str = "") -> List[types_pb2.TensorInfo]:
        """A group under one rule, all or nothing (UploadBatch); results in
        `arrays` order."""
        header = pb.UploadBatchRequest()
        header.header.name = name
        header.header.owner = self.client.owner
        if rule is not None:
            header.header.rule.CopyFrom(rule)
        fill_batch_header(header.header, arrays)

        def requests() -> Iterator[object]:
            yield header
            for index, (_, array) in enumerate(arrays):
                yield from batch_chunks(2, index, array, self.chunk)

        try:
            response = self._upload_batch(requests(),
                                          timeout=self.client.options.stream_timeout)
        except grpc.RpcError as e:
            raise _stream_error(e) from None
        if len(response.tensors) != len(arrays):
            raise errors.InternalError(f"UploadBatch of {len(arrays)} arrays returned "
                                       f"{len(response.tensors)} tensors")
        return [t.tensor for t in response.tensors]

    # --- Download ---------------------------------------------------------------
    def download(self, tensor_id: str, *, device_id: Optional[int] = None,
                 process_index: Optional[int] = None
                 ) -> Tuple[pb.DownloadHeader, np.ndarray]:
        """The whole array, one device's shard, or one node's rows (loadax
        global_to_host_array). Retried on UNAVAILABLE before any byte came."""
        request = pb.DownloadRequest(tensor_id=tensor_id, chunk_size_bytes=self.chunk)
        if device_id is not None:
            request.device_id = device_id
        elif process_index is not None:
            request.process_index = process_index
        else:
            request.whole = True
        started = False

        def attempt() -> Tuple[pb.DownloadHeader, np.ndarray]:
            nonlocal started
            header = None
            out = None
            pos = 0
            for message in self._download(request, timeout=self.client.options.stream_timeout):
                if isinstance(message, pb.DownloadHeader):
                    started = True
                    header = message
                    out = np.empty(header.total_bytes, dtype=np.uint8)
                    continue
                if out is None or pos + len(message) > len(out):
                    raise errors.InternalError(
                        f"download of '{tensor_id}': the daemon sent more bytes than its "
                        f"header announced, or a chunk before the header")
                out[pos:pos + len(message)] = message
                pos += len(message)
            if header is None or out is None or pos != len(out):
                raise errors.InternalError(
                    f"download of '{tensor_id}': got {pos} of "
                    f"{header.total_bytes if header else '?'} bytes")
            return header, out.view(_dtypes.from_proto(header.dtype)).reshape(tuple(header.shape))

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

