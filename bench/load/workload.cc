#include "bench/load/workload.h"

#include <charconv>
#include <random>

namespace strata::bench {

namespace {

std::optional<int64_t> ParseInt(std::string_view text) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// SplitMix64 (Steele, Lea & Flood 2014): decorrelates the per-request seeds.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

StatusOr<IntRange> ParseIntRange(std::string_view flag, std::string_view text, int64_t lowest) {
  const size_t colon = text.find(':');
  const std::optional<int64_t> lo = ParseInt(text.substr(0, colon));
  const std::optional<int64_t> hi =
      colon == std::string_view::npos ? lo : ParseInt(text.substr(colon + 1));
  if (!lo || !hi || *lo < lowest || *hi < *lo) {
    return InvalidArgumentError(std::string(flag) + " must be N or MIN:MAX with " +
                                std::to_string(lowest) + " <= MIN <= MAX, got '" +
                                std::string(text) + "'");
  }
  return IntRange{*lo, *hi};
}

Workload Workload::Random(IntRange prompt_tokens, IntRange output_tokens, IntRange token_ids,
                          uint64_t seed) {
  Workload w;
  w.prompt_tokens_ = prompt_tokens;
  w.output_tokens_ = output_tokens;
  w.token_ids_ = token_ids;
  w.seed_ = seed;
  return w;
}

Workload Workload::FromDataset(std::vector<RequestSpec> entries, uint64_t seed) {
  Workload w;
  w.entries_ = std::move(entries);
  w.seed_ = seed;
  return w;
}

RequestSpec Workload::Request(int64_t index) const {
  RequestSpec spec =
      entries_.empty() ? Generated(index) : entries_[static_cast<size_t>(index) % entries_.size()];
  spec.temperature = temperature_;
  spec.top_p = top_p_;
  spec.top_k = top_k_;
  spec.min_p = min_p_;
  // Not the prompt's stream (its first draw would tie the sampling seed to the prompt); 31 bits,
  // which every server takes.
  spec.seed =
      Mix(Mix(seed_ ^ 0x5eed5eed5eed5eedULL) ^ static_cast<uint64_t>(index)) & 0x7fffffffULL;
  return spec;
}

RequestSpec Workload::Generated(int64_t index) const {
  std::mt19937_64 rng(Mix(seed_ ^ Mix(static_cast<uint64_t>(index))));
  RequestSpec spec;
  const int64_t prompt_len =
      std::uniform_int_distribution<int64_t>(prompt_tokens_.min, prompt_tokens_.max)(rng);
  spec.output_tokens =
      std::uniform_int_distribution<int64_t>(output_tokens_.min, output_tokens_.max)(rng);
  std::uniform_int_distribution<int64_t> id(token_ids_.min, token_ids_.max);
  spec.prompt_token_ids.reserve(static_cast<size_t>(prompt_len));
  for (int64_t i = 0; i < prompt_len; ++i) {
    spec.prompt_token_ids.push_back(static_cast<int32_t>(id(rng)));
  }
  return spec;
}

}  // namespace strata::bench
