#include "strata/embedding/bert_normalizer.h"

#include "strata/tokenizer/unicode.h"
#include "strata/tokenizer/unicode_normalization.h"

namespace strata::embedding {
namespace {

using tokenizer::UnicodeClass;

bool IsBertWhitespace(char32_t cp) {
  return cp == '\t' || cp == '\n' || cp == '\r' || tokenizer::IsUnicodeWhitespace(cp);
}

// `tokenizers` asks unicode_categories' is_other(): Cc, Cf, Co and Cs, not Cn.
bool IsBertControl(char32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  return tokenizer::GetUnicodeClass(cp) == UnicodeClass::kControl;
}

}  // namespace

bool IsChineseChar(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

std::u32string BertNormalizer::Normalize(std::u32string_view text) const {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t cp : text) {
    if (options_.clean_text) {
      if (cp == 0 || cp == tokenizer::kReplacementCharacter || IsBertControl(cp)) continue;
      if (IsBertWhitespace(cp)) cp = U' ';
    }
    if (options_.handle_chinese_chars && IsChineseChar(cp)) {
      out.push_back(U' ');
      out.push_back(cp);
      out.push_back(U' ');
    } else {
      out.push_back(cp);
    }
  }
  if (options_.strip_accents) {
    std::u32string decomposed = tokenizer::ToNfd(out);
    out.clear();
    for (char32_t cp : decomposed) {
      if (!tokenizer::IsNonspacingMark(cp)) out.push_back(cp);
    }
  }
  if (options_.lowercase) {
    std::u32string lower;
    lower.reserve(out.size());
    for (char32_t cp : out) tokenizer::AppendLowercase(cp, &lower);
    out = std::move(lower);
  }
  return out;
}

}  // namespace strata::embedding
