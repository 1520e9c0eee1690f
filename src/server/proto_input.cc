#include "strata/server/proto_input.h"

namespace strata::server {
namespace {

SamplingInput SamplingFromProto(const v1::SamplingParams& s) {
  SamplingInput out;
  if (s.has_max_tokens()) out.max_tokens = s.max_tokens();
  if (s.has_temperature()) out.temperature = s.temperature();
  if (s.has_top_p()) out.top_p = s.top_p();
  if (s.has_top_k()) out.top_k = s.top_k();
  if (s.has_min_p()) out.min_p = s.min_p();
  if (s.has_repetition_penalty()) out.repetition_penalty = s.repetition_penalty();
  if (s.has_presence_penalty()) out.presence_penalty = s.presence_penalty();
  if (s.has_frequency_penalty()) out.frequency_penalty = s.frequency_penalty();
  if (s.has_seed()) out.seed = s.seed();
  out.stop.assign(s.stop().begin(), s.stop().end());
  out.stop_token_ids.assign(s.stop_token_ids().begin(), s.stop_token_ids().end());
  out.ignore_eos = s.ignore_eos();
  out.logprobs = s.logprobs();
  return out;
}

}  // namespace

GenerationInput InputFromProto(const v1::GenerateRequest& request) {
  GenerationInput in;
  switch (request.input_case()) {
    case v1::GenerateRequest::kPrompt:
      in.kind = GenerationInput::Kind::kText;
      in.text = request.prompt();
      break;
    case v1::GenerateRequest::kTokenIds:
      in.kind = GenerationInput::Kind::kTokenIds;
      in.token_ids.assign(request.token_ids().ids().begin(), request.token_ids().ids().end());
      break;
    case v1::GenerateRequest::kChat:
      in.kind = GenerationInput::Kind::kChat;
      for (const v1::ChatMessage& m : request.chat().messages()) {
        in.chat.push_back({m.role(), m.content()});
      }
      if (request.chat().has_add_generation_prompt()) {
        in.add_generation_prompt = request.chat().add_generation_prompt();
      }
      break;
    case v1::GenerateRequest::INPUT_NOT_SET:
      break;
  }
  in.sampling = SamplingFromProto(request.sampling());
  in.priority = request.priority();
  if (request.has_speculative()) in.speculative = request.speculative();
  if (request.has_output_format()) {
    const v1::OutputFormat& f = request.output_format();
    OutputFormatInput& out = in.output_format;
    using Kind = OutputFormatInput::Kind;
    switch (f.format_case()) {
      case v1::OutputFormat::kJsonSchema:
        out.kind = Kind::kJsonSchema;
        out.text = f.json_schema();
        break;
      case v1::OutputFormat::kJsonObject:
        out.kind = f.json_object() ? Kind::kJsonObject : Kind::kNone;
        break;
      case v1::OutputFormat::kRegex:
        out.kind = Kind::kRegex;
        out.text = f.regex();
        break;
      case v1::OutputFormat::kGrammar:
        out.kind = Kind::kGrammar;
        out.text = f.grammar();
        break;
      case v1::OutputFormat::kChoice:
        out.kind = Kind::kChoice;
        out.choices.assign(f.choice().choices().begin(), f.choice().choices().end());
        break;
      case v1::OutputFormat::FORMAT_NOT_SET:
        break;
    }
    if (f.has_strict()) out.strict = f.strict();
  }
  in.request_id = request.request_id();
  if (request.has_cache()) {
    const v1::CacheOptions& c = request.cache();
    if (c.has_use()) in.cache.use = c.use();
    in.cache.cache_namespace = c.namespace_();
    in.cache.ttl_seconds = c.ttl_seconds();
    in.cache.tags.assign(c.tags().begin(), c.tags().end());
    in.cache.semantic = c.semantic();
  }
  return in;
}

}  // namespace strata::server
