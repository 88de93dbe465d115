"""Protobuf wire framing for the bulk messages of the tensor streams.

Chunk messages carry ~1 MiB of tensor bytes. Building them as protobuf
objects costs a copy into the message and another one when it is serialized;
framing them here costs one: the field tag and length are a few bytes put in
front of a slice of the caller's buffer (``prefix + memoryview``). Headers
and every other message go through the generated classes. The encodings
follow proto/placement/v1 field numbers:

  UploadRequest.chunk = 2 (bytes)
  UploadBatchRequest.chunk = 2 / PrefetchRequest.chunk = 3 (BatchChunk)
  BatchChunk.array_index = 1 (int32), BatchChunk.data = 2 (bytes)
  DownloadResponse.header = 1, DownloadResponse.chunk = 2 (bytes)
"""
from __future__ import annotations

from typing import Any, Callable, Tuple, Union

_LEN = 2  # wire type: length-delimited
_VARINT = 0


def _tag(field: int, wire_type: int) -> bytes:
    return encode_varint((field << 3) | wire_type)


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def decode_varint(buf: Union[bytes, memoryview], pos: int) -> Tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


_UPLOAD_CHUNK = _tag(2, _LEN)
_BATCH_DATA = _tag(2, _LEN)
_BATCH_INDEX = _tag(1, _VARINT)


def upload_chunk(data: memoryview) -> bytes:
    """A serialized UploadRequest{chunk: data}."""
    return _UPLOAD_CHUNK + encode_varint(len(data)) + data


def batch_chunk(outer_field: int, array_index: int, data: memoryview) -> bytes:
    """A serialized message whose field `outer_field` is
    BatchChunk{array_index, data} (UploadBatchRequest: 2, PrefetchRequest: 3)."""
    inner = b""
    if array_index:
        inner = _BATCH_INDEX + encode_varint(array_index)
    inner += _BATCH_DATA + encode_varint(len(data))
    return (_tag(outer_field, _LEN) + encode_varint(len(inner) + len(data)) + inner) + data


def serializer(message: Any) -> bytes:
    """Request serializer accepting pre-framed bytes or a protobuf message."""
    if isinstance(message, bytes):
        return message
    return message.SerializeToString()


_DOWNLOAD_HEADER = (1 << 3) | _LEN
_DOWNLOAD_CHUNK = (2 << 3) | _LEN


def download_deserializer(header_type: Any) -> Callable[[bytes], Any]:
    """DownloadResponse deserializer: returns the parsed header message, or a
    memoryview of the chunk's bytes inside the received buffer (no copy)."""

    def parse(raw: bytes) -> Any:
        view = memoryview(raw)
        pos = 0
        chunk = None
        header = None
        while pos < len(view):
            key, pos = decode_varint(view, pos)
            if key & 7 != _LEN:
                raise ValueError(f"unexpected wire type {key & 7} in DownloadResponse")
            size, pos = decode_varint(view, pos)
            if key == _DOWNLOAD_CHUNK:
                chunk = view[pos:pos + size]
            elif key == _DOWNLOAD_HEADER:
                header = header_type.FromString(bytes(view[pos:pos + size]))
            pos += size
        if chunk is not None:
            return chunk
        return header if header is not None else memoryview(b"")

    return parse
