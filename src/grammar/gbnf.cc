#include "strata/grammar/gbnf.h"

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gbnf_parser.h"
#include "grammar_builder.h"

namespace strata::grammar {
namespace {

using internal::GrammarBuilder;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class GbnfParser {
 public:
  GbnfParser(std::string_view text, Grammar base, const Limits& limits)
      : text_(text), grammar_(std::move(base)), builder_(&grammar_, limits) {
    for (size_t i = 0; i < grammar_.rules.size(); ++i) {
      names_[grammar_.rules[i].name] = static_cast<int32_t>(i);
    }
  }

  StatusOr<Grammar> Parse() {
    SkipSpace();
    while (pos_ < text_.size()) {
      STRATA_RETURN_IF_ERROR(ParseRule());
      SkipSpace();
    }
    if (!undefined_.empty()) {
      // The earliest reference to a rule never defined.
      auto first = undefined_.begin();
      for (auto it = undefined_.begin(); it != undefined_.end(); ++it) {
        if (it->second < first->second) first = it;
      }
      return Error(first->second, "undefined rule '" + grammar_.rules[first->first].name + "'");
    }
    auto root = names_.find("root");
    if (root == names_.end()) return Error(text_.size(), "no 'root' rule");
    grammar_.root = root->second;
    Status valid = ValidateGrammar(grammar_, builder_.limits());
    if (!valid.ok()) return InvalidArgumentError("gbnf: " + valid.message());
    return std::move(grammar_);
  }

 private:
  Status Error(size_t at, const std::string& what) const {
    return InvalidArgumentError("gbnf: " + internal::LineColumn(text_, at) + ": " + what);
  }
  Status Wrap(size_t at, const Status& s) const { return s.ok() ? s : Error(at, s.message()); }

  void SkipSpace() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view PeekName(size_t at) const {
    size_t end = at;
    while (end < text_.size() && IsNameChar(text_[end])) ++end;
    return text_.substr(at, end - at);
  }

  // Whether a rule definition `name ::=` starts at pos_.
  bool AtRuleStart() const {
    std::string_view name = PeekName(pos_);
    if (name.empty()) return false;
    size_t p = pos_ + name.size();
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    return text_.substr(p, 3) == "::=";
  }

  int32_t RuleIndex(std::string_view name, size_t at) {
    auto it = names_.find(std::string(name));
    if (it != names_.end()) return it->second;
    const int32_t idx = grammar_.AddRule(std::string(name));
    names_[std::string(name)] = idx;
    undefined_[idx] = at;
    return idx;
  }

  Status ParseRule() {
    const size_t start = pos_;
    std::string_view name = PeekName(pos_);
    if (name.empty()) return Error(pos_, "expected a rule name");
    pos_ += name.size();
    SkipSpace();
    if (text_.substr(pos_, 3) != "::=") return Error(pos_, "expected '::=' after rule name");
    pos_ += 3;
    const int32_t idx = RuleIndex(name, start);
    if (!undefined_.erase(idx)) {
      return Error(start, "rule '" + std::string(name) + "' is defined twice");
    }
    if (static_cast<int32_t>(grammar_.rules.size()) > builder_.limits().max_rules) {
      return Error(start, "more than " + std::to_string(builder_.limits().max_rules) + " rules");
    }
    current_rule_ = std::string(name);
    STRATA_ASSIGN_OR_RETURN(std::vector<Alternative> alts, ParseAlternatives(0));
    if (pos_ < text_.size() && text_[pos_] == ')') return Error(pos_, "unbalanced ')'");
    grammar_.rules[idx].alternatives = std::move(alts);
    return OkStatus();
  }

  StatusOr<std::vector<Alternative>> ParseAlternatives(int depth) {
    std::vector<Alternative> alts;
    while (true) {
      STRATA_ASSIGN_OR_RETURN(Alternative alt, ParseSequence(depth));
      alts.push_back(std::move(alt));
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == '|') {
        ++pos_;
        continue;
      }
      return alts;
    }
  }

  StatusOr<Alternative> ParseSequence(int depth) {
    Alternative alt;
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size()) return alt;
      const char c = text_[pos_];
      if (c == '|' || c == ')') return alt;
      if (depth == 0 && AtRuleStart()) return alt;
      const size_t at = pos_;
      std::vector<Element> atom;  // a literal is several elements
      if (c == '"') {
        STRATA_RETURN_IF_ERROR(ParseLiteral(&atom));
      } else if (c == '[') {
        STRATA_ASSIGN_OR_RETURN(Element e, ParseClass());
        atom.push_back(std::move(e));
      } else if (c == '.') {
        ++pos_;
        atom.push_back(Element::Class({{0, kMaxCodepoint}}));
      } else if (c == '(') {
        if (depth + 1 > builder_.limits().max_nesting_depth) {
          return Error(pos_, "groups nested deeper than " +
                                 std::to_string(builder_.limits().max_nesting_depth));
        }
        ++pos_;
        STRATA_ASSIGN_OR_RETURN(std::vector<Alternative> inner, ParseAlternatives(depth + 1));
        SkipSpace();
        if (pos_ >= text_.size() || text_[pos_] != ')') return Error(at, "unbalanced '('");
        ++pos_;
        STRATA_ASSIGN_OR_RETURN(int32_t r,
                                Wrap(at, builder_.AddHelperRule(current_rule_, std::move(inner))));
        atom.push_back(Element::Ref(r));
      } else if (IsNameChar(c)) {
        std::string_view name = PeekName(pos_);
        pos_ += name.size();
        atom.push_back(Element::Ref(RuleIndex(name, at)));
      } else {
        return Error(pos_, std::string("unexpected character '") + c + "'");
      }
      STRATA_RETURN_IF_ERROR(ParsePostfix(at, std::move(atom), &alt.elements));
    }
  }

  StatusOr<Element> Wrap(size_t at, StatusOr<Element> e) const {
    if (!e.ok()) return Error(at, e.status().message());
    return e;
  }
  StatusOr<int32_t> Wrap(size_t at, StatusOr<int32_t> e) const {
    if (!e.ok()) return Error(at, e.status().message());
    return e;
  }

  Status ParsePostfix(size_t at, std::vector<Element> atom, std::vector<Element>* out) {
    // Skips spaces (not newlines: a postfix operator belongs to the same line).
    size_t p = pos_;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    const char op = p < text_.size() ? text_[p] : '\0';
    if (op != '*' && op != '+' && op != '?' && op != '{') {
      STRATA_RETURN_IF_ERROR(Wrap(at, builder_.Charge(static_cast<int64_t>(atom.size()))));
      for (Element& e : atom) out->push_back(std::move(e));
      return OkStatus();
    }
    pos_ = p + 1;
    int64_t min = 0, max = -1;
    if (op == '+') {
      min = 1;
    } else if (op == '?') {
      max = 1;
    } else if (op == '{') {
      STRATA_ASSIGN_OR_RETURN(min, ParseCount());
      max = min;
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        max = -1;
        SkipSpace();
        if (pos_ < text_.size() && text_[pos_] != '}') {
          STRATA_ASSIGN_OR_RETURN(max, ParseCount());
        }
      }
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '}') return Error(pos_, "expected '}'");
      ++pos_;
    }
    Element body;
    if (atom.size() == 1) {
      body = std::move(atom[0]);
    } else {
      STRATA_ASSIGN_OR_RETURN(
          int32_t r,
          Wrap(at, builder_.AddHelperRule(current_rule_, {Alternative{std::move(atom)}})));
      body = Element::Ref(r);
    }
    return Wrap(at, builder_.AppendRepeat(body, min, max, current_rule_, out));
  }

  StatusOr<int64_t> ParseCount() {
    SkipSpace();
    const size_t at = pos_;
    int64_t v = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      v = v * 10 + (text_[pos_] - '0');
      if (v > builder_.limits().max_repetition) {
        return Error(at, "repetition count above the limit " +
                             std::to_string(builder_.limits().max_repetition));
      }
      ++pos_;
    }
    if (pos_ == at) return Error(at, "expected a repetition count");
    SkipSpace();
    return v;
  }

  // One (possibly escaped) code point inside a literal or class.
  StatusOr<char32_t> ParseChar() {
    const size_t at = pos_;
    if (text_[pos_] != '\\') {
      std::optional<char32_t> c = internal::DecodeUtf8(text_, &pos_);
      if (!c) return Error(at, "invalid UTF-8");
      return *c;
    }
    ++pos_;
    if (pos_ >= text_.size()) return Error(at, "unfinished escape");
    const char e = text_[pos_++];
    switch (e) {
      case 'n':
        return U'\n';
      case 't':
        return U'\t';
      case 'r':
        return U'\r';
      case '\\':
      case '"':
      case '\'':
      case '[':
      case ']':
      case '-':
      case '^':
      case '/':
        return static_cast<char32_t>(e);
      case 'x':
      case 'u':
      case 'U': {
        const int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        char32_t v = 0;
        for (int i = 0; i < digits; ++i) {
          const int h = pos_ < text_.size() ? HexValue(text_[pos_]) : -1;
          if (h < 0) return Error(at, std::string("bad escape '\\") + e + "': expected hex digits");
          v = v * 16 + h;
          ++pos_;
        }
        if (v > kMaxCodepoint) return Error(at, "escape beyond U+10FFFF");
        return v;
      }
      default:
        return Error(at, std::string("bad escape '\\") + e + "'");
    }
  }

  Status ParseLiteral(std::vector<Element>* out) {
    const size_t at = pos_;
    ++pos_;
    while (true) {
      if (pos_ >= text_.size()) return Error(at, "unterminated string literal");
      if (text_[pos_] == '"') {
        ++pos_;
        return OkStatus();
      }
      STRATA_ASSIGN_OR_RETURN(char32_t c, ParseChar());
      out->push_back(Element::Char(c));
    }
  }

  StatusOr<Element> ParseClass() {
    const size_t at = pos_;
    ++pos_;
    bool negate = false;
    if (pos_ < text_.size() && text_[pos_] == '^') {
      negate = true;
      ++pos_;
    }
    std::vector<CodepointRange> ranges;
    while (true) {
      if (pos_ >= text_.size()) return Error(at, "unbalanced '['");
      if (text_[pos_] == ']') {
        ++pos_;
        break;
      }
      STRATA_ASSIGN_OR_RETURN(char32_t lo, ParseChar());
      char32_t hi = lo;
      if (pos_ + 1 < text_.size() && text_[pos_] == '-' && text_[pos_ + 1] != ']') {
        ++pos_;
        STRATA_ASSIGN_OR_RETURN(hi, ParseChar());
        if (hi < lo) return Error(at, "class range out of order");
      }
      ranges.push_back({lo, hi});
    }
    ranges = NormalizeRanges(std::move(ranges));
    if (negate) ranges = NegateRanges(ranges);
    return Element::Class(std::move(ranges));
  }

  std::string_view text_;
  Grammar grammar_;
  GrammarBuilder builder_;
  size_t pos_ = 0;
  std::unordered_map<std::string, int32_t> names_;
  std::unordered_map<int32_t, size_t> undefined_;  // referenced, not yet defined: first use
  std::string current_rule_;
};

}  // namespace

namespace internal {

StatusOr<Grammar> ParseGbnfOnto(std::string_view text, Grammar base, const Limits& limits,
                                size_t max_text_bytes) {
  if (text.size() > max_text_bytes) {
    return InvalidArgumentError("gbnf: grammar is " + std::to_string(text.size()) +
                                " bytes, more than the limit " + std::to_string(max_text_bytes));
  }
  return GbnfParser(text, std::move(base), limits).Parse();
}

}  // namespace internal

StatusOr<Grammar> ParseGbnf(std::string_view text, const Limits& limits) {
  return internal::ParseGbnfOnto(text, Grammar{}, limits, limits.max_grammar_bytes);
}

}  // namespace strata::grammar
