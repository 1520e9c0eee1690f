"""strata_client: a Python client of Strata's gRPC API (`strata.v1.Generation`).

    from strata_client import Client

    with Client("localhost:50051") as client:
        print(client.generate("Once upon a time,", max_tokens=32, temperature=0).text)
        for chunk in client.stream("Write a haiku about the sea.", max_tokens=64):
            print(chunk.text, end="", flush=True)

`AsyncClient` offers the same methods for asyncio. Failed calls raise `StrataError`
subclasses. The generated stubs are in `strata_client.pb` (messages) and `strata_client.pb_grpc`
(the service stub) for what the wrapper does not cover.
"""
from ._proto.strata.v1 import generation_pb2 as pb
from ._proto.strata.v1 import generation_pb2_grpc as pb_grpc
from .aio import AsyncClient, AsyncStream
from .client import Client, Stream
from .errors import (AuthenticationError, CancelledError, DeadlineExceededError, InternalError,
                     InvalidRequestError, QueueFullError, ResourceExhaustedError, StrataError,
                     UnavailableError, from_rpc_error)
from .results import (Completion, FinishReason, ModelInfo, StreamChunk, Timing, TokenLogprob,
                      TokenLogprobs, Usage)

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "AuthenticationError",
    "AsyncStream",
    "CancelledError",
    "Client",
    "Completion",
    "DeadlineExceededError",
    "FinishReason",
    "InternalError",
    "InvalidRequestError",
    "ModelInfo",
    "QueueFullError",
    "ResourceExhaustedError",
    "StrataError",
    "Stream",
    "StreamChunk",
    "Timing",
    "TokenLogprob",
    "TokenLogprobs",
    "UnavailableError",
    "Usage",
    "__version__",
    "from_rpc_error",
    "pb",
    "pb_grpc",
]
