"""Request building shared by Client and AsyncClient (no I/O here)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional, TypedDict, Union

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from ._proto.strata.v1 import generation_pb2 as pb

Message = Union[Mapping[str, str], Sequence[str], Any]
"""A chat turn: {"role": ..., "content": ...}, a (role, content) pair, or an object with
`role` and `content` attributes."""

Metadata = Sequence[tuple[str, Union[str, bytes]]]


def chat_messages(messages: Sequence[Message],
                  add_generation_prompt: Optional[bool] = None) -> pb.ChatMessages:
    turns = []
    for i, m in enumerate(messages):
        if isinstance(m, Mapping):
            role, content = m["role"], m["content"]
        elif isinstance(m, Sequence) and not isinstance(m, (str, bytes)) and len(m) == 2:
            role, content = m
        elif hasattr(m, "role") and hasattr(m, "content"):
            role, content = m.role, m.content
        else:
            raise TypeError(f"messages[{i}] must be a mapping with role and content, "
                            f"a (role, content) pair or an object with those attributes")
        turns.append(pb.ChatMessage(role=role, content=content))
    chat = pb.ChatMessages(messages=turns)
    if add_generation_prompt is not None:
        chat.add_generation_prompt = add_generation_prompt
    return chat


class GenerationParams(TypedDict, total=False):
    """The arguments of a generation besides its input and call options (`Client.generate`
    documents each); an argument left out takes the server's default."""
    add_generation_prompt: Optional[bool]
    max_tokens: Optional[int]
    temperature: Optional[float]
    top_p: Optional[float]
    top_k: Optional[int]
    min_p: Optional[float]
    repetition_penalty: Optional[float]
    presence_penalty: Optional[float]
    frequency_penalty: Optional[float]
    stop: Union[str, Sequence[str], None]
    stop_token_ids: Optional[Sequence[int]]
    seed: Optional[int]
    ignore_eos: bool
    logprobs: int
    priority: int
    request_id: str
    cache: Optional[bool]
    cache_namespace: str
    cache_ttl_seconds: int
    cache_tags: Sequence[str]
    cache_semantic: bool
    speculative: Optional[bool]


def generate_request(
    prompt: Optional[str] = None,
    *,
    token_ids: Optional[Sequence[int]] = None,
    messages: Optional[Sequence[Message]] = None,
    add_generation_prompt: Optional[bool] = None,
    max_tokens: Optional[int] = None,
    temperature: Optional[float] = None,
    top_p: Optional[float] = None,
    top_k: Optional[int] = None,
    min_p: Optional[float] = None,
    repetition_penalty: Optional[float] = None,
    presence_penalty: Optional[float] = None,
    frequency_penalty: Optional[float] = None,
    stop: Union[str, Sequence[str], None] = None,
    stop_token_ids: Optional[Sequence[int]] = None,
    seed: Optional[int] = None,
    ignore_eos: bool = False,
    logprobs: int = 0,
    priority: int = 0,
    request_id: str = "",
    cache: Optional[bool] = None,
    cache_namespace: str = "",
    cache_ttl_seconds: int = 0,
    cache_tags: Sequence[str] = (),
    cache_semantic: bool = False,
    speculative: Optional[bool] = None,
) -> pb.GenerateRequest:
    """A GenerateRequest; None leaves a field unset (the server's default applies). Range
    checks are the server's: it answers INVALID_ARGUMENT naming the field."""
    given = [name for name, value in (("prompt", prompt), ("token_ids", token_ids),
                                      ("messages", messages)) if value is not None]
    if len(given) != 1:
        raise ValueError("give exactly one of prompt, token_ids or messages"
                         + (f" (got {', '.join(given)})" if given else ""))
    request = pb.GenerateRequest(priority=priority, request_id=request_id)
    if prompt is not None:
        request.prompt = prompt
    elif token_ids is not None:
        request.token_ids.ids.extend(token_ids)
        # An explicit empty list must still select the token_ids input (the server refuses it
        # by name) rather than leave the oneof unset.
        request.token_ids.SetInParent()
    else:
        assert messages is not None
        request.chat.CopyFrom(chat_messages(messages, add_generation_prompt))

    sampling = request.sampling
    for name, value in (("max_tokens", max_tokens), ("temperature", temperature),
                        ("top_p", top_p), ("top_k", top_k), ("min_p", min_p),
                        ("repetition_penalty", repetition_penalty),
                        ("presence_penalty", presence_penalty),
                        ("frequency_penalty", frequency_penalty), ("seed", seed)):
        if value is not None:
            setattr(sampling, name, value)
    if stop is not None:
        sampling.stop.extend([stop] if isinstance(stop, str) else stop)
    if stop_token_ids is not None:
        sampling.stop_token_ids.extend(stop_token_ids)
    sampling.ignore_eos = ignore_eos
    sampling.logprobs = logprobs
    if isinstance(cache_tags, str):
        raise TypeError("cache_tags must be a sequence of strings, not one string")
    options = request.cache
    if cache is not None:
        options.use = cache
    options.namespace = cache_namespace
    options.ttl_seconds = cache_ttl_seconds
    options.tags.extend(cache_tags)
    options.semantic = cache_semantic
    if speculative is not None:
        request.speculative = speculative
    return request


def tokenize_request(text: Optional[str], messages: Optional[Sequence[Message]],
                     add_special: bool, parse_special: bool) -> pb.TokenizeRequest:
    if (text is None) == (messages is None):
        raise ValueError("give exactly one of text or messages")
    request = pb.TokenizeRequest(add_special=add_special, parse_special=parse_special)
    if text is not None:
        request.text = text
    else:
        assert messages is not None
        request.chat.CopyFrom(chat_messages(messages))
    return request


def merge_metadata(default: Optional[Metadata],
                   extra: Optional[Metadata]) -> Optional[list[tuple[str, Union[str, bytes]]]]:
    if not default and not extra:
        return None
    return [*(default or ()), *(extra or ())]


def _health_messages() -> tuple[Any, Any, Any]:
    """grpc.health.v1 HealthCheckRequest and HealthCheckResponse classes and the response's
    ServingStatus enum, built in a private descriptor pool: no dependency on
    grpcio-health-checking and no clash with its registration when both are loaded."""
    f = descriptor_pb2.FileDescriptorProto(name="strata_client/grpc_health_v1.proto",
                                           package="grpc.health.v1", syntax="proto3")
    field = descriptor_pb2.FieldDescriptorProto
    f.message_type.add(name="HealthCheckRequest").field.add(
        name="service", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    response = f.message_type.add(name="HealthCheckResponse")
    status = response.enum_type.add(name="ServingStatus")
    for number, name in enumerate(("UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN")):
        status.value.add(name=name, number=number)
    response.field.add(name="status", number=1, type=field.TYPE_ENUM,
                       label=field.LABEL_OPTIONAL,
                       type_name=".grpc.health.v1.HealthCheckResponse.ServingStatus")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    response_descriptor = pool.FindMessageTypeByName("grpc.health.v1.HealthCheckResponse")
    return (message_factory.GetMessageClass(
                pool.FindMessageTypeByName("grpc.health.v1.HealthCheckRequest")),
            message_factory.GetMessageClass(response_descriptor),
            response_descriptor.enum_types_by_name["ServingStatus"])


HealthCheckRequest, HealthCheckResponse, _SERVING_STATUS = _health_messages()
HEALTH_CHECK_METHOD = "/grpc.health.v1.Health/Check"


def serving_status_name(response: Any) -> str:
    """"SERVING", "NOT_SERVING", "SERVICE_UNKNOWN" or "UNKNOWN"."""
    value = _SERVING_STATUS.values_by_number.get(response.status)
    return value.name if value is not None else "UNKNOWN"
