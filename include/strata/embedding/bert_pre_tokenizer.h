// BERT's pre-tokenizer (the `tokenizers` library's BertPreTokenizer): splits normalized text
// into words at White_Space characters (dropped) and around punctuation (each punctuation
// character becomes a word of its own). Punctuation is every ASCII punctuation character
// (including symbols such as $ + < = > ^ ` | ~) and General_Category P* beyond ASCII;
// non-ASCII symbols (emoji, currency signs) are word characters. Pure; any thread may call it.
#pragma once

#include <string_view>
#include <vector>

namespace strata::embedding {

bool IsBertPunctuation(char32_t cp);

// The words of `text`, in order, as views into it; never empty ones.
std::vector<std::u32string_view> SplitBertWords(std::u32string_view text);

}  // namespace strata::embedding
