// TextEmbedder: texts in, one embedding each out. The seam between what needs embeddings (the
// semantic cache, the Embed RPC, /v1/embeddings) and what computes them (SentenceEncoder, or an
// EmbeddingBatcher that gathers concurrent callers into one encoder pass).
//
// Thread rules: Embed may be called from any thread concurrently.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/common/status.h"

namespace strata::embedding {

struct Embeddings {
  std::vector<std::vector<float>> vectors;  // one per text, in order, dimension() floats each
  int64_t tokens = 0;                       // tokens encoded, [CLS] and [SEP] included
  // Tokens of each text as encoded, in order; a text whose count equals max_tokens() may have
  // been cut (its end did not count).
  std::vector<int32_t> token_counts;
};

class TextEmbedder {
 public:
  virtual ~TextEmbedder() = default;

  // INVALID_ARGUMENT naming the first text that is not UTF-8; RESOURCE_EXHAUSTED when the
  // embedder is too busy to take the texts now. An empty span gives an empty result.
  virtual StatusOr<Embeddings> Embed(std::span<const std::string> texts) = 0;

  virtual int dimension() const = 0;
  // Tokens per text, [CLS] and [SEP] included; longer texts are cut to it.
  virtual int max_tokens() const = 0;
  // The model's name (its folder's base name), for responses and logs.
  virtual std::string_view model_name() const = 0;
};

}  // namespace strata::embedding
