#include "grammar_builder.h"

#include <string>
#include <utility>
#include <vector>

namespace strata::grammar::internal {

StatusOr<int32_t> GrammarBuilder::AddHelperRule(const std::string& base,
                                                std::vector<Alternative> alternatives) {
  return AddNamedRule(base + "_" + std::to_string(++helper_counter_), std::move(alternatives));
}

StatusOr<int32_t> GrammarBuilder::AddNamedRule(const std::string& name,
                                               std::vector<Alternative> alternatives) {
  if (static_cast<int64_t>(grammar_->rules.size()) >= limits_.max_rules) {
    return InvalidArgumentError("grammar needs more than " + std::to_string(limits_.max_rules) +
                                " rules");
  }
  int64_t n = 0;
  for (const Alternative& a : alternatives) n += static_cast<int64_t>(a.elements.size());
  STRATA_RETURN_IF_ERROR(Charge(n));
  return grammar_->AddRule(name, std::move(alternatives));
}

Status GrammarBuilder::Charge(int64_t elements) {
  elements_ += elements;
  if (elements_ > limits_.max_elements) {
    return InvalidArgumentError("grammar needs more than " + std::to_string(limits_.max_elements) +
                                " elements");
  }
  return OkStatus();
}

Status GrammarBuilder::AppendRepeat(const Element& body, int64_t min, int64_t max,
                                    const std::string& base, std::vector<Element>* out) {
  if (min < 0 || min > limits_.max_repetition || max > limits_.max_repetition) {
    return InvalidArgumentError("repetition count above the limit " +
                                std::to_string(limits_.max_repetition));
  }
  if (max >= 0 && min > max) {
    return InvalidArgumentError("repetition {" + std::to_string(min) + "," + std::to_string(max) +
                                "} has min > max");
  }
  STRATA_RETURN_IF_ERROR(Charge(min));
  for (int64_t i = 0; i < min; ++i) out->push_back(body);
  if (max < 0) {
    // star ::= body star | ""  (right recursion: the recursive call is a tail call, so the
    // matcher's stack does not grow with the count).
    const int32_t star = static_cast<int32_t>(grammar_->rules.size());
    STRATA_ASSIGN_OR_RETURN(
        int32_t idx, AddHelperRule(base, {Alternative{{body, Element::Ref(star)}}, Alternative{}}));
    out->push_back(Element::Ref(idx));
    return Charge(1);
  }
  // opt_1 ::= body | "" ; opt_k ::= body opt_{k-1} | ""  (a chain, O(max - min) elements).
  int32_t prev = -1;
  for (int64_t k = 1; k <= max - min; ++k) {
    Alternative first{{body}};
    if (prev >= 0) first.elements.push_back(Element::Ref(prev));
    STRATA_ASSIGN_OR_RETURN(prev, AddHelperRule(base, {std::move(first), Alternative{}}));
  }
  if (prev >= 0) {
    out->push_back(Element::Ref(prev));
    return Charge(1);
  }
  return OkStatus();
}

std::optional<char32_t> DecodeUtf8(std::string_view text, size_t* pos) {
  const size_t i = *pos;
  if (i >= text.size()) return std::nullopt;
  const auto b0 = static_cast<uint8_t>(text[i]);
  int len = 0;
  char32_t c = 0;
  if (b0 < 0x80) {
    *pos = i + 1;
    return b0;
  } else if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    c = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    c = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    c = b0 & 0x07;
  } else {
    return std::nullopt;
  }
  if (i + len > text.size()) return std::nullopt;
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<uint8_t>(text[i + k]);
    if ((b & 0xC0) != 0x80) return std::nullopt;
    c = (c << 6) | (b & 0x3F);
  }
  if ((len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10FFFF)) ||
      (c >= 0xD800 && c <= 0xDFFF)) {
    return std::nullopt;
  }
  *pos = i + len;
  return c;
}

std::string LineColumn(std::string_view text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

}  // namespace strata::grammar::internal
