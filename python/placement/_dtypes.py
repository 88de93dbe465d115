"""NumPy dtypes <-> placement.v1.DType, and host-array normalisation.

The daemon stores f32 f64 f16 bf16 i8 i16 i32 i64 u8 bool (bool as one
byte), row-major and little-endian. bf16 maps to ml_dtypes.bfloat16 (the
type JAX uses) when ml_dtypes is installed; without it bf16 tensors come
back as raw uint16 bit patterns viewed as dtype('V2').
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import numpy as np

from placement import errors
from placement.v1 import types_pb2

try:  # optional
    import ml_dtypes

    BFLOAT16: Optional[np.dtype] = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - exercised only without ml_dtypes
    BFLOAT16 = None

_TO_PROTO: Dict[np.dtype, Any] = {
    np.dtype(np.float32): types_pb2.DTYPE_F32,
    np.dtype(np.float64): types_pb2.DTYPE_F64,
    np.dtype(np.float16): types_pb2.DTYPE_F16,
    np.dtype(np.int8): types_pb2.DTYPE_I8,
    np.dtype(np.int16): types_pb2.DTYPE_I16,
    np.dtype(np.int32): types_pb2.DTYPE_I32,
    np.dtype(np.int64): types_pb2.DTYPE_I64,
    np.dtype(np.uint8): types_pb2.DTYPE_U8,
    np.dtype(np.bool_): types_pb2.DTYPE_BOOL,
}
if BFLOAT16 is not None:
    _TO_PROTO[BFLOAT16] = types_pb2.DTYPE_BF16

_FROM_PROTO: Dict[Any, np.dtype] = {v: k for k, v in _TO_PROTO.items()}
if BFLOAT16 is None:  # pragma: no cover
    _FROM_PROTO[types_pb2.DTYPE_BF16] = np.dtype("V2")

_SHORT: Dict[Any, str] = {
    types_pb2.DTYPE_F32: "f32", types_pb2.DTYPE_F64: "f64", types_pb2.DTYPE_F16: "f16",
    types_pb2.DTYPE_BF16: "bf16", types_pb2.DTYPE_I8: "i8", types_pb2.DTYPE_I16: "i16",
    types_pb2.DTYPE_I32: "i32", types_pb2.DTYPE_I64: "i64", types_pb2.DTYPE_U8: "u8",
    types_pb2.DTYPE_BOOL: "bool",
}

SUPPORTED = "float32, float64, float16, bfloat16, int8, int16, int32, int64, uint8, bool"


def to_proto(dtype: Any) -> Any:
    """The DType of a numpy dtype; InvalidArgumentError for others."""
    dt = np.dtype(dtype)
    if dt.byteorder == ">":
        dt = dt.newbyteorder("<")
    found = _TO_PROTO.get(dt)
    if found is None:
        raise errors.InvalidArgumentError(
            f"dtype {dt} is not supported by placementd; supported: {SUPPORTED}")
    return found


def from_proto(dtype: Any) -> np.dtype:
    found = _FROM_PROTO.get(dtype)
    if found is None:
        raise errors.InvalidArgumentError(f"the daemon sent unknown dtype {dtype}")
    return found


def describe(dtype: Any, shape: Sequence[int]) -> str:
    """'f32[32,784]', the daemon's notation."""
    return f"{_SHORT.get(dtype, str(dtype))}[{','.join(str(d) for d in shape)}]"


def as_host_array(value: Any) -> np.ndarray:
    """A C-contiguous little-endian numpy array of a supported dtype for a
    leaf (numpy array, scalar, JAX array, anything np.asarray accepts)."""
    array = np.asarray(value)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    to_proto(array.dtype)  # raises for unsupported dtypes
    # (np.ascontiguousarray would turn scalars into shape (1,).)
    return array if array.flags.c_contiguous else array.copy(order="C")
