#include "strata/grammar/token_vocabulary.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace strata::grammar {

StatusOr<std::shared_ptr<const TokenVocabulary>> TokenVocabulary::Build(
    std::vector<std::string> token_bytes, std::vector<bool> never_allowed,
    std::vector<int32_t> end_token_ids) {
  if (token_bytes.empty()) return InvalidArgumentError("token vocabulary is empty");
  if (token_bytes.size() > (1u << 30)) return InvalidArgumentError("token vocabulary too large");
  if (never_allowed.size() != token_bytes.size()) {
    return InvalidArgumentError("never_allowed has " + std::to_string(never_allowed.size()) +
                                " entries for " + std::to_string(token_bytes.size()) + " tokens");
  }
  const int32_t n = static_cast<int32_t>(token_bytes.size());
  std::shared_ptr<TokenVocabulary> v(new TokenVocabulary());
  v->is_end_.assign(n, false);
  for (int32_t id : end_token_ids) {
    if (id < 0 || id >= n) {
      return InvalidArgumentError("end token id " + std::to_string(id) + " is not in [0, " +
                                  std::to_string(n) + ")");
    }
    v->is_end_[id] = true;
  }
  std::sort(end_token_ids.begin(), end_token_ids.end());
  end_token_ids.erase(std::unique(end_token_ids.begin(), end_token_ids.end()), end_token_ids.end());
  v->end_token_ids_ = std::move(end_token_ids);
  v->matchable_mask_.assign((n + 31) / 32, 0);
  for (int32_t id = 0; id < n; ++id) {
    if (!never_allowed[id] && !v->is_end_[id] && !token_bytes[id].empty()) {
      v->sorted_ids_.push_back(id);
      v->matchable_mask_[id >> 5] |= 1u << (id & 31);
    }
  }
  std::sort(v->sorted_ids_.begin(), v->sorted_ids_.end(), [&](int32_t a, int32_t b) {
    if (token_bytes[a] != token_bytes[b]) return token_bytes[a] < token_bytes[b];
    return a < b;
  });
  v->sorted_lcp_.assign(v->sorted_ids_.size(), 0);
  for (size_t i = 1; i < v->sorted_ids_.size(); ++i) {
    const std::string& a = token_bytes[v->sorted_ids_[i - 1]];
    const std::string& b = token_bytes[v->sorted_ids_[i]];
    size_t l = 0;
    while (l < a.size() && l < b.size() && a[l] == b[l]) ++l;
    v->sorted_lcp_[i] = static_cast<int32_t>(l);
  }
  v->token_bytes_ = std::move(token_bytes);
  return std::shared_ptr<const TokenVocabulary>(std::move(v));
}

}  // namespace strata::grammar
