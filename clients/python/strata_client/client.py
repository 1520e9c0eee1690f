"""The blocking client: `Client` and its `Stream`."""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Any, Optional, Unpack

import grpc

from . import _request
from ._proto.strata.v1 import generation_pb2 as pb
from ._proto.strata.v1 import generation_pb2_grpc as pb_grpc
from ._request import GenerationParams, Message, Metadata
from .errors import StrataError, from_rpc_error
from .results import Completion, FinishReason, ModelInfo, StreamChunk, Timing, Usage

__all__ = ["Client", "Stream"]

DEFAULT_TARGET = "localhost:50051"


class Stream:
    """The chunks of one streaming generation, as they come.

    Iterate it (`for chunk in stream`); the last chunk carries `finish_reason` and `usage`,
    which also stay on the stream as attributes. `close()` (or leaving a `with` block, or
    dropping the stream) cancels the call: the server stops generating and frees the
    request's KV cache at its next step. A failed call raises a StrataError from the
    iteration.
    """

    def __init__(self, call: Any):
        self._call = call
        self.finish_reason: Optional[FinishReason] = None
        self.usage: Optional[Usage] = None
        self.timing: Optional[Timing] = None

    def __iter__(self) -> Iterator[StreamChunk]:
        return self

    def __next__(self) -> StreamChunk:
        try:
            message = next(self._call)
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

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        call = getattr(self, "_call", None)
        if call is not None:
            call.cancel()


class Client:
    """A blocking client of a Strata server's `strata.v1.Generation` gRPC service.

    Args:
        target: "host:port" of the server's gRPC port (ignored when `channel` is given).
        timeout: default deadline of each call in seconds (None: no deadline); every method
            also takes `timeout=`.
        metadata: (key, value) pairs sent with every call (e.g. an authorization header
            that a proxy in front of Strata checks).
        channel: a ready `grpc.Channel` to use instead of opening one; the client does not
            close it.
        credentials: TLS credentials (`grpc.ssl_channel_credentials()`) for a secure
            channel; None: plaintext.
        options: gRPC channel arguments, e.g. [("grpc.max_receive_message_length", N)].

    Use it as a context manager, or call `close()`, to close the channel it opened. Every
    failed call raises a `strata_client.StrataError` subclass. The client may be shared by
    threads.
    """

    def __init__(self, target: str = DEFAULT_TARGET, *, timeout: Optional[float] = None,
                 metadata: Optional[Metadata] = None, channel: Optional[grpc.Channel] = None,
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
            channel = (grpc.secure_channel(target, credentials, options=options)
                       if credentials is not None
                       else grpc.insecure_channel(target, options=options))
        self.channel = channel
        self._stub = pb_grpc.GenerationStub(channel)
        self._health = channel.unary_unary(
            _request.HEALTH_CHECK_METHOD,
            request_serializer=_request.HealthCheckRequest.SerializeToString,
            response_deserializer=_request.HealthCheckResponse.FromString)

    def close(self) -> None:
        """Closes the channel if this client opened it."""
        if self._owns_channel:
            self.channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: Optional[type[BaseException]],
                 exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.close()

    def _options(self, timeout: Optional[float], metadata: Optional[Metadata]) -> dict:
        return {"timeout": self.timeout if timeout is None else timeout,
                "metadata": _request.merge_metadata(self.metadata, metadata)}

    def _unary(self, method: Any, request: Any, timeout: Optional[float],
               metadata: Optional[Metadata]) -> Any:
        try:
            return method(request, **self._options(timeout, metadata))
        except grpc.RpcError as e:
            raise from_rpc_error(e) from e

    def generate(
        self,
        prompt: Optional[str] = None,
        *,
        token_ids: Optional[Sequence[int]] = None,
        messages: Optional[Sequence[Message]] = None,
        timeout: Optional[float] = None,
        metadata: Optional[Metadata] = None,
        **params: Unpack[GenerationParams],
    ) -> Completion:
        """Generates a completion and returns it whole.

        Exactly one input: `prompt` (raw text; BOS added as the model asks), `token_ids` (as
        they are) or `messages` (chat turns rendered by the model's chat template; the
        assistant turn is opened unless `add_generation_prompt=False`).

        Sampling (None: the server's default): `max_tokens` (default 256), `temperature`
        (0 = greedy; default 1), `top_p`, `top_k` (0 = off), `min_p`, `repetition_penalty`,
        `presence_penalty`, `frequency_penalty`, `seed` (reported back in `Completion.seed`
        when drawn by the server). Stopping: `stop` strings (never part of the text),
        `stop_token_ids`, `ignore_eos`. `logprobs=N` returns each token's log-probability and
        its N best alternatives (N <= 20). `priority`: higher is admitted first and preempted
        last. `request_id` is echoed back and logged by the server.

        Response cache (a server with --response-cache; deterministic requests only: greedy or
        a `seed`): `cache=False` opts out; `cache_namespace` shares entries only within it;
        `cache_ttl_seconds` shortens this answer's life; `cache_tags` label it for an
        operator's invalidation; `cache_semantic=True` lets a similar earlier request's answer
        serve it (--semantic-cache). `Completion.usage.cached` says it came from the cache.
        `speculative=False` keeps a server with --speculative from drafting for this request
        (the output is the same either way).

        Raises InvalidRequestError naming the field when a value is out of range,
        QueueFullError when the server's queue is full, UnavailableError when it is down or
        draining, DeadlineExceededError when `timeout` passes.
        """
        request = _request.generate_request(prompt, token_ids=token_ids, messages=messages,
                                            **params)
        return Completion.from_proto(
            self._unary(self._stub.Generate, request, timeout, metadata))

    def stream(
        self,
        prompt: Optional[str] = None,
        *,
        token_ids: Optional[Sequence[int]] = None,
        messages: Optional[Sequence[Message]] = None,
        timeout: Optional[float] = None,
        metadata: Optional[Metadata] = None,
        **params: Unpack[GenerationParams],
    ) -> Stream:
        """Generates a completion and streams it as it is produced; the arguments are those
        of `generate`. Returns a `Stream` of `StreamChunk`s (text deltas and token ids; the
        last one has the finish reason and usage). Errors are raised while iterating; close
        the stream (or use `with client.stream(...) as s:`) to cancel the call early.
        """
        request = _request.generate_request(prompt, token_ids=token_ids, messages=messages,
                                            **params)
        return Stream(self._stub.GenerateStream(request, **self._options(timeout, metadata)))

    def tokenize(self, text: Optional[str] = None, *,
                 messages: Optional[Sequence[Message]] = None, add_special: bool = False,
                 parse_special: bool = False, timeout: Optional[float] = None,
                 metadata: Optional[Metadata] = None) -> list[int]:
        """Token ids of `text` (or of chat `messages` rendered by the chat template) under
        the model's tokenizer. `add_special`: add BOS/EOS as the model asks (what `generate`
        does with a prompt); `parse_special`: "<start_of_turn>" in text becomes the special
        token."""
        request = _request.tokenize_request(text, messages, add_special, parse_special)
        return list(self._unary(self._stub.Tokenize, request, timeout, metadata).token_ids)

    def detokenize(self, token_ids: Sequence[int], *, render_special: bool = False,
                   timeout: Optional[float] = None,
                   metadata: Optional[Metadata] = None) -> str:
        """Text of `token_ids`; control tokens are left out unless `render_special`."""
        request = pb.DetokenizeRequest(token_ids=token_ids, render_special=render_special)
        return self._unary(self._stub.Detokenize, request, timeout, metadata).text

    def model_info(self, *, timeout: Optional[float] = None,
                   metadata: Optional[Metadata] = None) -> ModelInfo:
        """What the server serves (model, quantization, context length, backend) and the
        limits it enforces."""
        return ModelInfo.from_proto(
            self._unary(self._stub.GetModelInfo, pb.GetModelInfoRequest(), timeout, metadata))

    def health(self, service: str = "", *, timeout: Optional[float] = None,
               metadata: Optional[Metadata] = None) -> str:
        """The standard gRPC health check: "SERVING", "NOT_SERVING" (loading or draining),
        "SERVICE_UNKNOWN" or "UNKNOWN". `service` "" is the whole server,
        "strata.v1.Generation" the generation service. Raises UnavailableError when the
        server cannot be reached."""
        request = _request.HealthCheckRequest(service=service)
        return _request.serving_status_name(self._unary(self._health, request, timeout,
                                                        metadata))

    def is_serving(self, *, timeout: Optional[float] = None) -> bool:
        """True when the server answers the health check with SERVING; False when it answers
        anything else or cannot be reached."""
        try:
            return self.health(timeout=timeout) == "SERVING"
        except StrataError:
            return False
