#include "strata/grammar/grammar.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace strata::grammar {

Element Element::Class(std::vector<CodepointRange> ranges) {
  Element e;
  e.kind = Kind::kClass;
  e.ranges = NormalizeRanges(std::move(ranges));
  return e;
}

Element Element::Ref(int32_t rule_index) {
  Element e;
  e.kind = Kind::kRule;
  e.rule = rule_index;
  return e;
}

int32_t Grammar::AddRule(std::string name, std::vector<Alternative> alternatives) {
  rules.push_back(Rule{std::move(name), std::move(alternatives)});
  return static_cast<int32_t>(rules.size() - 1);
}

int64_t Grammar::NumElements() const {
  int64_t n = 0;
  for (const Rule& r : rules) {
    for (const Alternative& a : r.alternatives) n += static_cast<int64_t>(a.elements.size());
  }
  return n;
}

std::vector<CodepointRange> NormalizeRanges(std::vector<CodepointRange> ranges) {
  std::vector<CodepointRange> in;
  for (CodepointRange r : ranges) {
    if (r.lo > kMaxCodepoint || r.lo > r.hi) continue;
    r.hi = std::min(r.hi, kMaxCodepoint);
    in.push_back(r);
  }
  std::sort(in.begin(), in.end(), [](CodepointRange a, CodepointRange b) { return a.lo < b.lo; });
  std::vector<CodepointRange> out;
  for (CodepointRange r : in) {
    if (!out.empty() && r.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::vector<CodepointRange> NegateRanges(const std::vector<CodepointRange>& ranges) {
  std::vector<CodepointRange> out;
  char32_t next = 0;
  for (CodepointRange r : ranges) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) out.push_back({next, kMaxCodepoint});
  return out;
}

std::vector<bool> NullableRules(const Grammar& grammar) {
  std::vector<bool> nullable(grammar.rules.size(), false);
  // Fixed point: at most one new nullable rule per round that changes anything.
  bool changed = true;
  while (changed) {
    changed = false;
    for (size_t r = 0; r < grammar.rules.size(); ++r) {
      if (nullable[r]) continue;
      for (const Alternative& alt : grammar.rules[r].alternatives) {
        bool all = true;
        for (const Element& e : alt.elements) {
          if (e.kind == Element::Kind::kClass || !nullable[e.rule]) {
            all = false;
            break;
          }
        }
        if (all) {
          nullable[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

Status ValidateGrammar(const Grammar& grammar, const Limits& limits) {
  const int32_t n = static_cast<int32_t>(grammar.rules.size());
  if (n == 0) return InvalidArgumentError("grammar has no rules");
  if (n > limits.max_rules) {
    return InvalidArgumentError("grammar has " + std::to_string(n) +
                                " rules, more than the limit " + std::to_string(limits.max_rules));
  }
  if (grammar.root < 0 || grammar.root >= n) return InvalidArgumentError("grammar has no root");
  const int64_t elements = grammar.NumElements();
  if (elements > limits.max_elements) {
    return InvalidArgumentError("grammar has " + std::to_string(elements) +
                                " elements, more than the limit " +
                                std::to_string(limits.max_elements));
  }
  for (const Rule& rule : grammar.rules) {
    for (const Alternative& alt : rule.alternatives) {
      for (const Element& e : alt.elements) {
        if (e.kind == Element::Kind::kRule) {
          if (e.rule < 0 || e.rule >= n) {
            return InvalidArgumentError("rule '" + rule.name + "' refers to a missing rule");
          }
        } else {
          for (size_t i = 0; i < e.ranges.size(); ++i) {
            const CodepointRange r = e.ranges[i];
            if (r.lo > r.hi || r.hi > kMaxCodepoint || (i > 0 && r.lo <= e.ranges[i - 1].hi + 1)) {
              return InvalidArgumentError("rule '" + rule.name + "' has an unnormalized class");
            }
          }
        }
      }
    }
  }
  // Left recursion: edges R -> S where S can be the first thing R consumes with.
  const std::vector<bool> nullable = NullableRules(grammar);
  std::vector<std::vector<int32_t>> left(n);
  for (int32_t r = 0; r < n; ++r) {
    for (const Alternative& alt : grammar.rules[r].alternatives) {
      for (const Element& e : alt.elements) {
        if (e.kind == Element::Kind::kClass) break;
        left[r].push_back(e.rule);
        if (!nullable[e.rule]) break;
      }
    }
  }
  // Iterative DFS with colours (0 white, 1 on stack, 2 done).
  std::vector<uint8_t> colour(n, 0);
  std::vector<std::pair<int32_t, size_t>> stack;
  for (int32_t start = 0; start < n; ++start) {
    if (colour[start] != 0) continue;
    stack.push_back({start, 0});
    colour[start] = 1;
    while (!stack.empty()) {
      auto& [r, next] = stack.back();
      if (next < left[r].size()) {
        const int32_t s = left[r][next++];
        if (colour[s] == 1) {
          return InvalidArgumentError("rule '" + grammar.rules[s].name +
                                      "' is left-recursive (it can reach itself without "
                                      "consuming input)");
        }
        if (colour[s] == 0) {
          colour[s] = 1;
          stack.push_back({s, 0});
        }
      } else {
        colour[r] = 2;
        stack.pop_back();
      }
    }
  }
  return OkStatus();
}

void AppendUtf8(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

namespace {

std::string CodepointText(char32_t c) {
  if (c >= 0x21 && c < 0x7F && c != '\\' && c != ']' && c != '-' && c != '"' && c != '[') {
    return std::string(1, static_cast<char>(c));
  }
  char buf[16];
  std::snprintf(buf, sizeof(buf), "\\U%08X", static_cast<unsigned>(c));
  return buf;
}

}  // namespace

std::string GrammarToString(const Grammar& grammar) {
  std::string out;
  for (size_t r = 0; r < grammar.rules.size(); ++r) {
    const Rule& rule = grammar.rules[r];
    if (static_cast<int32_t>(r) == grammar.root) out.push_back('*');
    out.append(rule.name);
    out.append(" ::=");
    for (size_t a = 0; a < rule.alternatives.size(); ++a) {
      if (a > 0) out += " |";
      for (const Element& e : rule.alternatives[a].elements) {
        out += ' ';
        if (e.kind == Element::Kind::kRule) {
          out += grammar.rules[e.rule].name;
          continue;
        }
        out += '[';
        for (CodepointRange cr : e.ranges) {
          out += CodepointText(cr.lo);
          if (cr.hi != cr.lo) {
            out.push_back('-');
            out.append(CodepointText(cr.hi));
          }
        }
        out += ']';
      }
      if (rule.alternatives[a].elements.empty()) out += " \"\"";
    }
    out += '\n';
  }
  return out;
}

}  // namespace strata::grammar
