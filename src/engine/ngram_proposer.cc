#include "strata/engine/ngram_proposer.h"

#include <algorithm>
#include <string>

#include "strata/common/check.h"

namespace strata::engine {

Status NgramProposerOptions::Validate() const {
  if (min_ngram < 1 || min_ngram > kMaxNgram) {
    return InvalidArgumentError("the n-gram proposer's min_ngram must be in [1, " +
                                std::to_string(kMaxNgram) + "], got " + std::to_string(min_ngram));
  }
  if (max_ngram < min_ngram || max_ngram > kMaxNgram) {
    return InvalidArgumentError("the n-gram proposer's max_ngram must be in [min_ngram (" +
                                std::to_string(min_ngram) + "), " + std::to_string(kMaxNgram) +
                                "], got " + std::to_string(max_ngram));
  }
  return OkStatus();
}

NgramProposer::NgramProposer(const NgramProposerOptions& options) : options_(options) {
  STRATA_CHECK(options_.Validate().ok());
}

void NgramProposer::Propose(kv::SequenceId /*id*/, std::span<const int32_t> tokens,
                            int32_t max_tokens, std::vector<int32_t>* draft) {
  STRATA_CHECK(draft != nullptr);
  const auto size = static_cast<int64_t>(tokens.size());
  if (max_tokens < 1) return;
  for (int64_t n = std::min<int64_t>(options_.max_ngram, size - 1); n >= options_.min_ngram; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(size - n));
    // The most recent earlier occurrence: start positions before the suffix's own.
    for (int64_t start = size - n - 1; start >= 0; --start) {
      if (tokens[static_cast<size_t>(start + n - 1)] != suffix.back()) continue;
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t to = std::min<int64_t>(from + max_tokens, size);
      draft->insert(draft->end(), tokens.begin() + from, tokens.begin() + to);
      return;  // from < size: the occurrence ends before the suffix does
    }
  }
}

}  // namespace strata::engine
