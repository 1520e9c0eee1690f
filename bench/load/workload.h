// Workload: the requests a run sends — their prompts and output lengths — either random token ids
// (lengths fixed or uniform in a range) or entries of a JSONL dataset.
//
// Request(i) is a pure function of the workload and i, so a run is reproducible from its seed,
// whatever order clients finish in.
//
// Thread rules: immutable after construction; Request may be called from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/common/status.h"

namespace strata::bench {

// An inclusive integer range [min, max]; min == max is a fixed value.
struct IntRange {
  int64_t min = 0;
  int64_t max = 0;
};

// "128" -> [128, 128], "64:256" -> [64, 256]. kInvalidArgument naming `flag` unless both ends
// are integers with lowest <= min <= max.
StatusOr<IntRange> ParseIntRange(std::string_view flag, std::string_view text, int64_t lowest);

// One request's input. Exactly one of prompt_token_ids (sent as token ids) and prompt_text
// (sent as text; has_text) is the prompt.
struct RequestSpec {
  std::vector<int32_t> prompt_token_ids;
  std::string prompt_text;
  bool has_text = false;
  int64_t output_tokens = 0;  // max_tokens, generated in full (EOS ignored)
  // Sampling: temperature 0 is greedy; above 0, nucleus sampling with top_p and this request's
  // own seed (the same run samples the same tokens on a server that honours seeds).
  double temperature = 0;
  double top_p = 1;
  int64_t top_k = -1;  // -1: not sent (the server's default)
  double min_p = -1;   // -1: not sent
  uint64_t seed = 0;
};

class Workload {
 public:
  // Prompts of uniform random ids in `token_ids` (ordinary tokens of the vocabulary, so no
  // control token ends or reshapes a prompt), lengths uniform in `prompt_tokens` and
  // `output_tokens`. Each request draws from its own stream seeded by (seed, index), so prompts
  // are distinct across requests (no accidental prefix-cache hits) and independent of timing.
  static Workload Random(IntRange prompt_tokens, IntRange output_tokens, IntRange token_ids,
                         uint64_t seed);
  // The dataset's entries in order, cycling when a run needs more requests than it holds;
  // `seed` seeds the sampling seeds (SetSampling).
  static Workload FromDataset(std::vector<RequestSpec> entries, uint64_t seed = 0);

  // Every request samples with `temperature` (0: greedy), `top_p`, `top_k` and `min_p` (-1:
  // not sent), and a seed of its own drawn from (seed, index).
  void SetSampling(double temperature, double top_p, int64_t top_k = -1, double min_p = -1) {
    temperature_ = temperature;
    top_p_ = top_p;
    top_k_ = top_k;
    min_p_ = min_p;
  }

  RequestSpec Request(int64_t index) const;

  bool from_dataset() const { return !entries_.empty(); }
  size_t dataset_size() const { return entries_.size(); }

 private:
  // The random request `index` (prompt and output length only).
  RequestSpec Generated(int64_t index) const;

  IntRange prompt_tokens_;
  IntRange output_tokens_;
  IntRange token_ids_;
  uint64_t seed_ = 0;
  double temperature_ = 0;
  double top_p_ = 1;
  int64_t top_k_ = -1;
  double min_p_ = -1;
  std::vector<RequestSpec> entries_;
};

}  // namespace strata::bench
