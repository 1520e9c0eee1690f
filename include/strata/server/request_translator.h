// RequestTranslator: a GenerationInput from any frontend -> an engine::Request, with every
// field checked. Nothing the client sends reaches the engine unvalidated; each violation
// is INVALID_ARGUMENT with a message that names the field and its allowed range, so a client
// can fix its request from the message alone.
//
// Input: exactly one of a prompt string (valid UTF-8, non-empty, size-limited; encoded with
// BOS as the model asks, special-token text left as text), token ids (non-empty, each in the
// vocabulary) or chat messages (roles system/user/assistant, valid UTF-8, rendered by the
// model's chat template and encoded with its special tokens). Sampling fields left unset take
// the server defaults; a request without a seed gets `drawn_seed`. The cache policy marks
// deterministic requests (greedy, or a seed given) cacheable unless the client opted out. Whether
// prompt + max_tokens fit the context is the engine's check (Engine::Submit), the same for every
// transport; a text too long for the context by its byte count alone is refused here, before the
// cost of encoding it (Tokenizer::max_token_bytes). A structured-output format is compiled here
// (OutputConstraints) into the request's TokenConstraint, so a bad schema, regex or grammar is
// refused before anything is queued; such a request is never cacheable (the response cache does
// not key on formats) and may not set ignore_eos (the format decides where the output ends).
//
// Thread rules: immutable after construction; any thread may Translate concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "strata/cache/cache_selector.h"
#include "strata/common/status.h"
#include "strata/engine/request.h"
#include "strata/server/generation_input.h"
#include "strata/server/output_constraints.h"
#include "strata/tokenizer/chat_template.h"
#include "strata/tokenizer/tokenizer.h"

namespace strata::server {

struct TranslatorLimits {
  size_t max_prompt_bytes = 1 << 20;  // a prompt string, or all chat contents together
  // The context (prompt + max_tokens) requests must fit; 0: not checked before encoding (the
  // engine checks the encoded prompt either way).
  int64_t context_tokens = 0;
  size_t max_prompt_tokens = 1 << 20;  // token-id input
  size_t max_chat_messages = 1024;
  size_t max_request_id_bytes = 128;
  int32_t max_abs_priority = 1000;
  int32_t default_max_tokens = 256;
  size_t max_cache_namespace_bytes = 128;
};

// A text input, checked and (for chat) rendered: what the tokenizer encodes.
struct PromptText {
  std::string text;
  bool parse_special = false;  // chat: the template's markers are special tokens
};

struct TranslatedRequest {
  engine::Request request;
  std::string request_id;  // the client's (validated) id, "" when none was given
  uint64_t seed = 0;       // the seed used, drawn or given
};

class RequestTranslator {
 public:
  // `tokenizer` must outlive the translator; `chat_template` may be null (chat input is then
  // FAILED_PRECONDITION: the model has no template); `output_constraints` may be null
  // (structured output is then FAILED_PRECONDITION), else it must outlive the translator.
  RequestTranslator(const tokenizer::Tokenizer* tokenizer,
                    const tokenizer::ChatTemplate* chat_template, const TranslatorLimits& limits,
                    OutputConstraints* output_constraints = nullptr);

  StatusOr<TranslatedRequest> Translate(const GenerationInput& input, uint64_t drawn_seed) const;

  // The text a text or chat input stands for, checked as Generate checks it (size, UTF-8, chat
  // roles and message count) and rendered by the chat template for chat: the one validation
  // Tokenize shares with Generate. `text_field` names the text in messages ("prompt", "text").
  StatusOr<PromptText> CheckedText(const GenerationInput& input, std::string_view text_field) const;

 private:
  // A prompt too long for the context by its size alone is refused before it is encoded.
  StatusOr<std::vector<int32_t>> PromptTokens(const GenerationInput& input,
                                              int32_t max_tokens) const;
  StatusOr<sampling::SamplingParams> Sampling(const SamplingInput& sampling,
                                              uint64_t drawn_seed) const;
  static void SemanticTextOf(const GenerationInput& input, engine::CachePolicy* policy);
  StatusOr<engine::CachePolicy> CachePolicyOf(const GenerationInput& input,
                                              const sampling::SamplingParams& params) const;

  const tokenizer::Tokenizer* tokenizer_;
  const tokenizer::ChatTemplate* chat_template_;
  TranslatorLimits limits_;
  OutputConstraints* output_constraints_;
};

}  // namespace strata::server
