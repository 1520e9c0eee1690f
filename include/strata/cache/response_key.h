// The key of a response-cache entry: everything that decides a deterministic request's output,
// hashed. Two requests with the same key produce the same tokens.
//
// In the key: the model's identity (a digest of the file's bytes, so a changed file never
// serves another file's answers whatever its path), the operator's cache epoch, the namespace,
// the exact prompt tokens after templating, and every output-affecting sampling field. Fields
// that cannot change a greedy request's output (top_k, top_p, min_p, seed at temperature 0)
// are left out for greedy requests, so those share entries.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "strata/sampling/sampling_params.h"

namespace strata::cache {

struct ResponseKeyInput {
  std::string_view model_digest;  // ModelDigest() of the served file
  uint64_t epoch = 0;             // bumped by an operator to drop every earlier entry
  std::string_view cache_namespace;
  std::span<const int32_t> prompt;
  const sampling::SamplingParams* params = nullptr;
};

// "resp:v1:" followed by 64 hex digits (SHA-256 of a canonical encoding of the input).
std::string ResponseKey(const ResponseKeyInput& input);

// The semantic cache's context: what must be equal, besides a similar text, for one request to
// be answered with another's answer: the key's fields except the prompt, plus `context` (what
// the compared text does not cover, e.g. the earlier turns of a chat). "sem:v1:" + 64 hex.
// `in.prompt` is ignored.
std::string SemanticContextKey(const ResponseKeyInput& input, std::string_view context);

// Lower-case hex SHA-256 of `bytes` (OpenSSL).
std::string Sha256Hex(std::span<const uint8_t> bytes);

}  // namespace strata::cache
