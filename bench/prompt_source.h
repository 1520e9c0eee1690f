// PromptSource: the prompts the benchmarks feed both engines, like llama-bench's: BOS (when the
// vocab adds one) followed by uniform draws from the vocabulary's normal tokens, from a seeded
// generator, so every run and every tool sees the same kind of text.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "strata/model/gguf_file.h"

namespace strata::bench {

class PromptSource {
 public:
  static PromptSource FromGguf(const strata::model::GgufFile& file, int64_t vocab_size,
                               uint64_t seed) {
    PromptSource source(seed);
    auto types = file.GetArray("tokenizer.ggml.token_type");
    if (types.ok() && static_cast<int64_t>((*types)->array_size()) == vocab_size) {
      constexpr int64_t kNormalTokenType = 1;  // llama_token_type LLAMA_TOKEN_TYPE_NORMAL
      for (int64_t id = 0; id < vocab_size; ++id) {
        if ((*types)->ArrayInt(static_cast<uint64_t>(id)) == kNormalTokenType) {
          source.ids_.push_back(static_cast<int32_t>(id));
        }
      }
    }
    if (source.ids_.empty()) {
      for (int64_t id = 0; id < vocab_size; ++id) source.ids_.push_back(static_cast<int32_t>(id));
    }
    auto add_bos = file.GetBool("tokenizer.ggml.add_bos_token");
    auto bos = file.GetUint("tokenizer.ggml.bos_token_id");
    if (add_bos.ok() && *add_bos && bos.ok() && *bos < static_cast<uint64_t>(vocab_size)) {
      source.bos_ = static_cast<int32_t>(*bos);
    }
    return source;
  }

  void Reseed(uint64_t seed) { rng_.seed(seed); }

  // A prompt: BOS (if any), then random tokens, `n` in all.
  std::vector<int32_t> Prompt(int64_t n) {
    std::vector<int32_t> tokens = Draw(n);
    if (bos_ >= 0 && n > 0) tokens[0] = bos_;
    return tokens;
  }

  // The token a decode test starts from when it has no prompt (llama-bench: BOS or random).
  int32_t First() { return bos_ >= 0 ? bos_ : Draw(1)[0]; }

  // `n` random tokens, no BOS (a continuation).
  std::vector<int32_t> Draw(int64_t n) {
    std::vector<int32_t> tokens(static_cast<size_t>(n));
    std::uniform_int_distribution<size_t> pick(0, ids_.size() - 1);
    for (int32_t& t : tokens) t = ids_[pick(rng_)];
    return tokens;
  }

 private:
  explicit PromptSource(uint64_t seed) : rng_(seed) {}

  std::mt19937_64 rng_;
  std::vector<int32_t> ids_;
  int32_t bos_ = -1;
};

}  // namespace strata::bench
