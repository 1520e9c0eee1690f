#include "strata/embedding/bert_pre_tokenizer.h"

#include "strata/tokenizer/unicode.h"

namespace strata::embedding {

bool IsBertPunctuation(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
           (cp >= 123 && cp <= 126);
  }
  return tokenizer::GetUnicodeClass(cp) == tokenizer::UnicodeClass::kPunctuation;
}

std::vector<std::u32string_view> SplitBertWords(std::u32string_view text) {
  std::vector<std::u32string_view> words;
  size_t start = 0;  // of the word being gathered
  for (size_t i = 0; i < text.size(); ++i) {
    const char32_t cp = text[i];
    const bool space = tokenizer::IsUnicodeWhitespace(cp);
    if (!space && !IsBertPunctuation(cp)) continue;
    if (i > start) words.push_back(text.substr(start, i - start));
    if (!space) words.push_back(text.substr(i, 1));
    start = i + 1;
  }
  if (text.size() > start) words.push_back(text.substr(start));
  return words;
}

}  // namespace strata::embedding
