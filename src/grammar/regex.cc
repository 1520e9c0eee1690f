#include "strata/grammar/regex.h"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grammar_builder.h"

namespace strata::grammar {
namespace {

using internal::GrammarBuilder;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::vector<CodepointRange> DigitClass() { return {{'0', '9'}}; }
std::vector<CodepointRange> WordClass() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
std::vector<CodepointRange> SpaceClass() {
  return NormalizeRanges({{'\t', '\r'},
                          {' ', ' '},
                          {0xA0, 0xA0},
                          {0x1680, 0x1680},
                          {0x2000, 0x200A},
                          {0x2028, 0x2029},
                          {0x202F, 0x202F},
                          {0x205F, 0x205F},
                          {0x3000, 0x3000},
                          {0xFEFF, 0xFEFF}});
}
std::vector<CodepointRange> DotClass() {
  return NegateRanges(NormalizeRanges({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
}

class RegexParser {
 public:
  RegexParser(std::string_view pattern, const std::string& name, const RegexEmbedOptions& options,
              GrammarBuilder* builder)
      : p_(pattern), name_(name), options_(options), b_(builder) {}

  StatusOr<int32_t> Parse() {
    std::vector<Alternative> alts;
    std::vector<std::pair<bool, bool>> anchors;
    STRATA_RETURN_IF_ERROR(ParseAlternation(0, &alts, &anchors));
    if (pos_ < p_.size()) return Error(pos_, "unbalanced ')'");
    if (options_.search) {
      std::optional<int32_t> any_star;
      for (size_t i = 0; i < alts.size(); ++i) {
        if (anchors[i].first && anchors[i].second) continue;
        if (!any_star) {
          STRATA_ASSIGN_OR_RETURN(Element any, Transform(Element::Class({{0, kMaxCodepoint}})));
          std::vector<Element> star;
          STRATA_RETURN_IF_ERROR(b_->AppendRepeat(any, 0, -1, name_, &star));
          any_star = star[0].rule;
        }
        std::vector<Element>& e = alts[i].elements;
        if (!anchors[i].first) e.insert(e.begin(), Element::Ref(*any_star));
        if (!anchors[i].second) e.push_back(Element::Ref(*any_star));
        STRATA_RETURN_IF_ERROR(b_->Charge(2));
      }
    }
    return b_->AddHelperRule(name_, std::move(alts));
  }

 private:
  Status Error(size_t at, const std::string& what) const {
    return InvalidArgumentError("regex: at offset " + std::to_string(at) + ": " + what);
  }

  Status ParseAlternation(int depth, std::vector<Alternative>* alts,
                          std::vector<std::pair<bool, bool>>* anchors) {
    while (true) {
      Alternative alt;
      bool start = false, end = false;
      STRATA_RETURN_IF_ERROR(ParseSequence(depth, &alt, &start, &end));
      alts->push_back(std::move(alt));
      if (anchors) anchors->push_back({start, end});
      if (pos_ < p_.size() && p_[pos_] == '|') {
        ++pos_;
        continue;
      }
      return OkStatus();
    }
  }

  Status ParseSequence(int depth, Alternative* alt, bool* anchored_start, bool* anchored_end) {
    if (depth == 0 && pos_ < p_.size() && p_[pos_] == '^') {
      *anchored_start = true;
      ++pos_;
    }
    while (pos_ < p_.size()) {
      const char c = p_[pos_];
      if (c == '|' || c == ')') return OkStatus();
      const size_t at = pos_;
      if (c == '$') {
        ++pos_;
        if (depth == 0 && (pos_ == p_.size() || p_[pos_] == '|')) {
          *anchored_end = true;
          return OkStatus();
        }
        return Error(at, "anchor '$' is only supported at the end of the pattern");
      }
      if (c == '^') return Error(at, "anchor '^' is only supported at the start of the pattern");
      Element atom;
      STRATA_RETURN_IF_ERROR(ParseAtom(depth, &atom));
      STRATA_RETURN_IF_ERROR(ParseQuantifier(at, std::move(atom), &alt->elements));
    }
    return OkStatus();
  }

  Status ParseAtom(int depth, Element* out) {
    const size_t at = pos_;
    const char c = p_[pos_];
    switch (c) {
      case '(': {
        if (depth + 1 > b_->limits().max_nesting_depth) {
          return Error(
              at, "groups nested deeper than " + std::to_string(b_->limits().max_nesting_depth));
        }
        ++pos_;
        if (p_.substr(pos_, 2) == "?:") {
          pos_ += 2;
        } else if (p_.substr(pos_, 2) == "?=" || p_.substr(pos_, 2) == "?!" ||
                   p_.substr(pos_, 3) == "?<=" || p_.substr(pos_, 3) == "?<!") {
          return Error(at, "lookaround assertions are not supported");
        } else if (p_.substr(pos_, 2) == "?<") {
          const size_t close = p_.find('>', pos_);
          if (close == std::string_view::npos || close == pos_ + 2) {
            return Error(at, "bad named group");
          }
          for (size_t i = pos_ + 2; i < close; ++i) {
            const char n = p_[i];
            if (!((n >= 'a' && n <= 'z') || (n >= 'A' && n <= 'Z') || (n >= '0' && n <= '9') ||
                  n == '_' || n == '$')) {
              return Error(at, "bad named group");
            }
          }
          pos_ = close + 1;
        } else if (pos_ < p_.size() && p_[pos_] == '?') {
          return Error(at, "unsupported group syntax '(?'");
        }
        std::vector<Alternative> alts;
        STRATA_RETURN_IF_ERROR(ParseAlternation(depth + 1, &alts, nullptr));
        if (pos_ >= p_.size() || p_[pos_] != ')') return Error(at, "unbalanced '('");
        ++pos_;
        STRATA_ASSIGN_OR_RETURN(int32_t r, b_->AddHelperRule(name_, std::move(alts)));
        *out = Element::Ref(r);
        return OkStatus();
      }
      case '[': {
        STRATA_ASSIGN_OR_RETURN(std::vector<CodepointRange> ranges, ParseClass());
        return Emit(Element::Class(std::move(ranges)), out);
      }
      case '.':
        ++pos_;
        return Emit(Element::Class(DotClass()), out);
      case '*':
      case '+':
      case '?':
        return Error(at, std::string("quantifier '") + c + "' has nothing to repeat");
      case '{':
        return Error(at, "quantifier '{' has nothing to repeat");
      case '\\': {
        STRATA_ASSIGN_OR_RETURN(std::vector<CodepointRange> ranges, ParseEscape(false));
        return Emit(Element::Class(std::move(ranges)), out);
      }
      default: {
        std::optional<char32_t> cp = internal::DecodeUtf8(p_, &pos_);
        if (!cp) return Error(at, "invalid UTF-8");
        return Emit(Element::Char(*cp), out);
      }
    }
  }

  Status Emit(Element e, Element* out) {
    STRATA_ASSIGN_OR_RETURN(*out, Transform(std::move(e)));
    return OkStatus();
  }

  // In JSON-string mode, a class that holds characters JSON must escape becomes a rule: the
  // plain part, or each such character's escape.
  StatusOr<Element> Transform(Element e) {
    if (!options_.json_string) return e;
    static const std::vector<CodepointRange> kSpecial =
        NormalizeRanges({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}});
    std::vector<CodepointRange> plain;
    std::vector<char32_t> special;
    const std::vector<CodepointRange> not_special = NegateRanges(kSpecial);
    for (CodepointRange r : e.ranges) {
      for (CodepointRange s : not_special) {
        const char32_t lo = std::max(r.lo, s.lo), hi = std::min(r.hi, s.hi);
        if (lo <= hi) plain.push_back({lo, hi});
      }
      for (CodepointRange s : kSpecial) {
        for (char32_t c = std::max(r.lo, s.lo); c <= std::min(r.hi, s.hi); ++c) {
          special.push_back(c);
        }
      }
    }
    if (special.empty()) return e;
    std::string key;
    for (CodepointRange r : e.ranges)
      key += std::to_string(r.lo) + "-" + std::to_string(r.hi) + ",";
    auto it = escaped_rules_.find(key);
    if (it != escaped_rules_.end()) return Element::Ref(it->second);
    std::vector<Alternative> alts;
    if (!plain.empty()) alts.push_back(Alternative{{Element::Class(std::move(plain))}});
    for (char32_t c : special) {
      std::string esc;
      switch (c) {
        case '"':
          esc = "\\\"";
          break;
        case '\\':
          esc = "\\\\";
          break;
        case '\n':
          esc = "\\n";
          break;
        case '\r':
          esc = "\\r";
          break;
        case '\t':
          esc = "\\t";
          break;
        case '\b':
          esc = "\\b";
          break;
        case '\f':
          esc = "\\f";
          break;
        default: {
          static constexpr char kHex[] = "0123456789abcdef";
          esc = std::string("\\u00") + kHex[c >> 4] + kHex[c & 15];
        }
      }
      Alternative a;
      for (char ch : esc) a.elements.push_back(Element::Char(static_cast<char32_t>(ch)));
      alts.push_back(std::move(a));
    }
    STRATA_ASSIGN_OR_RETURN(int32_t r, b_->AddHelperRule(name_, std::move(alts)));
    escaped_rules_[key] = r;
    return Element::Ref(r);
  }

  Status ParseQuantifier(size_t at, Element atom, std::vector<Element>* out) {
    if (pos_ >= p_.size()) return Push(std::move(atom), out);
    const char q = p_[pos_];
    int64_t min = 0, max = -1;
    if (q == '*') {
      ++pos_;
    } else if (q == '+') {
      min = 1;
      ++pos_;
    } else if (q == '?') {
      max = 1;
      ++pos_;
    } else if (q == '{') {
      const size_t qat = pos_;
      ++pos_;
      STRATA_ASSIGN_OR_RETURN(min, ParseCount(qat));
      max = min;
      if (pos_ < p_.size() && p_[pos_] == ',') {
        ++pos_;
        max = -1;
        if (pos_ < p_.size() && p_[pos_] != '}') {
          STRATA_ASSIGN_OR_RETURN(max, ParseCount(qat));
        }
      }
      if (pos_ >= p_.size() || p_[pos_] != '}') return Error(qat, "invalid quantifier '{'");
      ++pos_;
    } else {
      return Push(std::move(atom), out);
    }
    if (pos_ < p_.size() && p_[pos_] == '?') ++pos_;  // lazy: same language
    if (pos_ < p_.size() &&
        (p_[pos_] == '*' || p_[pos_] == '+' || p_[pos_] == '?' || p_[pos_] == '{')) {
      return Error(pos_, "quantifier after a quantifier");
    }
    Status s = b_->AppendRepeat(atom, min, max, name_, out);
    if (!s.ok()) return Error(at, s.message());
    return OkStatus();
  }

  Status Push(Element e, std::vector<Element>* out) {
    STRATA_RETURN_IF_ERROR(b_->Charge(1));
    out->push_back(std::move(e));
    return OkStatus();
  }

  StatusOr<int64_t> ParseCount(size_t at) {
    const size_t start = pos_;
    int64_t v = 0;
    while (pos_ < p_.size() && p_[pos_] >= '0' && p_[pos_] <= '9') {
      v = v * 10 + (p_[pos_] - '0');
      if (v > b_->limits().max_repetition) {
        return Error(
            at, "repetition count above the limit " + std::to_string(b_->limits().max_repetition));
      }
      ++pos_;
    }
    if (pos_ == start) return Error(at, "invalid quantifier '{'");
    return v;
  }

  StatusOr<char32_t> ParseHex(size_t at, int digits) {
    char32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int h = pos_ < p_.size() ? HexValue(p_[pos_]) : -1;
      if (h < 0) return Error(at, "bad escape: expected hex digits");
      v = v * 16 + h;
      ++pos_;
    }
    return v;
  }

  // An escape at p_[pos_] == '\\', as a class.
  StatusOr<std::vector<CodepointRange>> ParseEscape(bool in_class) {
    const size_t at = pos_;
    ++pos_;
    if (pos_ >= p_.size()) return Error(at, "pattern ends with '\\'");
    const char e = p_[pos_++];
    auto single = [](char32_t c) { return std::vector<CodepointRange>{{c, c}}; };
    switch (e) {
      case 'd':
        return DigitClass();
      case 'D':
        return NegateRanges(DigitClass());
      case 'w':
        return WordClass();
      case 'W':
        return NegateRanges(WordClass());
      case 's':
        return SpaceClass();
      case 'S':
        return NegateRanges(SpaceClass());
      case 'n':
        return single('\n');
      case 'r':
        return single('\r');
      case 't':
        return single('\t');
      case 'f':
        return single('\f');
      case 'v':
        return single('\v');
      case '0':
        if (pos_ < p_.size() && p_[pos_] >= '0' && p_[pos_] <= '9') {
          return Error(at, "octal escapes are not supported");
        }
        return single(0);
      case 'x': {
        STRATA_ASSIGN_OR_RETURN(char32_t v, ParseHex(at, 2));
        return single(v);
      }
      case 'u': {
        if (pos_ < p_.size() && p_[pos_] == '{') {
          ++pos_;
          char32_t v = 0;
          int n = 0;
          while (pos_ < p_.size() && HexValue(p_[pos_]) >= 0 && n < 8) {
            v = v * 16 + HexValue(p_[pos_++]);
            ++n;
          }
          if (n == 0 || pos_ >= p_.size() || p_[pos_] != '}' || v > kMaxCodepoint) {
            return Error(at, "bad escape '\\u{'");
          }
          ++pos_;
          return single(v);
        }
        STRATA_ASSIGN_OR_RETURN(char32_t v, ParseHex(at, 4));
        return single(v);
      }
      case 'b':
        if (in_class) return single('\b');
        return Error(at, "word boundary '\\b' is not supported");
      case 'B':
        return Error(at, "word boundary '\\B' is not supported");
      case 'k':
        return Error(at, "backreference '\\k' is not supported");
      default:
        break;
    }
    if (e >= '1' && e <= '9')
      return Error(at, std::string("backreference '\\") + e + "' is not supported");
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || static_cast<unsigned char>(e) >= 0x80) {
      return Error(at, std::string("bad escape '\\") + e + "'");
    }
    return single(static_cast<char32_t>(e));
  }

  StatusOr<std::vector<CodepointRange>> ParseClass() {
    const size_t at = pos_;
    ++pos_;
    bool negate = false;
    if (pos_ < p_.size() && p_[pos_] == '^') {
      negate = true;
      ++pos_;
    }
    std::vector<CodepointRange> ranges;
    while (true) {
      if (pos_ >= p_.size()) return Error(at, "unbalanced '['");
      if (p_[pos_] == ']') {
        ++pos_;
        break;
      }
      STRATA_ASSIGN_OR_RETURN(std::vector<CodepointRange> lo, ClassAtom());
      if (lo.size() == 1 && lo[0].lo == lo[0].hi && pos_ + 1 < p_.size() && p_[pos_] == '-' &&
          p_[pos_ + 1] != ']') {
        ++pos_;
        const size_t range_at = pos_;
        STRATA_ASSIGN_OR_RETURN(std::vector<CodepointRange> hi, ClassAtom());
        if (hi.size() != 1 || hi[0].lo != hi[0].hi) {
          return Error(range_at, "class range ends in a class escape");
        }
        if (hi[0].lo < lo[0].lo) return Error(range_at, "class range out of order");
        ranges.push_back({lo[0].lo, hi[0].lo});
      } else {
        ranges.insert(ranges.end(), lo.begin(), lo.end());
      }
    }
    ranges = NormalizeRanges(std::move(ranges));
    return negate ? NegateRanges(ranges) : ranges;
  }

  StatusOr<std::vector<CodepointRange>> ClassAtom() {
    if (p_[pos_] == '\\') return ParseEscape(true);
    const size_t at = pos_;
    std::optional<char32_t> cp = internal::DecodeUtf8(p_, &pos_);
    if (!cp) return Error(at, "invalid UTF-8");
    return std::vector<CodepointRange>{{*cp, *cp}};
  }

  std::string_view p_;
  std::string name_;
  RegexEmbedOptions options_;
  GrammarBuilder* b_;
  size_t pos_ = 0;
  std::map<std::string, int32_t> escaped_rules_;
};

}  // namespace

StatusOr<int32_t> AddRegexRules(std::string_view pattern, const std::string& name,
                                const RegexEmbedOptions& options, const Limits& limits,
                                Grammar* grammar) {
  if (pattern.size() > limits.max_regex_bytes) {
    return InvalidArgumentError("regex: pattern is " + std::to_string(pattern.size()) +
                                " bytes, more than the limit " +
                                std::to_string(limits.max_regex_bytes));
  }
  GrammarBuilder builder(grammar, limits);
  STRATA_RETURN_IF_ERROR(builder.Charge(grammar->NumElements()));
  return RegexParser(pattern, name, options, &builder).Parse();
}

StatusOr<Grammar> RegexToGrammar(std::string_view pattern, const Limits& limits) {
  Grammar g;
  STRATA_ASSIGN_OR_RETURN(int32_t root, AddRegexRules(pattern, "regex", {}, limits, &g));
  g.root = root;
  Status valid = ValidateGrammar(g, limits);
  if (!valid.ok()) return InvalidArgumentError("regex: " + valid.message());
  return g;
}

}  // namespace strata::grammar
