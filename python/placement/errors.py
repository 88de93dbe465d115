"""Errors: one PlacementError subclass per gRPC status code.

Every failure of a call to the daemon, and every check this package makes
before a call, raises a PlacementError carrying the gRPC `code` and the
`message` unchanged (``str(err) == err.message``), so the daemon's texts --
the seeds' own messages among them -- reach the caller verbatim.

Where a daemon message names a C++ or protobuf spelling of something this
package spells otherwise, the hint is given in Python's words (_PYTHON_WORDS:
"use SHARDING_MODE_PADDED (ShardingMode::kPadded)" reads "use
NamedSharding(mesh, spec, padded=True)"); the rest of the text is unchanged.

The classes also derive from the builtin exception a seed user would catch:
INVALID_ARGUMENT / FAILED_PRECONDITION / OUT_OF_RANGE are ValueErrors (the
seeds raise ValueError), NOT_FOUND is a LookupError, DEADLINE_EXCEEDED a
TimeoutError, UNIMPLEMENTED a NotImplementedError.
"""
from __future__ import annotations

from typing import Dict, Optional, Type

import grpc


class PlacementError(Exception):
    """Base class. `code` is a grpc.StatusCode; `message` the status text."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code.name}: {self.message!r})"


class CancelledError(PlacementError):
    code = grpc.StatusCode.CANCELLED


class UnknownError(PlacementError):
    code = grpc.StatusCode.UNKNOWN


class InvalidArgumentError(PlacementError, ValueError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceededError(PlacementError, TimeoutError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFoundError(PlacementError, LookupError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExistsError(PlacementError):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDeniedError(PlacementError):
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhaustedError(PlacementError, MemoryError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPreconditionError(PlacementError, ValueError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class AbortedError(PlacementError):
    code = grpc.StatusCode.ABORTED


class OutOfRangeError(PlacementError, ValueError):
    code = grpc.StatusCode.OUT_OF_RANGE


class UnimplementedError(PlacementError, NotImplementedError):
    code = grpc.StatusCode.UNIMPLEMENTED


class InternalError(PlacementError):
    code = grpc.StatusCode.INTERNAL


class UnavailableError(PlacementError, ConnectionError):
    code = grpc.StatusCode.UNAVAILABLE


class DataLossError(PlacementError):
    code = grpc.StatusCode.DATA_LOSS


class UnauthenticatedError(PlacementError):
    code = grpc.StatusCode.UNAUTHENTICATED


_BY_CODE: Dict[grpc.StatusCode, Type[PlacementError]] = {
    cls.code: cls
    for cls in (CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError,
                NotFoundError, AlreadyExistsError, PermissionDeniedError, ResourceExhaustedError,
                FailedPreconditionError, AbortedError, OutOfRangeError, UnimplementedError,
                InternalError, UnavailableError, DataLossError, UnauthenticatedError)
}


# Daemon hints in C++ / protobuf words -> the same hint in this package's.
_PYTHON_WORDS = (
    ("use SHARDING_MODE_PADDED (ShardingMode::kPadded) for uneven shards",
     "use NamedSharding(mesh, spec, padded=True) for uneven shards"),
)


def in_python_words(message: str) -> str:
    for theirs, ours in _PYTHON_WORDS:
        message = message.replace(theirs, ours)
    return message


def error_for(code: grpc.StatusCode, message: str) -> PlacementError:
    """The PlacementError subclass for `code`, with `message`."""
    return _BY_CODE.get(code, PlacementError)(message, code)


def from_rpc_error(error: grpc.RpcError) -> PlacementError:
    """Converts a failed call (a grpc.Call raised as RpcError)."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else str(error)
    return error_for(code or grpc.StatusCode.UNKNOWN, in_python_words(details or ""))
