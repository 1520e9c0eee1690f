"""The asyncio client: `AsyncClient` and its `AsyncStream`, over `grpc.aio`."""
from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Optional, Unpack

import grpc
import grpc.aio

from . import _request
from ._proto.strata.v1 import generation_pb2 as pb
from ._proto.strata.v1 import generation_pb2_grpc as pb_grpc
from ._request import GenerationParams, Message, Metadata
from .client import DEFAULT_TARGET
from .errors import StrataError, from_rpc_error
from .results import Completion, FinishReason, ModelInfo, StreamChunk, Timing, Usage

__all__ = ["AsyncClient", "AsyncStream"]


class AsyncStream:
    """The chunks of one streaming generation: `async for chunk in stream`. The last chunk
    carries `finish_reason` and `usage`, which also stay on the stream as attributes.
    `close()` (or leaving an `async with` block) cancels the call. A failed call raises a
    StrataError from the iteration."""

    def __init__(self, call: Any):
        self._call = call
        self._messages = call.__aiter__()
        self.finish_reason: Optional[FinishReason] = None
        self.usage: Optional[Usage] = None
        self.timing: Optional[Timing] = None

    def __aiter__(self) -> AsyncIterator[StreamChunk]:
        return self

    async def __anext__(self) -> StreamChunk:
        try:
            message = await self._messages.__anext__()
        except grpc.RpcError as e:
            raise from_rpc_error(e) from e
        chunk = StreamChunk.from_proto(message)
        if chunk.is_last:
            self.finish_reason, self.usage, self.timing = (chunk.finish_reason, chunk.usage,
                                                           chunk.timing)
        return chunk

    def close(self) -> None:
        """Cancels the call if it is still running; a no-op after the last chunk."""
        self._call.cancel()

    cancel = close

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> AsyncStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class AsyncClient:
    """An asyncio client of a Strata server's `strata.v1.Generation` gRPC service, with the
    methods of `Client` as coroutines and `stream` as an async iterator.

    Create it inside the running event loop (grpc.aio channels belong to one loop) and use it
    as `async with AsyncClient(...) as client:`, or `await client.close()`. Arguments as in
    `Client`; `channel` must be a `grpc.aio.Channel`.
    """

    def __init__(self, target: str = DEFAULT_TARGET, *, timeout: Optional[float] = None,
                 metadata: Optional[Metadata] = None,
                 channel: Optional[grpc.aio.Channel] = None,
                 credentials: Optional[grpc.ChannelCredentials] = None,
                 options: Optional[Sequence[tuple[str, Any]]] = None,
                 api_key: Optional[str] = None):
        self.target = target
        self.timeout = timeout
        self.metadata = list(metadata) if metadata else None
        if api_key is not None:  # sent with every call, as the server's --api-keys-file asks
            self.metadata = [*(self.metadata or []), ("authorization", f"Bearer {api_key}")]
        self._owns_channel = channel is None
        if channel is None:
            channel = (grpc.aio.secure_channel(target, credentials, options=options)
                       if credentials is not None
                       else grpc.aio.insecure_channel(target, options=options))
        self.channel = channel
        self._stub = pb_grpc.GenerationStub(channel)
        self._health = channel.unary_unary(
            _request.HEALTH_CHECK_METHOD,
            request_serializer=_request.HealthCheckRequest.SerializeToString,
            response_deserializer=_request.HealthCheckResponse.FromString)

    async def close(self) -> None:
        """Closes the channel if this client opened it (calls in flight are cancelled)."""
        if self._owns_channel:
            await self.channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _options(self, timeout: Optional[float], metadata: Optional[Metadata]) -> dict:
        return {"timeout": self.timeout if timeout is None else timeout,
                "metadata": _request.merge_metadata(self.metadata, metadata)}

    async def _unary(self, method: Any, request: Any, timeout: Optional[float],
                     metadata: Optional[Metadata]) -> Any:
        try:
            return await method(request, **self._options(timeout, metadata))
        except grpc.RpcError as e:
            raise from_rpc_error(e) from e

    async def generate(
        self,
        prompt: Optional[str] = None,
        *,
        token_ids: Optional[Sequence[int]] = None,
        messages: Optional[Sequence[Message]] = None,
        timeout: Optional[float] = None,
        metadata: Optional[Metadata] = None,
        **params: Unpack[GenerationParams],
    ) -> Completion:
        """Generates a completion and returns it whole; see `Client.generate`."""
        request = _request.generate_request(prompt, token_ids=token_ids, messages=messages,
                                            **params)
        return Completion.from_proto(
            await self._unary(self._stub.Generate, request, timeout, metadata))

    def stream(
        self,
        prompt: Optional[str] = None,
        *,
        token_ids: Optional[Sequence[int]] = None,
        messages: Optional[Sequence[Message]] = None,
        timeout: Optional[float] = None,
        metadata: Optional[Metadata] = None,
        **params: Unpack[GenerationParams],
    ) -> AsyncStream:
        """Starts a streaming generation (not a coroutine: `async for chunk in
        client.stream(...)`); see `Client.stream`."""
        request = _request.generate_request(prompt, token_ids=token_ids, messages=messages,
                                            **params)
        return AsyncStream(self._stub.GenerateStream(request,
                                                     **self._options(timeout, metadata)))

    async def tokenize(self, text: Optional[str] = None, *,
                       messages: Optional[Sequence[Message]] = None, add_special: bool = False,
                       parse_special: bool = False, timeout: Optional[float] = None,
                       metadata: Optional[Metadata] = None) -> list[int]:
        """Token ids of `text` or chat `messages`; see `Client.tokenize`."""
        request = _request.tokenize_request(text, messages, add_special, parse_special)
        reply = await self._unary(self._stub.Tokenize, request, timeout, metadata)
        return list(reply.token_ids)

    async def detokenize(self, token_ids: Sequence[int], *, render_special: bool = False,
                         timeout: Optional[float] = None,
                         metadata: Optional[Metadata] = None) -> str:
        """Text of `token_ids`; see `Client.detokenize`."""
        request = pb.DetokenizeRequest(token_ids=token_ids, render_special=render_special)
        return (await self._unary(self._stub.Detokenize, request, timeout, metadata)).text

    async def model_info(self, *, timeout: Optional[float] = None,
                         metadata: Optional[Metadata] = None) -> ModelInfo:
        """What the server serves and its limits; see `Client.model_info`."""
        return ModelInfo.from_proto(await self._unary(
            self._stub.GetModelInfo, pb.GetModelInfoRequest(), timeout, metadata))

    async def health(self, service: str = "", *, timeout: Optional[float] = None,
                     metadata: Optional[Metadata] = None) -> str:
        """The gRPC health status name; see `Client.health`."""
        request = _request.HealthCheckRequest(service=service)
        return _request.serving_status_name(
            await self._unary(self._health, request, timeout, metadata))

    async def is_serving(self, *, timeout: Optional[float] = None) -> bool:
        """True when the server answers the health check with SERVING."""
        try:
            return await self.health(timeout=timeout) == "SERVING"
        except StrataError:
            return False
