"""The values strata_client returns: plain frozen dataclasses, independent of the stubs."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Optional

from ._proto.strata.v1 import generation_pb2 as pb

__all__ = [
    "FinishReason",
    "Usage",
    "Timing",
    "TokenLogprob",
    "TokenLogprobs",
    "Completion",
    "StreamChunk",
    "ModelInfo",
]


class FinishReason(str, enum.Enum):
    """Why generation ended. A `str`, so `reason == "length"` works."""

    STOP = "stop"            # end-of-generation token, stop token id or stop string
    LENGTH = "length"        # max_tokens generated
    CANCELLED = "cancelled"  # the client cancelled or its deadline passed
    ERROR = "error"          # the engine failed the request

    @staticmethod
    def from_proto(value: int) -> Optional[FinishReason]:
        """The reason for a FinishReason enum value; None for FINISH_REASON_UNSPECIFIED."""
        return _FINISH_REASONS.get(value)


_FINISH_REASONS = {
    pb.FINISH_REASON_STOP: FinishReason.STOP,
    pb.FINISH_REASON_LENGTH: FinishReason.LENGTH,
    pb.FINISH_REASON_CANCELLED: FinishReason.CANCELLED,
    pb.FINISH_REASON_ERROR: FinishReason.ERROR,
}


@dataclass(frozen=True)
class Usage:
    """Token counts of one request."""

    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int  # prompt tokens whose KV came from the prefix cache
    # The completion came from the server's response cache (--response-cache), not computed.
    cached: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @staticmethod
    def from_proto(m: pb.Usage) -> Usage:
        return Usage(m.prompt_tokens, m.completion_tokens, m.cached_prompt_tokens, m.cached)


@dataclass(frozen=True)
class Timing:
    """Where the request's time went on the server, in seconds."""

    queue_seconds: float                # submitted -> first scheduled
    time_to_first_token_seconds: float  # submitted -> first token
    total_seconds: float                # submitted -> finished
    # Per stage (0 for a stage the request did not go through; docs/tracing.md).
    tokenize_seconds: float = 0.0      # call received -> prompt encoded
    cache_lookup_seconds: float = 0.0  # the response-cache lookup of a cacheable request
    prefill_seconds: float = 0.0       # first scheduled -> first token
    decode_seconds: float = 0.0        # first token -> finished
    detokenize_seconds: float = 0.0    # server time turning tokens into text (within the above)

    @staticmethod
    def from_proto(m: pb.Timing) -> Timing:
        return Timing(m.queue_seconds, m.time_to_first_token_seconds, m.total_seconds,
                      m.tokenize_seconds, m.cache_lookup_seconds, m.prefill_seconds,
                      m.decode_seconds, m.detokenize_seconds)


@dataclass(frozen=True)
class TokenLogprob:
    """A token and its natural-log probability under the model's raw distribution."""

    token_id: int
    logprob: float


@dataclass(frozen=True)
class TokenLogprobs:
    """The chosen token's log-probability and the top alternatives, most likely first."""

    chosen: TokenLogprob
    top: list[TokenLogprob] = field(default_factory=list)

    @staticmethod
    def from_proto(m: pb.TokenLogprobs) -> TokenLogprobs:
        return TokenLogprobs(TokenLogprob(m.chosen.token_id, m.chosen.logprob),
                             [TokenLogprob(t.token_id, t.logprob) for t in m.top])


@dataclass(frozen=True)
class Completion:
    """The result of `generate`."""

    text: str
    token_ids: list[int]
    finish_reason: Optional[FinishReason]
    usage: Usage
    timing: Timing
    logprobs: list[TokenLogprobs]  # one per token when asked for with logprobs=N, else empty
    seed: int                      # the seed used (drawn by the server when not given)
    request_id: str
    trace_id: str = ""             # the call's W3C trace id (32 hex digits)

    @staticmethod
    def from_proto(m: pb.GenerateResponse) -> Completion:
        return Completion(
            text=m.text, token_ids=list(m.token_ids),
            finish_reason=FinishReason.from_proto(m.finish_reason),
            usage=Usage.from_proto(m.usage), timing=Timing.from_proto(m.timing),
            logprobs=[TokenLogprobs.from_proto(lp) for lp in m.logprobs], seed=m.seed,
            request_id=m.request_id, trace_id=m.trace_id)


@dataclass(frozen=True)
class StreamChunk:
    """One message of `stream`: the tokens generated since the previous chunk and the text
    they made safe to show (a stop string is never shown; a split UTF-8 character waits for
    its end). `finish_reason`, `usage`, `timing` and `seed` are set on the last chunk only."""

    text: str
    token_ids: list[int]
    logprobs: list[TokenLogprobs]
    finish_reason: Optional[FinishReason]
    usage: Optional[Usage]
    timing: Optional[Timing]
    seed: Optional[int]
    request_id: str
    trace_id: str = ""  # on the last chunk

    @property
    def is_last(self) -> bool:
        return self.finish_reason is not None

    @staticmethod
    def from_proto(m: pb.GenerateStreamResponse) -> StreamChunk:
        reason = FinishReason.from_proto(m.finish_reason)
        last = reason is not None
        return StreamChunk(
            text=m.text, token_ids=list(m.token_ids),
            logprobs=[TokenLogprobs.from_proto(lp) for lp in m.logprobs], finish_reason=reason,
            usage=Usage.from_proto(m.usage) if last else None,
            timing=Timing.from_proto(m.timing) if last else None,
            seed=m.seed if last else None, request_id=m.request_id, trace_id=m.trace_id)


@dataclass(frozen=True)
class ModelInfo:
    """What the server serves and the limits it enforces."""

    name: str
    architecture: str         # "gemma3", "llama", ...
    parameters: int
    quantization: str         # e.g. "Q4_K_M"
    context_length: int       # tokens accepted per request (prompt + max_tokens)
    vocab_size: int
    chat_template: str        # the template used for chat input, e.g. "gemma"
    max_batch_size: int
    max_batched_tokens: int
    kv_cache_tokens: int
    max_queued_requests: int
    backend: str              # e.g. "cpu (avx512, 2 threads)"
    version: str              # Strata's version and commit

    @staticmethod
    def from_proto(m: pb.ModelInfo) -> ModelInfo:
        return ModelInfo(
            name=m.name, architecture=m.architecture, parameters=m.parameters,
            quantization=m.quantization, context_length=m.context_length,
            vocab_size=m.vocab_size, chat_template=m.chat_template,
            max_batch_size=m.max_batch_size, max_batched_tokens=m.max_batched_tokens,
            kv_cache_tokens=m.kv_cache_tokens, max_queued_requests=m.max_queued_requests,
            backend=m.backend, version=m.version)
