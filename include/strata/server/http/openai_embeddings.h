// POST /v1/embeddings, OpenAI's shape, over the server's TextEmbedder (--embedding-model).
//
// Request: `model` (required: the embedding model's name, the folder's base name such as
// "all-minilm-l6-v2"; another name is 404 model_not_found), `input` (a string, or an array of
// 1..2048 strings; arrays of token ids are refused with 400: the embedding model's WordPiece
// tokenizer is not the one such ids come from), `encoding_format` ("float", the default, or
// "base64": each vector's little-endian float32 bytes in base64, as OpenAI sends them; the
// OpenAI Python SDK asks for base64 by default and decodes it), `dimensions` (accepted only when
// equal to the model's dimension: Strata does not shorten vectors), `user` (accepted, unused).
// Other fields are ignored, as on the generation endpoints.
//
// Response: {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [...]
// or "base64"}], "model": name, "usage": {"prompt_tokens": n, "total_tokens": n}}, where n
// counts the tokens encoded ([CLS] and [SEP] included, after the cut to the model's limit).
//
// Errors are OpenAI's {"error": {...}} (openai_request.h): 404 when the server has no embedding
// model or the request names another model, 400 naming the field, 429 when the embedder's
// queue is full, 503 while loading or draining.
//
// Thread rules: plain functions; AnswerEmbeddings may run on any thread (the embedder and the
// metrics are thread-safe).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/common/status.h"
#include "strata/embedding/text_embedder.h"
#include "strata/metrics/server_metrics.h"
#include "strata/server/http/openai_request.h"

namespace strata::server::http {

inline constexpr size_t kMaxEmbeddingInputs = 2048;

struct EmbeddingsRequest {
  std::string model;
  std::vector<std::string> input;
  bool base64 = false;                // encoding_format "base64"
  std::optional<int64_t> dimensions;  // as given; checked against the model by the caller
  std::string user;
};

// Reads `body`; false with *error set (400, `param` naming the field) when the body is not a
// JSON object or a field is missing, of the wrong type or unsupported.
bool ParseEmbeddingsRequest(std::string_view body, EmbeddingsRequest* out, ApiError* error);

// The response body for `embeddings` of `model` (floats written in the fewest digits that read
// back as the same float32).
std::string EmbeddingsBody(const embedding::Embeddings& embeddings, std::string_view model,
                           bool base64);

// `values` as little-endian float32 bytes, base64 (RFC 4648, padded).
std::string Base64Floats(std::span<const float> values);

struct EmbeddingsReply {
  int http_status = 200;
  std::string body;  // JSON: the response or an error
};

// One /v1/embeddings call: the embedder null (no embedding model: 404), the body parsed, the
// server's state (`serving`: OK, or the UNAVAILABLE to answer with), the model name and
// dimensions checked, the texts embedded. The call is recorded in `metrics` (transport "http").
EmbeddingsReply AnswerEmbeddings(std::string_view body, embedding::TextEmbedder* embedder,
                                 const Status& serving, metrics::ServerMetrics* metrics);

}  // namespace strata::server::http
