#include "strata/tokenizer/special_tokens.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <utility>

namespace strata::tokenizer {
namespace {

// isspace() in the C locale, which is what decides lstrip/rstrip in llama.cpp.
bool IsCSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

constexpr uint32_t kSpecialAttrs =
    token_attr::kControl | token_attr::kUserDefined | token_attr::kUnknown;

// Occurrences kept as positions, per input byte, before the most frequent candidates are
// re-scanned instead of stored.
constexpr size_t kStoredOccurrencesPerByte = 2;
constexpr size_t kStoredOccurrencesMin = 1024;

}  // namespace

SpecialTokenPartitioner::SpecialTokenPartitioner(const Vocab& vocab) {
  std::fill(std::begin(root_children_), std::end(root_children_), -1);

  // Priority order. Sorting ascending ids by length with std::sort reproduces llama.cpp's
  // order exactly, including among equal lengths (same algorithm, same input sequence).
  std::vector<TokenId> ids;
  for (size_t i = 0; i < vocab.size(); ++i) {
    if (vocab.attrs[i] & kSpecialAttrs) ids.push_back(static_cast<TokenId>(i));
  }
  std::sort(ids.begin(), ids.end(),
            [&](TokenId a, TokenId b) { return vocab.tokens[a].size() > vocab.tokens[b].size(); });

  size_t total = 0;
  for (TokenId id : ids) total += vocab.tokens[id].size();
  texts_.reserve(total);
  std::vector<size_t> offsets;
  for (TokenId id : ids) {
    offsets.push_back(texts_.size());
    texts_ += vocab.tokens[id];
  }
  candidates_.reserve(ids.size());
  for (size_t r = 0; r < ids.size(); ++r) {
    const TokenId id = ids[r];
    const uint32_t attr = vocab.attrs[id];
    Candidate c;
    c.id = id;
    c.length = static_cast<uint32_t>(vocab.tokens[id].size());
    c.needs_parse_special = (attr & (token_attr::kControl | token_attr::kUnknown)) != 0;
    c.lstrip = (attr & token_attr::kLstrip) != 0;
    c.rstrip = (attr & token_attr::kRstrip) != 0;
    c.text = std::string_view(texts_).substr(offsets[r], c.length);
    candidates_.push_back(c);
  }

  // Build the trie breadth-first from the lexicographically sorted texts, so that each node's
  // edges are contiguous. No recursion: token texts may be long.
  std::vector<uint32_t> order(candidates_.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return candidates_[a].text < candidates_[b].text; });
  struct Pending {
    uint32_t node;
    size_t begin, end, depth;  // order[begin, end) share the node's prefix of length depth
  };
  nodes_.emplace_back();
  std::vector<Pending> queue = {{0, 0, order.size(), 0}};
  for (size_t q = 0; q < queue.size(); ++q) {
    Pending p = queue[q];
    // Texts are unique, so at most one ends exactly here, and it sorts first.
    if (p.begin < p.end && candidates_[order[p.begin]].length == p.depth) {
      nodes_[p.node].rank = static_cast<int32_t>(order[p.begin]);
      ++p.begin;
    }
    nodes_[p.node].first_edge = static_cast<uint32_t>(edges_.size());
    size_t i = p.begin;
    while (i < p.end) {
      const auto byte = static_cast<uint8_t>(candidates_[order[i]].text[p.depth]);
      size_t j = i + 1;
      while (j < p.end && static_cast<uint8_t>(candidates_[order[j]].text[p.depth]) == byte) ++j;
      const auto child = static_cast<uint32_t>(nodes_.size());
      nodes_.emplace_back();
      edges_.push_back({byte, child});
      ++nodes_[p.node].num_edges;
      if (p.node == 0) root_children_[byte] = static_cast<int32_t>(child);
      queue.push_back({child, i, j, p.depth + 1});
      i = j;
    }
  }
}

int32_t SpecialTokenPartitioner::Child(uint32_t node, uint8_t byte) const {
  const Node& n = nodes_[node];
  const Edge* begin = edges_.data() + n.first_edge;
  const Edge* end = begin + n.num_edges;
  const Edge* it =
      std::lower_bound(begin, end, byte, [](const Edge& e, uint8_t b) { return e.byte < b; });
  return (it != end && it->byte == byte) ? static_cast<int32_t>(it->child) : -1;
}

template <typename Fn>
void SpecialTokenPartitioner::ForEachOccurrence(std::string_view text, bool parse_special,
                                                Fn&& fn) const {
  const size_t n = text.size();
  for (size_t pos = 0; pos < n; ++pos) {
    int32_t node = root_children_[static_cast<uint8_t>(text[pos])];
    size_t q = pos + 1;
    while (node >= 0) {
      const int32_t rank = nodes_[node].rank;
      if (rank >= 0 && (parse_special || !candidates_[rank].needs_parse_special)) {
        fn(static_cast<uint32_t>(rank), pos);
      }
      if (q >= n) break;
      node = Child(static_cast<uint32_t>(node), static_cast<uint8_t>(text[q++]));
    }
  }
}

std::vector<TextFragment> SpecialTokenPartitioner::Partition(std::string_view text,
                                                             bool parse_special) const {
  std::vector<TextFragment> out;
  if (text.empty()) return out;
  const size_t n = text.size();

  // Pass 1: which candidates occur, how often, and where first and last.
  struct Stats {
    size_t count = 0;
    size_t first = 0;
    size_t last = 0;
  };
  std::vector<Stats> stats;
  std::vector<uint32_t> occurring;
  ForEachOccurrence(text, parse_special, [&](uint32_t rank, size_t pos) {
    if (stats.empty()) stats.resize(candidates_.size());
    Stats& s = stats[rank];
    if (s.count++ == 0) {
      s.first = pos;
      occurring.push_back(rank);
    }
    s.last = pos;
  });
  if (occurring.empty()) {
    out.push_back({kNoToken, text});
    return out;
  }

  // Store the positions of the least frequent candidates, up to a budget; the rest are found
  // again with a substring search between their first and last occurrence.
  std::vector<uint32_t> by_count = occurring;
  std::sort(by_count.begin(), by_count.end(), [&](uint32_t a, uint32_t b) {
    return stats[a].count != stats[b].count ? stats[a].count < stats[b].count : a < b;
  });
  const size_t budget = std::max(kStoredOccurrencesMin, kStoredOccurrencesPerByte * n);
  std::vector<size_t> store_offset(candidates_.size(), SIZE_MAX);
  size_t stored = 0;
  for (uint32_t rank : by_count) {
    if (stored + stats[rank].count > budget) break;
    store_offset[rank] = stored;
    stored += stats[rank].count;
  }
  std::vector<size_t> positions(stored);
  if (stored > 0) {
    std::vector<size_t> fill = store_offset;
    ForEachOccurrence(text, parse_special, [&](uint32_t rank, size_t pos) {
      if (store_offset[rank] != SIZE_MAX) positions[fill[rank]++] = pos;
    });
  }

  // Pass 2: candidates in priority order claim their occurrences. `claimed` maps the start of
  // each claimed span (token plus any stripped whitespace) to its end and token.
  struct Claim {
    size_t end;
    TokenId token;
  };
  std::map<size_t, Claim> claimed;
  std::sort(occurring.begin(), occurring.end());
  for (uint32_t rank : occurring) {
    const Candidate& c = candidates_[rank];
    // Claims the occurrence at `pos` if it overlaps no claimed span. Returns where the next
    // claimable occurrence may start: the end of the new span, or the end of the span that
    // blocked this one (every occurrence starting before that end overlaps it too).
    auto try_claim = [&](size_t pos) {
      const size_t end = pos + c.length;
      auto next = claimed.upper_bound(pos);
      if (next != claimed.end() && next->first < end) return next->second.end;
      size_t left_bound = 0;
      if (next != claimed.begin()) {
        auto prev = std::prev(next);
        if (prev->second.end > pos) return prev->second.end;
        left_bound = prev->second.end;
      }
      const size_t right_bound = next != claimed.end() ? next->first : n;
      size_t span_begin = pos;
      size_t span_end = end;
      if (c.lstrip) {
        while (span_begin > left_bound && IsCSpace(text[span_begin - 1])) --span_begin;
      }
      if (c.rstrip) {
        while (span_end < right_bound && IsCSpace(text[span_end])) ++span_end;
      }
      claimed.emplace(span_begin, Claim{span_end, c.id});
      return span_end;
    };
    const Stats& s = stats[rank];
    if (store_offset[rank] != SIZE_MAX) {
      size_t resume = 0;
      for (size_t i = 0; i < s.count; ++i) {
        const size_t pos = positions[store_offset[rank] + i];
        if (pos >= resume) resume = try_claim(pos);
      }
    } else {
      size_t pos = s.first;
      while (pos <= s.last) {
        pos = text.find(c.text, pos);
        if (pos == std::string_view::npos || pos > s.last) break;
        pos = try_claim(pos);
      }
    }
  }

  out.reserve(2 * claimed.size() + 1);
  size_t cursor = 0;
  for (const auto& [begin, claim] : claimed) {
    if (begin > cursor) out.push_back({kNoToken, text.substr(cursor, begin - cursor)});
    out.push_back({claim.token, {}});
    cursor = claim.end;
  }
  if (cursor < n) out.push_back({kNoToken, text.substr(cursor)});
  return out;
}

}  // namespace strata::tokenizer
