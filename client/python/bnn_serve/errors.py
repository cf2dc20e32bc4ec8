"""Exceptions: one type per gRPC status family, each carrying the server's message.

Every failed call raises a subclass of :class:`BnnError`. The server's message
names the offending field, the value and the violated limit
(``rows[0].x[0] is nan; …``); docs/api.md has the table of RPC × failure →
status. Catch the specific type to react to one family::

    try:
        client.predict("fraud@stable", X)
    except bnn_serve.NotFoundError:
        ...
"""

from __future__ import annotations

from typing import Optional

import grpc


class BnnError(Exception):
    """A call failed. ``code`` is the gRPC status, ``message`` the server's text.

    Attributes:
      code: the ``grpc.StatusCode`` of the failure.
      message: the server's (or, for client-side failures such as an
        unreachable server, gRPC's) message.
      request_id: the ``x-request-id`` the server assigned to the call, when
        it sent one (quote it when reporting a failure), else None.
    """

    #: The status this class stands for (None for the base class).
    status_code: Optional[grpc.StatusCode] = None

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None,
                 request_id: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code if code is not None else self.status_code
        self.request_id = request_id

    def __str__(self) -> str:
        name = self.code.name if self.code is not None else "ERROR"
        return f"{name}: {self.message}"


class InvalidArgumentError(BnnError):
    """The request is malformed (a missing field, a value out of range, a NaN)."""
    status_code = grpc.StatusCode.INVALID_ARGUMENT


class NotFoundError(BnnError):
    """An unknown dataset, job, snapshot, model, alias or version."""
    status_code = grpc.StatusCode.NOT_FOUND


class AlreadyExistsError(BnnError):
    """An upload with a dataset name that is taken."""
    status_code = grpc.StatusCode.ALREADY_EXISTS


class ResourceExhaustedError(BnnError):
    """A server limit (the message names its flag), the memory budget or a full disk."""
    status_code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPreconditionError(BnnError):
    """A stale expected_version, a delete of something in use, a newer format."""
    status_code = grpc.StatusCode.FAILED_PRECONDITION


class PermissionDeniedError(BnnError):
    """The token lacks the scope the RPC needs."""
    status_code = grpc.StatusCode.PERMISSION_DENIED


class UnauthenticatedError(BnnError):
    """No token, or one the server's token file does not hold."""
    status_code = grpc.StatusCode.UNAUTHENTICATED


class DeadlineExceededError(BnnError):
    """The call's deadline passed, or the server's --max-request-seconds."""
    status_code = grpc.StatusCode.DEADLINE_EXCEEDED


class UnavailableError(BnnError):
    """The server cannot be reached or is shutting down."""
    status_code = grpc.StatusCode.UNAVAILABLE


class DataLossError(BnnError):
    """A stored record failed its checksum, or imported bytes are corrupt."""
    status_code = grpc.StatusCode.DATA_LOSS


class CancelledError(BnnError):
    """The call was cancelled (by the client, or by the server's shutdown)."""
    status_code = grpc.StatusCode.CANCELLED


class InternalError(BnnError):
    """A server bug or an unexpected I/O failure (logged by the server)."""
    status_code = grpc.StatusCode.INTERNAL


_BY_CODE = {cls.status_code: cls for cls in (
    InvalidArgumentError, NotFoundError, AlreadyExistsError,
    ResourceExhaustedError, FailedPreconditionError, PermissionDeniedError,
    UnauthenticatedError, DeadlineExceededError, UnavailableError,
    DataLossError, CancelledError, InternalError)}


def error_for(code: grpc.StatusCode, message: str,
              request_id: Optional[str] = None) -> BnnError:
    """The exception for a status: its family's class, else BnnError itself."""
    return _BY_CODE.get(code, BnnError)(message, code, request_id)


def from_rpc_error(error: grpc.RpcError) -> BnnError:
    """Converts a grpc.RpcError (which is also a grpc.Call) into a BnnError."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else str(error)
    request_id = None
    trailing = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    for key, value in trailing or ():
        if key == "x-request-id":
            request_id = value
    return error_for(code, details or "", request_id)
