#include "byte_automaton.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

namespace strata::grammar::internal {
namespace {

int Utf8Length(char32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

void Encode(char32_t c, int len, uint8_t* out) {
  if (len == 1) {
    out[0] = static_cast<uint8_t>(c);
  } else if (len == 2) {
    out[0] = static_cast<uint8_t>(0xC0 | (c >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (c & 0x3F));
  } else if (len == 3) {
    out[0] = static_cast<uint8_t>(0xE0 | (c >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((c >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (c & 0x3F));
  } else {
    out[0] = static_cast<uint8_t>(0xF0 | (c >> 18));
    out[1] = static_cast<uint8_t>(0x80 | ((c >> 12) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | ((c >> 6) & 0x3F));
    out[3] = static_cast<uint8_t>(0x80 | (c & 0x3F));
  }
}

// [lo, hi] with equal encoded lengths, split until every byte position is a plain range.
void SplitSameLength(char32_t lo, char32_t hi, int len, std::vector<Utf8Sequence>* out) {
  for (int i = 1; i < len; ++i) {
    const char32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        SplitSameLength(lo, lo | m, len, out);
        SplitSameLength((lo | m) + 1, hi, len, out);
        return;
      }
      if ((hi & m) != m) {
        SplitSameLength(lo, (hi & ~m) - 1, len, out);
        SplitSameLength(hi & ~m, hi, len, out);
        return;
      }
    }
  }
  Utf8Sequence s;
  s.len = len;
  Encode(lo, len, s.lo);
  Encode(hi, len, s.hi);
  out->push_back(s);
}

}  // namespace

std::vector<Utf8Sequence> Utf8Sequences(const std::vector<CodepointRange>& ranges) {
  std::vector<Utf8Sequence> out;
  static constexpr char32_t kBounds[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  for (CodepointRange r : ranges) {
    // Drop surrogates: split around them.
    std::vector<CodepointRange> parts;
    if (r.hi < 0xD800 || r.lo > 0xDFFF) {
      parts.push_back(r);
    } else {
      if (r.lo < 0xD800) parts.push_back({r.lo, 0xD7FF});
      if (r.hi > 0xDFFF) parts.push_back({0xE000, r.hi});
    }
    for (CodepointRange p : parts) {
      char32_t start = p.lo;
      for (char32_t bound : kBounds) {
        if (start > p.hi) break;
        if (start > bound) continue;
        const char32_t end = std::min(p.hi, bound);
        SplitSameLength(start, end, Utf8Length(start), &out);
        start = end + 1;
      }
    }
  }
  return out;
}

ByteAutomaton LowerToBytes(const Grammar& grammar) {
  ByteAutomaton a;
  const int32_t n = static_cast<int32_t>(grammar.rules.size());
  auto new_state = [&a](int32_t rule) {
    a.states.push_back(ByteState{});
    a.states.back().rule = rule;
    return static_cast<int32_t>(a.states.size() - 1);
  };
  a.rule_start.resize(n);
  std::vector<int32_t> rule_end(n);
  for (int32_t r = 0; r < n; ++r) {
    a.rule_start[r] = new_state(r);
    rule_end[r] = new_state(r);
    a.states[rule_end[r]].final = true;
  }
  for (int32_t r = 0; r < n; ++r) {
    for (const Alternative& alt : grammar.rules[r].alternatives) {
      int32_t cur = a.rule_start[r];
      if (alt.elements.empty()) a.states[cur].final = true;
      for (size_t i = 0; i < alt.elements.size(); ++i) {
        const Element& e = alt.elements[i];
        const bool last = i + 1 == alt.elements.size();
        const int32_t next = last ? rule_end[r] : new_state(r);
        if (e.kind == Element::Kind::kRule) {
          a.states[cur].calls.push_back(CallEdge{e.rule, next, last});
        } else {
          // Intermediate states shared between sequences with equal leading byte ranges.
          std::map<std::tuple<int32_t, uint8_t, uint8_t>, int32_t> inner;
          for (const Utf8Sequence& s : Utf8Sequences(e.ranges)) {
            int32_t from = cur;
            for (int k = 0; k < s.len; ++k) {
              int32_t to;
              if (k + 1 == s.len) {
                to = next;
              } else {
                auto key = std::make_tuple(from, s.lo[k], s.hi[k]);
                auto it = inner.find(key);
                if (it != inner.end()) {
                  from = it->second;
                  continue;
                }
                to = new_state(r);
                inner[key] = to;
              }
              a.states[from].bytes.push_back(ByteEdge{s.lo[k], s.hi[k], to});
              from = to;
            }
          }
        }
        cur = next;
      }
    }
  }
  a.root = grammar.root;
  return a;
}

}  // namespace strata::grammar::internal
