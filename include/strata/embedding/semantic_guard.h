// SemanticGuard: the lexical check a semantic-cache hit must also pass. Sentence-embedding
// cosine cannot tell a reworded request from one a word apart ("from London to New York" /
// "from New York to London" score 0.999 with all-MiniLM-L6-v2, "older than 7 days" / "newer
// than 7 days" 0.982); the guard looks at the words that carry such differences and vetoes the
// hit when they disagree. It only ever vetoes: it never says that two texts mean the same, so
// it is applied to a pair that the cosine threshold already accepted, with the same two texts
// the embeddings were computed from.
// bench/semantic_threshold.py measures both together (docs/benchmarks/semantic-threshold.md).
//
// Tokens (GuardTokenize). Text is bytes (UTF-8 kept byte-wise: a byte >= 0x80 is a letter,
// except in the curly quotes U+2018/2019/201C/201D, which count as ' and ", and in the no-break
// space U+00A0 and the General Punctuation block U+2000-U+206F, which separate words; invalid
// UTF-8 is fine). ASCII letters are lowercased. A token is
//   - a number: a run of digits with its decimal part (3.14) and thousands groups (300,000 ->
//     300000), also the cardinal number words ("five", "twenty-one", "two hundred" -> 5, 21,
//     200, words joined by spaces or hyphens only; "one" only before a scale word or after a
//     tens word, alone it is a pronoun as often as a number);
//     digits split a word ("90th" -> 90 th, "K2" -> k 2);
//   - a symbol: one of + * / = < > % $ ^ & | ~ # @ \, a '-' whose next non-space character is
//     a digit (3x - 4, -5; elsewhere '-' joins or separates words), a '!' right before '='; the
//     word "percent" is the symbol %;
//   - a word: a run of letters. An apostrophe splits words ("australia's" -> australia s),
//     except that "n't" is the word "not" ("don't" -> do not), as is "cannot" (can not).
// Everything else (space, . , ; : ? ( ) [ ] and so on) only separates tokens.
//
// Anchors, the tokens that change what is asked:
//   - numbers and symbols;
//   - names: words capitalized (first byte A-Z) in the original text, except the first word of
//     a sentence (the text's first, and the first after . ! ? : ; a newline or an opening
//     quote) and the pronoun "I";
//   - quotes: the tokens between a pair of quotes (' or ", opening after a non-letter,
//     closing before one, so apostrophes inside words never count);
//   - polarity words (kPolarityWords in semantic_guard.cc): negation (not, no, never, nor,
//     without, except, avoid), comparison and order (more, less, fewer, most, least, than,
//     over, under, above, below, higher, lower, min, max, minimum, maximum, first, last,
//     older, newer, earlier, later, ascending, descending, increase, decrease), time (before,
//     after, within, until) and direction particles (up, down, off). "to", "from" and "into"
//     are not among them: as infinitive and phrasal particles they are in most requests, and
//     the order rules below catch swapped directions.
// Content words: words that are neither polarity words nor stop words (kStopWords: articles,
// pronouns, auxiliaries, prepositions, conjunctions, wh-words, quantifiers).
//
// Rules: SemanticGuardVeto(a, b) returns the first that fails, kNone when all pass.
//   kNumbers    the same numbers, each as many times.
//   kSymbols    the same symbols, each as many times.
//   kNames      every name of either text is a word of the other (in any case, so "australia"
//               matches "Australia").
//   kQuotes     every quote of either text appears in the other as the same run of tokens
//               ("Translate 'good morning'" matches "say good morning").
//   kPolarity   the same set of polarity words.
//   kOrder      the numbers and names the texts share come first in the same order
//               ("2 to the power of 10" / "10 to the power of 2").
//   kReordered  the same tokens, each as many times, but in another order (a, an, the aside):
//               "convert a number to a string" / "convert a string to a number".
//   kSwappedWord the texts are near-duplicates, yet each has a content word the other lacks:
//               one word or phrase swapped for another in the same frame ("foods high in iron"
//               / "low in iron", "a soft yolk" / "a hard yolk"). Near-duplicate: a longest
//               common subsequence of the token sequences covers at least half of all tokens
//               (2 * LCS >= (|a| + |b|) / 2). A text's frame is its tokens before the first one
//               that occurs anywhere in the other text; when one of the two frames has no
//               content word, both frames are left out ("Who painted" / "Which artist
//               painted" rewords the question, not the subject), otherwise they count like the
//               rest ("Encrypt this file" / "Decrypt this file"). A content word counts when no
//               word of the other text is equal to it or a variant of it: the same stem (one
//               suffix such as -s, -es, -ed, -ing, -er, -ly, -ion, -ation, -ment, -ness, -y,
//               -ize, -ise stripped, then a final e and a doubled final consonant: "cancelling"
//               / "cancellation", "summarize" / "summary") or a typo of it (one byte inserted or
//               deleted, or two neighbouring bytes swapped, the shorter word at least 3 bytes:
//               "instal" / "install", "diffrence" / "difference").
// Words that appear on only one side are otherwise allowed: a paraphrase uses synonyms.
//
// Cost: O(|a| + |b|) hashing, plus, only when the swapped-word rule gets that far, a
// bit-parallel LCS (LongestCommonSubsequence below): microseconds for a prompt of a few
// sentences, about 60 ms for two 130 KB texts (20,000 tokens each) on one core.
//
// Pure functions; any thread may call them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::embedding {

enum class GuardTokenKind { kWord, kNumber, kSymbol };

struct GuardToken {
  std::string text;  // lowercased word, number without separators, or one symbol character
  GuardTokenKind kind = GuardTokenKind::kWord;
  bool name = false;  // a word capitalized away from a sentence start (see above)
  int quote = -1;     // index of the quoted span the token is in; -1 outside quotes
};

// Which rule vetoed a pair; kNone when the guard allows it. The order is the order of checks.
enum class GuardVeto {
  kNone,
  kNumbers,
  kSymbols,
  kNames,
  kQuotes,
  kPolarity,
  kOrder,
  kReordered,
  kSwappedWord,
};

// The tokens of `text`, in order (see the header comment).
std::vector<GuardToken> GuardTokenize(std::string_view text);

// The first rule that `a` and `b` break, or kNone. Symmetric: the same for (b, a).
GuardVeto SemanticGuardVeto(std::string_view a, std::string_view b);

// Every rule that `a` and `b` break, as bits 1 << static_cast<int>(GuardVeto::k...) (0 when
// the guard allows the pair). For measuring the rules one by one (strata-embed --pairs,
// bench/semantic_threshold.py); SemanticGuardVeto stops at the first and costs less.
uint32_t SemanticGuardVetoes(std::string_view a, std::string_view b);

// Whether a semantic-cache hit between requests `a` and `b` may be served: no rule vetoes it.
inline bool SemanticGuardAllows(std::string_view a, std::string_view b) {
  return SemanticGuardVeto(a, b) == GuardVeto::kNone;
}

// "none", "numbers", "symbols", "names", "quotes", "polarity", "order", "reordered",
// "swapped_word".
std::string_view GuardVetoName(GuardVeto veto);

// The length of a longest common subsequence of `a` and `b` (equal strings match), by the
// bit-parallel algorithm of Hyyrö 2004 ("Bit-parallel LCS-length computation revisited"):
// O(|a| * |b| / 64) word operations and |b| / 64 words of memory per distinct token that both
// hold (20,000-token texts with 3,000 such tokens: about 6M operations, 7.5 MB).
size_t LongestCommonSubsequence(const std::vector<std::string_view>& a,
                                const std::vector<std::string_view>& b);

}  // namespace strata::embedding
