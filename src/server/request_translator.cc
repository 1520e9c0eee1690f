#include "strata/server/request_translator.h"

#include <string_view>
#include <utility>
#include <vector>

#include "strata/common/utf8.h"

namespace strata::server {
namespace {

Status BadUtf8(const std::string& field, std::string_view text) {
  size_t offset = 0;
  if (IsValidUtf8(text, &offset)) return OkStatus();
  return InvalidArgumentError(field + " must be valid UTF-8 (invalid byte sequence at offset " +
                              std::to_string(offset) + ")");
}

}  // namespace

RequestTranslator::RequestTranslator(const tokenizer::Tokenizer* tokenizer,
                                     const tokenizer::ChatTemplate* chat_template,
                                     const TranslatorLimits& limits,
                                     OutputConstraints* output_constraints)
    : tokenizer_(tokenizer),
      chat_template_(chat_template),
      limits_(limits),
      output_constraints_(output_constraints) {}

StatusOr<PromptText> RequestTranslator::CheckedText(const GenerationInput& input,
                                                    std::string_view text_field) const {
  switch (input.kind) {
    case GenerationInput::Kind::kText: {
      const std::string& text = input.text;
      if (text.size() > limits_.max_prompt_bytes) {
        return InvalidArgumentError(std::string(text_field) + " must be at most " +
                                    std::to_string(limits_.max_prompt_bytes) + " bytes, got " +
                                    std::to_string(text.size()));
      }
      STRATA_RETURN_IF_ERROR(BadUtf8(std::string(text_field), text));
      return PromptText{text, /*parse_special=*/false};
    }
    case GenerationInput::Kind::kChat: {
      if (chat_template_ == nullptr) {
        return FailedPreconditionError("this model has no chat template: send a prompt");
      }
      const std::vector<ChatTurn>& messages = input.chat;
      if (messages.empty()) return InvalidArgumentError("chat.messages must not be empty");
      if (messages.size() > limits_.max_chat_messages) {
        return InvalidArgumentError("chat.messages must hold at most " +
                                    std::to_string(limits_.max_chat_messages) + ", got " +
                                    std::to_string(messages.size()));
      }
      std::vector<tokenizer::ChatMessage> turns;
      size_t bytes = 0;
      for (size_t i = 0; i < messages.size(); ++i) {
        const std::string field = "chat.messages[" + std::to_string(i) + "]";
        const std::string& role = messages[i].role;
        if (role != "system" && role != "user" && role != "assistant") {
          STRATA_RETURN_IF_ERROR(BadUtf8(field + ".role", role));
          return InvalidArgumentError(field + ".role must be system, user or assistant, got '" +
                                      role.substr(0, 32) + "'");
        }
        STRATA_RETURN_IF_ERROR(BadUtf8(field + ".content", messages[i].content));
        bytes += messages[i].content.size();
        turns.push_back({role, messages[i].content});
      }
      if (bytes > limits_.max_prompt_bytes) {
        return InvalidArgumentError("chat.messages contents must be at most " +
                                    std::to_string(limits_.max_prompt_bytes) +
                                    " bytes together, got " + std::to_string(bytes));
      }
      tokenizer::ChatRenderOptions options;
      options.add_generation_prompt = input.add_generation_prompt.value_or(true);
      StatusOr<std::string> text = chat_template_->Render(turns, options);
      if (!text.ok()) return InvalidArgumentError("chat.messages: " + text.status().message());
      // The template's markers are special tokens.
      return PromptText{std::move(*text), /*parse_special=*/true};
    }
    case GenerationInput::Kind::kTokenIds:
    case GenerationInput::Kind::kNone:
      break;
  }
  return InvalidArgumentError("input must be one of " + std::string(text_field) + " or chat");
}

StatusOr<std::vector<int32_t>> RequestTranslator::PromptTokens(const GenerationInput& input,
                                                               int32_t max_tokens) const {
  if (input.kind == GenerationInput::Kind::kTokenIds) {
    const std::vector<int32_t>& ids = input.token_ids;
    const int64_t vocab = static_cast<int64_t>(tokenizer_->vocab().tokens.size());
    if (ids.empty()) return InvalidArgumentError("token_ids.ids must not be empty");
    if (ids.size() > limits_.max_prompt_tokens) {
      return InvalidArgumentError("token_ids.ids must hold at most " +
                                  std::to_string(limits_.max_prompt_tokens) + " ids, got " +
                                  std::to_string(ids.size()));
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= vocab) {
        return InvalidArgumentError("token_ids.ids[" + std::to_string(i) + "] must be in [0, " +
                                    std::to_string(vocab) + "), got " + std::to_string(ids[i]));
      }
    }
    return ids;
  }
  if (input.kind == GenerationInput::Kind::kNone) {
    return InvalidArgumentError("input must be one of prompt, token_ids or chat");
  }
  if (input.kind == GenerationInput::Kind::kText && input.text.empty()) {
    return InvalidArgumentError("prompt must not be empty");
  }
  STRATA_ASSIGN_OR_RETURN(PromptText prompt, CheckedText(input, "prompt"));
  // Refused by its size alone when even the fewest tokens it could encode to cannot fit: a
  // multi-megabyte prompt costs seconds of encoding that would only end in this refusal.
  const size_t bytes = prompt.text.size();
  const int64_t min_tokens = static_cast<int64_t>((bytes + tokenizer_->max_token_bytes() - 1) /
                                                  tokenizer_->max_token_bytes());
  if (limits_.context_tokens > 0 && min_tokens + max_tokens > limits_.context_tokens) {
    return InvalidArgumentError("prompt (" + std::to_string(bytes) + " bytes: at least " +
                                std::to_string(min_tokens) + " tokens) + max_tokens (" +
                                std::to_string(max_tokens) + ") exceed the model's context of " +
                                std::to_string(limits_.context_tokens) +
                                " tokens; shorten the prompt or lower max_tokens");
  }
  return tokenizer_->Encode(prompt.text, {/*add_special=*/true, prompt.parse_special});
}

StatusOr<sampling::SamplingParams> RequestTranslator::Sampling(const SamplingInput& s,
                                                               uint64_t drawn_seed) const {
  sampling::SamplingParams p;
  p.max_tokens = s.max_tokens.value_or(limits_.default_max_tokens);
  if (s.temperature) p.temperature = *s.temperature;
  if (s.top_p) p.top_p = *s.top_p;
  if (s.top_k) p.top_k = *s.top_k;
  if (s.min_p) p.min_p = *s.min_p;
  if (s.repetition_penalty) p.repetition_penalty = *s.repetition_penalty;
  if (s.presence_penalty) p.presence_penalty = *s.presence_penalty;
  if (s.frequency_penalty) p.frequency_penalty = *s.frequency_penalty;
  p.seed = s.seed.value_or(drawn_seed);
  for (size_t i = 0; i < s.stop.size(); ++i) {
    STRATA_RETURN_IF_ERROR(BadUtf8("sampling.stop[" + std::to_string(i) + "]", s.stop[i]));
    p.stop.push_back(s.stop[i]);
  }
  p.stop_token_ids = s.stop_token_ids;
  p.ignore_eos = s.ignore_eos;
  p.logprobs = s.logprobs;
  // Ranges, finiteness and list sizes; messages name the field ("top_p must be ...").
  Status valid = sampling::Validate(p, static_cast<int>(tokenizer_->vocab().tokens.size()));
  if (!valid.ok()) return InvalidArgumentError("sampling." + valid.message());
  return p;
}

namespace {

void PutField(std::string_view field, std::string* out) {
  *out += std::to_string(field.size());
  *out += ':';
  *out += field;
}

}  // namespace

// What the semantic cache compares: a prompt's text, or a chat's last turn when it is the
// user's; everything else of the input (the kind, earlier turns, the generation prompt) must be
// equal, so it goes into the context. Token ids have no text: no semantic lookup.
void RequestTranslator::SemanticTextOf(const GenerationInput& input, engine::CachePolicy* policy) {
  if (input.kind == GenerationInput::Kind::kText) {
    policy->semantic_text = input.text;
    policy->semantic_context = "text";
    return;
  }
  if (input.kind != GenerationInput::Kind::kChat || input.chat.empty() ||
      input.chat.back().role != "user") {
    return;
  }
  policy->semantic_text = input.chat.back().content;
  std::string& context = policy->semantic_context;
  context = input.add_generation_prompt.value_or(true) ? "chat+gen" : "chat";
  for (size_t i = 0; i + 1 < input.chat.size(); ++i) {
    PutField(input.chat[i].role, &context);
    PutField(input.chat[i].content, &context);
  }
}

StatusOr<engine::CachePolicy> RequestTranslator::CachePolicyOf(
    const GenerationInput& input, const sampling::SamplingParams& params) const {
  const CacheInput& c = input.cache;
  if (c.cache_namespace.size() > limits_.max_cache_namespace_bytes) {
    return InvalidArgumentError("cache.namespace must be at most " +
                                std::to_string(limits_.max_cache_namespace_bytes) + " bytes, got " +
                                std::to_string(c.cache_namespace.size()));
  }
  STRATA_RETURN_IF_ERROR(BadUtf8("cache.namespace", c.cache_namespace));
  if (c.ttl_seconds < 0) {
    return InvalidArgumentError("cache.ttl_seconds must be >= 0, got " +
                                std::to_string(c.ttl_seconds));
  }
  if (c.tags.size() > cache::kMaxCacheTags) {
    return InvalidArgumentError("cache.tags may hold at most " +
                                std::to_string(cache::kMaxCacheTags) + " tags, got " +
                                std::to_string(c.tags.size()));
  }
  for (size_t i = 0; i < c.tags.size(); ++i) {
    const std::string field = "cache.tags[" + std::to_string(i) + "]";
    if (c.tags[i].empty() || c.tags[i].size() > cache::kMaxCacheTagBytes) {
      return InvalidArgumentError(field + " must be 1.." +
                                  std::to_string(cache::kMaxCacheTagBytes) + " bytes, got " +
                                  std::to_string(c.tags[i].size()));
    }
    STRATA_RETURN_IF_ERROR(BadUtf8(field, c.tags[i]));
  }
  engine::CachePolicy policy;
  // Deterministic: greedy, or sampled from a seed the client chose (a drawn seed would make
  // the answer one draw among many).
  policy.cacheable = c.use && (params.temperature == 0.0f || input.sampling.seed.has_value());
  policy.cache_namespace = c.cache_namespace;
  policy.ttl_seconds = c.ttl_seconds;
  policy.tags = c.tags;
  policy.semantic = policy.cacheable && c.semantic;
  if (policy.semantic) SemanticTextOf(input, &policy);
  return policy;
}

StatusOr<TranslatedRequest> RequestTranslator::Translate(const GenerationInput& input,
                                                         uint64_t drawn_seed) const {
  TranslatedRequest out;
  if (input.request_id.size() > limits_.max_request_id_bytes) {
    return InvalidArgumentError("request_id must be at most " +
                                std::to_string(limits_.max_request_id_bytes) + " bytes, got " +
                                std::to_string(input.request_id.size()));
  }
  STRATA_RETURN_IF_ERROR(BadUtf8("request_id", input.request_id));
  out.request_id = input.request_id;
  if (input.priority < -limits_.max_abs_priority || input.priority > limits_.max_abs_priority) {
    return InvalidArgumentError(
        "priority must be between " + std::to_string(-limits_.max_abs_priority) + " and " +
        std::to_string(limits_.max_abs_priority) + ", got " + std::to_string(input.priority));
  }
  out.request.priority = input.priority;
  out.request.speculative = input.speculative;
  STRATA_ASSIGN_OR_RETURN(out.request.params, Sampling(input.sampling, drawn_seed));
  STRATA_ASSIGN_OR_RETURN(out.request.prompt, PromptTokens(input, out.request.params.max_tokens));
  out.seed = out.request.params.seed;
  STRATA_ASSIGN_OR_RETURN(out.request.cache, CachePolicyOf(input, out.request.params));
  if (input.output_format.kind != OutputFormatInput::Kind::kNone) {
    if (output_constraints_ == nullptr) {
      return FailedPreconditionError("output_format: this server has no structured output");
    }
    if (input.sampling.ignore_eos) {
      return InvalidArgumentError(
          "sampling.ignore_eos cannot be set with an output_format: the format decides where "
          "the output ends");
    }
    STRATA_ASSIGN_OR_RETURN(out.request.constraint, output_constraints_->For(input.output_format));
    // The response cache keys on the prompt and sampling, not the format.
    out.request.cache.cacheable = false;
    out.request.cache.semantic = false;
  }
  // Whether prompt + max_tokens fit the context and the KV cache is the engine's to say
  // (engine/request_limits.h), once for every transport.
  return out;
}

}  // namespace strata::server
