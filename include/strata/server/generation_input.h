// GenerationInput: one generation request as any frontend hands it to the serving core, in
// plain C++ (no wire types). The gRPC service fills it from strata.v1.GenerateRequest
// (proto_input.h); an HTTP frontend fills it from its JSON. RequestTranslator validates it and
// turns it into an engine::Request.
//
// Fields left unset (std::nullopt) take the server's defaults; the error messages name fields
// the way the strata.v1 wire contract does ("sampling.top_p", "chat.messages[2].role").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace strata::server {

struct ChatTurn {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

struct SamplingInput {
  std::optional<int32_t> max_tokens;
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int32_t> top_k;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  std::optional<float> presence_penalty;
  std::optional<float> frequency_penalty;
  std::optional<uint64_t> seed;  // unset: the server draws one and reports it
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int32_t logprobs = 0;  // top alternatives per token
};

// The response cache's options of a request (engine::CachePolicy once translated).
struct CacheInput {
  bool use = true;                // false: never answered from or stored in the cache
  std::string cache_namespace;    // entries are shared only within a namespace
  int64_t ttl_seconds = 0;        // > 0: keep this answer at most this long
  std::vector<std::string> tags;  // labels an operator can invalidate the answer by
  bool semantic = false;          // may be answered with a similar earlier request's answer
};

// Structured output: what the completion must look like (constrained decoding; the request's
// tokens are masked to the format, output_constraints.h).
struct OutputFormatInput {
  enum class Kind {
    kNone,        // free text
    kJsonObject,  // any JSON object
    kJsonSchema,  // `text`: a JSON Schema, as JSON text
    kRegex,       // `text`: a regular expression the whole completion matches
    kGrammar,     // `text`: a GBNF grammar (start rule `root`)
    kChoice,      // exactly one of `choices`
  };
  Kind kind = Kind::kNone;
  std::string text;
  std::vector<std::string> choices;
  // kJsonSchema: properties the schema does not name are refused unless additionalProperties
  // allows them (OpenAI's strict mode); false allows any when additionalProperties is absent.
  bool strict = true;
};

struct GenerationInput {
  enum class Kind {
    kNone,      // no input given (refused)
    kText,      // `text`: raw text, BOS added as the model asks
    kTokenIds,  // `token_ids`, as they are
    kChat,      // `chat`, rendered by the model's chat template
  };
  Kind kind = Kind::kNone;
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<ChatTurn> chat;
  std::optional<bool> add_generation_prompt;  // chat only; unset: true
  SamplingInput sampling;
  int32_t priority = 0;
  bool speculative = true;  // the server may speculate (--speculative) for this request
  std::string request_id;   // the client's id, echoed back and logged
  CacheInput cache;
  OutputFormatInput output_format;
};

}  // namespace strata::server
