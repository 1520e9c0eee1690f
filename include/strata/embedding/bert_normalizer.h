// BertNormalizer: the text normalization of BERT's tokenizers, as the Hugging Face `tokenizers`
// library's BertNormalizer (normalizers/bert.rs) does it, in its order:
//   1. clean_text: drop U+0000, U+FFFD and control characters (General_Category Cc, Cf, Co,
//      Cs, except tab, newline and carriage return), then turn every White_Space character
//      (and tab, newline, carriage return) into a space;
//   2. handle_chinese_chars: put a space on each side of every CJK ideograph (IsChineseChar);
//   3. strip_accents: NFD, then drop nonspacing marks (General_Category Mn);
//   4. lowercase: each code point's full lowercase mapping (no final-sigma context).
// Unassigned code points pass through untouched, as there. Immutable; any thread may call it.
#pragma once

#include <string>
#include <string_view>

namespace strata::embedding {

struct BertNormalizerOptions {
  bool clean_text = true;
  bool handle_chinese_chars = true;
  bool strip_accents = true;  // tokenizer.json's null means "as lowercase"
  bool lowercase = true;
};

// The "Chinese characters" of BERT (tokenization.py's _is_chinese_char): the CJK Unified
// Ideographs blocks and extensions A-E, and the two CJK Compatibility Ideographs blocks. Not
// Japanese kana, Hangul or CJK punctuation.
bool IsChineseChar(char32_t cp);

class BertNormalizer {
 public:
  explicit BertNormalizer(const BertNormalizerOptions& options = {}) : options_(options) {}

  std::u32string Normalize(std::u32string_view text) const;

  const BertNormalizerOptions& options() const { return options_; }

 private:
  BertNormalizerOptions options_;
};

}  // namespace strata::embedding
