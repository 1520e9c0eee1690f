"""Exceptions of strata_client: one class per gRPC status code a caller handles differently.

Every failed call raises a `StrataError` (or a subclass) carrying the gRPC `code` and the
server's `message`, e.g. "sampling.temperature must be in [0, 100], got -1". The original
`grpc.RpcError` is chained as `__cause__`.
"""
from __future__ import annotations

import re
from typing import Optional

import grpc

__all__ = [
    "StrataError",
    "InvalidRequestError",
    "ResourceExhaustedError",
    "QueueFullError",
    "UnavailableError",
    "DeadlineExceededError",
    "CancelledError",
    "InternalError",
    "AuthenticationError",
    "from_rpc_error",
]

# The server's INVALID_ARGUMENT messages start with the field's path: "sampling.top_p must be
# ...", "token_ids.ids[1] must be ...", "chat.messages: ...".
_FIELD = re.compile(r"^([a-z_][a-z0-9_]*(?:\[\d+\])?(?:\.[a-z_][a-z0-9_]*(?:\[\d+\])?)*)"
                    r"(?: must |: | is )")


class StrataError(Exception):
    """A call that failed. `code` is the gRPC status code, `message` the server's words."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(f"{code.name}: {message}" if message else code.name)
        self.code = code
        self.message = message


class InvalidRequestError(StrataError):
    """INVALID_ARGUMENT (or OUT_OF_RANGE): a field of the request is wrong; `message` names it
    and its allowed range, `field` is its path when the message starts with one (e.g.
    "sampling.temperature"), else None. Retrying the same request fails the same way."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(code, message)
        match = _FIELD.match(message)
        self.field: Optional[str] = match.group(1) if match else None


class ResourceExhaustedError(StrataError):
    """RESOURCE_EXHAUSTED: the server's request queue is full (retry later, with backoff), the
    API key's limits are reached (the message says in how many seconds to retry), or the
    request was larger than the server accepts (--max-message-bytes)."""


QueueFullError = ResourceExhaustedError
"""Another name for ResourceExhaustedError: a full queue is its usual cause."""


class UnavailableError(StrataError):
    """UNAVAILABLE: the server cannot be reached, is still loading its model or is draining
    before it stops. Another replica, or the same one later, may succeed."""


class DeadlineExceededError(StrataError):
    """DEADLINE_EXCEEDED: the call's timeout passed; the server drops the request."""


class CancelledError(StrataError):
    """CANCELLED: the call was cancelled (by this client or the server shutting down)."""


class InternalError(StrataError):
    """INTERNAL, UNKNOWN or DATA_LOSS: the server or the engine failed the request."""


class AuthenticationError(StrataError):
    """UNAUTHENTICATED: the server needs an API key (--api-keys-file) and none, or an unknown
    one, was given (`api_key=`). A key over its limits gets ResourceExhaustedError instead."""


_BY_CODE: dict[grpc.StatusCode, type[StrataError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequestError,
    grpc.StatusCode.OUT_OF_RANGE: InvalidRequestError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.CANCELLED: CancelledError,
    grpc.StatusCode.INTERNAL: InternalError,
    grpc.StatusCode.UNKNOWN: InternalError,
    grpc.StatusCode.DATA_LOSS: InternalError,
    grpc.StatusCode.UNAUTHENTICATED: AuthenticationError,
}


def from_rpc_error(error: grpc.RpcError) -> StrataError:
    """The StrataError for a failed gRPC call (sync `grpc.RpcError` or `grpc.aio.AioRpcError`).
    Codes without a class of their own (UNIMPLEMENTED, PERMISSION_DENIED, ...) give a plain
    StrataError."""
    code_fn = getattr(error, "code", None)
    details_fn = getattr(error, "details", None)
    code = code_fn() if callable(code_fn) else None
    if not isinstance(code, grpc.StatusCode):
        code = grpc.StatusCode.UNKNOWN
    message = (details_fn() if callable(details_fn) else None) or ""
    return _BY_CODE.get(code, StrataError)(code, message)
