#include "strata/embedding/semantic_guard.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace strata::embedding {
namespace {

// Negation, comparison, order, time and direction: a request with one of these differs from
// the same request without it (see the header).
constexpr std::string_view kPolarityWords[] = {
    "not",      "no",     "never", "nor",     "without", "except",    "avoid",      "more",
    "less",     "fewer",  "most",  "least",   "than",    "over",      "under",      "above",
    "below",    "higher", "lower", "min",     "max",     "minimum",   "maximum",    "first",
    "last",     "older",  "newer", "earlier", "later",   "ascending", "descending", "increase",
    "decrease", "before", "after", "within",  "until",   "up",        "down",       "off"};

// English function words: articles, pronouns, wh-words, auxiliaries, prepositions,
// conjunctions, quantifiers, a few adverbs and greetings, and the pieces contractions leave
// ("what's" -> what s). Rewording changes these freely, so they never count as a swapped word.
constexpr std::string_view kStopWords[] = {
    "a",        "an",         "the",     "i",      "me",        "my",      "mine",    "myself",
    "we",       "us",         "our",     "ours",   "ourselves", "you",     "your",    "yours",
    "yourself", "yourselves", "he",      "him",    "his",       "himself", "she",     "her",
    "hers",     "herself",    "it",      "its",    "itself",    "they",    "them",    "their",
    "theirs",   "themselves", "this",    "that",   "these",     "those",   "what",    "which",
    "who",      "whom",       "whose",   "when",   "where",     "why",     "how",     "whether",
    "is",       "are",        "was",     "were",   "be",        "been",    "being",   "am",
    "do",       "does",       "did",     "doing",  "done",      "have",    "has",     "had",
    "having",   "can",        "could",   "will",   "would",     "shall",   "should",  "may",
    "might",    "must",       "of",      "in",     "on",        "at",      "by",      "for",
    "with",     "about",      "to",      "from",   "into",      "onto",    "as",      "per",
    "via",      "across",     "through", "during", "between",   "among",   "against", "toward",
    "towards",  "upon",       "like",    "and",    "or",        "but",     "if",      "so",
    "because",  "while",      "then",    "there",  "here",      "some",    "any",     "all",
    "both",     "each",       "every",   "either", "neither",   "other",   "another", "such",
    "own",      "same",       "many",    "much",   "very",      "just",    "also",    "too",
    "only",     "now",        "please",  "s",      "t",         "d",       "ll",      "m",
    "re",       "ve",         "one",     "yes",    "hi",        "hello",   "hey",     "really",
    "actually", "again",      "still"};

// Derivational and inflectional suffixes a stem comparison strips (one of them, the longest
// that leaves at least 3 bytes).
constexpr std::string_view kSuffixes[] = {"ations", "ation", "ments", "ment", "ness", "ions",
                                          "izes",   "ized",  "ises",  "ised", "ion",  "ing",
                                          "ers",    "ies",   "ied",   "ize",  "ise",  "es",
                                          "ed",     "er",    "ly",    "s",    "y"};

using WordSet = std::unordered_set<std::string_view>;

bool IsPolarityWord(std::string_view w) {
  static const WordSet kSet(std::begin(kPolarityWords), std::end(kPolarityWords));
  return kSet.contains(w);
}

bool IsStopWord(std::string_view w) {
  static const WordSet kSet(std::begin(kStopWords), std::end(kStopWords));
  return kSet.contains(w);
}

bool IsArticle(std::string_view w) { return w == "a" || w == "an" || w == "the"; }

constexpr std::string_view kSymbols = "+*/=<>%$^&|~#@\\";
constexpr std::string_view kSentenceEnds = ".!?:;\n";

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsUpper(char c) { return c >= 'A' && c <= 'Z'; }
char ToLower(char c) { return IsUpper(c) ? static_cast<char>(c - 'A' + 'a') : c; }

// The non-ASCII character at text[i] when it is one the tokenizer treats as punctuation: its
// length in bytes, with *quote set to ' or " for the curly quotes U+2018/2019 and U+201C/201D
// (else 0); 0 for any other byte. Besides the curly quotes these are the no-break space U+00A0
// and the General Punctuation block U+2000-U+206F (dashes, ellipsis, bullets, special spaces),
// which separate words as their ASCII counterparts do.
size_t NonAsciiPunctuationAt(std::string_view text, size_t i, char* quote) {
  *quote = 0;
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  if (i + 1 < text.size() && byte(i) == 0xC2 && byte(i + 1) == 0xA0) return 2;
  if (i + 2 < text.size() && byte(i) == 0xE2 && (byte(i + 1) == 0x80 || byte(i + 1) == 0x81) &&
      byte(i + 2) >= 0x80 && byte(i + 2) <= 0xBF) {
    if (byte(i + 1) == 0x80 && (byte(i + 2) == 0x98 || byte(i + 2) == 0x99)) *quote = '\'';
    if (byte(i + 1) == 0x80 && (byte(i + 2) == 0x9C || byte(i + 2) == 0x9D)) *quote = '"';
    return 3;
  }
  return 0;
}

// The quote character (' or ", straight or curly) at text[i] and its length in bytes; 0 when
// there is none.
char QuoteAt(std::string_view text, size_t i, size_t* length) {
  *length = 1;
  if (text[i] == '\'' || text[i] == '"') return text[i];
  char quote = 0;
  *length = NonAsciiPunctuationAt(text, i, &quote);
  return quote;
}

// A letter: an ASCII letter, or any byte of a non-ASCII character that is not punctuation
// (NonAsciiPunctuationAt), so UTF-8 text, valid or not, forms words byte by byte.
bool IsLetterAt(std::string_view text, size_t i) {
  const char c = text[i];
  if ((c >= 'a' && c <= 'z') || IsUpper(c)) return true;
  if (static_cast<unsigned char>(c) < 0x80) return false;
  char quote = 0;
  for (size_t back = 0; back <= 2 && back <= i; ++back) {
    if (NonAsciiPunctuationAt(text, i - back, &quote) > back) return false;
  }
  return true;
}

bool IsAlnumAt(std::string_view text, size_t i) {
  return i < text.size() && (IsDigit(text[i]) || IsLetterAt(text, i));
}

// Cardinal number words: units (0-19), tens, and scales.
int UnitValue(std::string_view w) {
  static constexpr std::array<std::string_view, 20> kUnits = {
      "zero",     "one",     "two",     "three",     "four",     "five",    "six",
      "seven",    "eight",   "nine",    "ten",       "eleven",   "twelve",  "thirteen",
      "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"};
  const auto it = std::find(kUnits.begin(), kUnits.end(), w);
  return it == kUnits.end() ? -1 : static_cast<int>(it - kUnits.begin());
}

int TensValue(std::string_view w) {
  static constexpr std::array<std::string_view, 8> kTens = {
      "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"};
  const auto it = std::find(kTens.begin(), kTens.end(), w);
  return it == kTens.end() ? -1 : 20 + 10 * static_cast<int>(it - kTens.begin());
}

uint64_t ScaleValue(std::string_view w) {
  if (w == "hundred") return 100;
  if (w == "thousand") return 1000;
  if (w == "million") return 1000000;
  if (w == "billion") return 1000000000;
  return 0;
}

// The number spelled by the longest phrase of number words starting at tokens[begin] ("two
// hundred thirty-five"), as {value, words used}; {0, 0} when tokens[begin] starts none. The
// words of a phrase are joined[k]: only spaces or hyphens before them ("one, two" is two
// phrases). "one" starts a phrase only before a scale word: alone it is a pronoun as often as
// a number.
std::pair<uint64_t, size_t> ParseNumberWords(const std::vector<GuardToken>& tokens,
                                             const std::vector<bool>& joined, size_t begin) {
  enum class Last { kNone, kUnit, kTens, kHundred, kLargeScale };
  Last last = Last::kNone;
  uint64_t total = 0;
  uint64_t group = 0;
  size_t k = begin;
  for (; k < tokens.size() && tokens[k].kind == GuardTokenKind::kWord && (k == begin || joined[k]);
       ++k) {
    const std::string& w = tokens[k].text;
    const int unit = UnitValue(w);
    const int tens = TensValue(w);
    const uint64_t scale = ScaleValue(w);
    if (unit >= 0) {
      const bool after_tens = last == Last::kTens && unit >= 1 && unit <= 9;
      const bool fresh = last == Last::kNone || last == Last::kHundred || last == Last::kLargeScale;
      if (!after_tens && !fresh) break;
      if (w == "one" && last == Last::kNone &&
          (k + 1 >= tokens.size() || !joined[k + 1] || ScaleValue(tokens[k + 1].text) == 0)) {
        break;
      }
      group += static_cast<uint64_t>(unit);
      last = Last::kUnit;
    } else if (tens >= 0) {
      if (last != Last::kNone && last != Last::kHundred && last != Last::kLargeScale) break;
      group += static_cast<uint64_t>(tens);
      last = Last::kTens;
    } else if (scale == 100) {
      if ((last != Last::kUnit && last != Last::kTens) || group == 0 || group >= 100) break;
      group *= 100;
      last = Last::kHundred;
    } else if (scale > 0) {
      if (last == Last::kNone || last == Last::kLargeScale || group == 0) break;
      total += group * scale;
      group = 0;
      last = Last::kLargeScale;
    } else {
      break;
    }
  }
  return {total + group, k - begin};
}

// One suffix stripped (the longest of kSuffixes that leaves 3 bytes), then a final 'e', then
// one of a doubled final consonant: "cancelling" and "cancellation" -> "cancel".
std::string Stem(std::string_view word) {
  std::string w(word);
  for (std::string_view suffix : kSuffixes) {
    if (w.size() >= suffix.size() + 3 && w.ends_with(suffix)) {
      w.resize(w.size() - suffix.size());
      break;
    }
  }
  if (w.size() > 3 && w.back() == 'e') w.pop_back();
  if (w.size() > 3 && w.back() == w[w.size() - 2] &&
      std::string_view("aeiou").find(w.back()) == std::string_view::npos) {
    w.pop_back();
  }
  return w;
}

// What SemanticGuardVeto compares, derived once per text.
struct Analysis {
  std::vector<GuardToken> tokens;
  std::vector<std::string_view> texts;              // tokens[i].text
  std::unordered_set<std::string_view> vocabulary;  // every token text
  std::vector<std::string_view> numbers;            // sorted
  std::vector<std::string_view> symbols;            // sorted
  std::vector<std::string_view> names;              // sorted, unique
  std::vector<std::string_view> polarity;           // sorted, unique
  std::vector<std::vector<std::string_view>> quotes;

  // texts, vocabulary and the lists view the strings of `tokens`: never copied.
  Analysis(const Analysis&) = delete;
  Analysis& operator=(const Analysis&) = delete;

  explicit Analysis(std::string_view text) : tokens(GuardTokenize(text)) {
    for (const GuardToken& t : tokens) {
      texts.push_back(t.text);
      vocabulary.insert(t.text);
      if (t.kind == GuardTokenKind::kNumber) numbers.push_back(t.text);
      if (t.kind == GuardTokenKind::kSymbol) symbols.push_back(t.text);
      if (t.name) names.push_back(t.text);
      if (t.kind == GuardTokenKind::kWord && IsPolarityWord(t.text)) {
        polarity.push_back(t.text);
      }
      if (t.quote >= 0) {
        if (static_cast<size_t>(t.quote) >= quotes.size()) quotes.resize(t.quote + 1);
        quotes[t.quote].push_back(t.text);
      }
    }
    for (auto* list : {&numbers, &symbols, &names, &polarity})
      std::sort(list->begin(), list->end());
    for (auto* list : {&names, &polarity})
      list->erase(std::unique(list->begin(), list->end()), list->end());
  }
};

bool NamesFound(const Analysis& from, const Analysis& in) {
  return std::all_of(from.names.begin(), from.names.end(),
                     [&](std::string_view name) { return in.vocabulary.contains(name); });
}

bool QuotesFound(const Analysis& from, const Analysis& in) {
  return std::all_of(from.quotes.begin(), from.quotes.end(), [&](const auto& quote) {
    return quote.empty() || std::search(in.texts.begin(), in.texts.end(), quote.begin(),
                                        quote.end()) != in.texts.end();
  });
}

// The anchors of `keys` in the order of their first occurrence in `text`.
std::vector<std::string_view> FirstOccurrences(const Analysis& text,
                                               const std::unordered_set<std::string_view>& keys) {
  std::vector<std::string_view> order;
  std::unordered_set<std::string_view> seen;
  for (std::string_view t : text.texts) {
    if (keys.contains(t) && seen.insert(t).second) order.push_back(t);
  }
  return order;
}

// The numbers and names that both texts hold come first in the same order in each.
bool SameOrderOfSharedAnchors(const Analysis& a, const Analysis& b) {
  std::unordered_set<std::string_view> keys;
  for (const Analysis* text : {&a, &b}) {
    for (const auto* list : {&text->numbers, &text->names}) {
      for (std::string_view anchor : *list) {
        if (a.vocabulary.contains(anchor) && b.vocabulary.contains(anchor)) keys.insert(anchor);
      }
    }
  }
  return FirstOccurrences(a, keys) == FirstOccurrences(b, keys);
}

std::vector<std::string_view> WithoutArticles(const std::vector<std::string_view>& texts) {
  std::vector<std::string_view> out;
  for (std::string_view t : texts) {
    if (!IsArticle(t)) out.push_back(t);
  }
  return out;
}

// The same tokens, as many times each (articles aside), in a different order.
bool Reordered(const Analysis& a, const Analysis& b) {
  std::vector<std::string_view> x = WithoutArticles(a.texts);
  std::vector<std::string_view> y = WithoutArticles(b.texts);
  if (x == y) return false;
  std::sort(x.begin(), x.end());
  std::sort(y.begin(), y.end());
  return x == y;
}

// Typo variants of the words of a text: the words themselves and every one-byte deletion of
// those of 4 or more bytes.
struct TypoIndex {
  const std::unordered_set<std::string_view>* words;
  std::unordered_set<std::string> deletions;

  explicit TypoIndex(const Analysis& text) : words(&text.vocabulary) {
    for (const GuardToken& t : text.tokens) {
      if (t.kind != GuardTokenKind::kWord || t.text.size() < 4) continue;
      for (size_t i = 0; i < t.text.size(); ++i) {
        deletions.insert(t.text.substr(0, i) + t.text.substr(i + 1));
      }
    }
  }

  // Whether some word is `word` with one byte inserted or deleted, or two neighbouring bytes
  // swapped (the shorter of the two at least 3 bytes).
  bool HasTypoOf(const std::string& word) const {
    if (word.size() >= 3 && deletions.contains(word)) return true;
    std::string edited;
    if (word.size() >= 4) {
      for (size_t i = 0; i < word.size(); ++i) {
        edited = word.substr(0, i) + word.substr(i + 1);
        if (words->contains(edited)) return true;
      }
    }
    if (word.size() >= 3) {
      for (size_t i = 0; i + 1 < word.size(); ++i) {
        if (word[i] == word[i + 1]) continue;
        edited = word;
        std::swap(edited[i], edited[i + 1]);
        if (words->contains(edited)) return true;
      }
    }
    return false;
  }
};

bool IsContentWord(const GuardToken& t) {
  return t.kind == GuardTokenKind::kWord && !IsStopWord(t.text) && !IsPolarityWord(t.text);
}

// The length of `text`'s frame: its tokens before the first that occurs anywhere in `other`.
size_t FrameLength(const Analysis& text, const Analysis& other) {
  size_t k = 0;
  while (k < text.texts.size() && !other.vocabulary.contains(text.texts[k])) ++k;
  return k;
}

bool FrameHasContentWord(const Analysis& text, size_t frame) {
  return std::any_of(text.tokens.begin(), text.tokens.begin() + static_cast<std::ptrdiff_t>(frame),
                     IsContentWord);
}

// The content words of `text` from token `begin` on that `other` has neither as a token nor
// by stem (typos are checked later, only when both texts have such words).
std::vector<const std::string*> UnmatchedContentWords(
    const Analysis& text, size_t begin, const Analysis& other,
    const std::unordered_set<std::string>& other_stems) {
  std::vector<const std::string*> out;
  for (size_t i = begin; i < text.tokens.size(); ++i) {
    const GuardToken& t = text.tokens[i];
    if (!IsContentWord(t) || other.vocabulary.contains(t.text) ||
        other_stems.contains(Stem(t.text))) {
      continue;
    }
    out.push_back(&t.text);
  }
  return out;
}

std::unordered_set<std::string> Stems(const Analysis& text) {
  std::unordered_set<std::string> stems;
  for (const GuardToken& t : text.tokens) {
    if (t.kind == GuardTokenKind::kWord) stems.insert(Stem(t.text));
  }
  return stems;
}

void DropTypos(std::vector<const std::string*>* words, const Analysis& other) {
  const TypoIndex index(other);
  std::erase_if(*words, [&](const std::string* w) { return index.HasTypoOf(*w); });
}

bool SwappedWord(const Analysis& a, const Analysis& b) {
  // The frames are skipped when one of them is function words only ("Who painted" / "Which
  // artist painted"): a question reworded. Two frames with content words ("Encrypt this" /
  // "Decrypt this") are compared like the rest.
  size_t begin_a = FrameLength(a, b);
  size_t begin_b = FrameLength(b, a);
  if (FrameHasContentWord(a, begin_a) && FrameHasContentWord(b, begin_b)) begin_a = begin_b = 0;
  std::vector<const std::string*> only_a = UnmatchedContentWords(a, begin_a, b, Stems(b));
  if (only_a.empty()) return false;
  std::vector<const std::string*> only_b = UnmatchedContentWords(b, begin_b, a, Stems(a));
  if (only_b.empty()) return false;
  DropTypos(&only_a, b);
  if (only_a.empty()) return false;
  DropTypos(&only_b, a);
  if (only_b.empty()) return false;
  // Near-duplicates: a common subsequence covers half the tokens, 2 L >= (|a| + |b|) / 2.
  const size_t lcs = LongestCommonSubsequence(a.texts, b.texts);
  return 4 * lcs >= a.texts.size() + b.texts.size();
}

}  // namespace

std::vector<GuardToken> GuardTokenize(std::string_view text) {
  std::vector<GuardToken> raw;
  std::vector<bool> joined;  // raw[k] follows raw[k - 1] with only spaces or hyphens between
  bool separated = true;     // punctuation other than those since the last token
  bool sentence_start = true;
  char open_quote = 0;  // ' or " while a quote is open
  int quote_count = 0;
  int current_quote = -1;
  const auto emit = [&](std::string token, GuardTokenKind kind, bool name) {
    raw.push_back({std::move(token), kind, name, current_quote});
    joined.push_back(!separated);
    separated = false;
    sentence_start = false;
  };
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const char c = text[i];
    size_t quote_length = 0;
    if (const char quote = QuoteAt(text, i, &quote_length); quote != 0) {
      separated = true;
      const bool after_space_or_start = i == 0 || !IsAlnumAt(text, i - 1);
      const size_t next = i + quote_length;
      const bool before_text = next < n && text[next] != ' ' && text[next] != '\n';
      if (open_quote == 0 && after_space_or_start && before_text) {
        open_quote = quote;
        current_quote = quote_count++;
        sentence_start = true;
      } else if (open_quote == quote && !IsAlnumAt(text, next) && i > 0 && text[i - 1] != ' ') {
        open_quote = 0;
        current_quote = -1;
      }
      i = next;
      continue;
    }
    char no_quote = 0;
    if (const size_t length = NonAsciiPunctuationAt(text, i, &no_quote); length > 0) {
      separated = true;
      i += length;
      continue;
    }
    if (IsDigit(c)) {
      size_t j = i;
      while (j < n && IsDigit(text[j])) ++j;
      std::string number(text.substr(i, j - i));
      while (j < n) {
        if (text[j] == '.' && j + 1 < n && IsDigit(text[j + 1])) {  // decimal part
          size_t k = j + 1;
          while (k < n && IsDigit(text[k])) ++k;
          number.append(text.substr(j, k - j));
          j = k;
        } else if (text[j] == ',' && j + 3 < n && IsDigit(text[j + 1]) && IsDigit(text[j + 2]) &&
                   IsDigit(text[j + 3]) &&
                   (j + 4 == n || !IsDigit(text[j + 4]))) {  // thousands group
          number.append(text.substr(j + 1, 3));
          j += 4;
        } else {
          break;
        }
      }
      emit(std::move(number), GuardTokenKind::kNumber, false);
      i = j;
      continue;
    }
    if (IsLetterAt(text, i)) {
      size_t j = i;
      while (j < n && IsLetterAt(text, j)) ++j;
      const std::string_view word = text.substr(i, j - i);
      std::string lower(word);
      std::transform(lower.begin(), lower.end(), lower.begin(), ToLower);
      // "n't": the word before it, then "not" ("don't" -> do not).
      size_t apostrophe = 0;
      if (lower.back() == 'n' && j < n && QuoteAt(text, j, &apostrophe) == '\'' &&
          j + apostrophe < n && ToLower(text[j + apostrophe]) == 't' &&
          !IsAlnumAt(text, j + apostrophe + 1)) {
        if (lower.size() > 1) emit(lower.substr(0, lower.size() - 1), GuardTokenKind::kWord, false);
        emit("not", GuardTokenKind::kWord, false);
        i = j + apostrophe + 1;
        continue;
      }
      if (lower == "cannot") {
        emit("can", GuardTokenKind::kWord, false);
        emit("not", GuardTokenKind::kWord, false);
      } else if (lower == "percent") {
        emit("%", GuardTokenKind::kSymbol, false);
      } else {
        const bool name = IsUpper(word[0]) && !sentence_start && lower != "i";
        emit(std::move(lower), GuardTokenKind::kWord, name);
      }
      i = j;
      continue;
    }
    if (c == '-') {  // minus before a number, else a hyphen or dash
      size_t j = i + 1;
      while (j < n && text[j] == ' ') ++j;
      if (j < n && IsDigit(text[j])) emit("-", GuardTokenKind::kSymbol, false);
    } else if (c == '!' && i + 1 < n && text[i + 1] == '=') {
      emit("!", GuardTokenKind::kSymbol, false);
    } else if (kSymbols.find(c) != std::string_view::npos) {
      emit(std::string(1, c), GuardTokenKind::kSymbol, false);
    } else {
      if (c != ' ' && c != '\t') separated = true;
      if (kSentenceEnds.find(c) != std::string_view::npos) sentence_start = true;
    }
    ++i;
  }
  // A quote never closed is no quote.
  if (open_quote != 0) {
    for (GuardToken& t : raw) {
      if (t.quote == current_quote) t.quote = -1;
    }
  }
  // Number words become numbers.
  std::vector<GuardToken> tokens;
  tokens.reserve(raw.size());
  for (size_t k = 0; k < raw.size();) {
    const auto [value, words] = raw[k].kind == GuardTokenKind::kWord
                                    ? ParseNumberWords(raw, joined, k)
                                    : std::pair<uint64_t, size_t>{0, 0};
    if (words > 0) {
      tokens.push_back({std::to_string(value), GuardTokenKind::kNumber, false, raw[k].quote});
      k += words;
    } else {
      tokens.push_back(std::move(raw[k]));
      ++k;
    }
  }
  return tokens;
}

namespace {

// The rules that `a` and `b` break, as SemanticGuardVetoes' bits; with `first_only`, only the
// first of them.
uint32_t Check(std::string_view text_a, std::string_view text_b, bool first_only) {
  const Analysis a(text_a);
  const Analysis b(text_b);
  const std::pair<GuardVeto, bool (*)(const Analysis&, const Analysis&)> kRules[] = {
      {GuardVeto::kNumbers,
       [](const Analysis& x, const Analysis& y) { return x.numbers != y.numbers; }},
      {GuardVeto::kSymbols,
       [](const Analysis& x, const Analysis& y) { return x.symbols != y.symbols; }},
      {GuardVeto::kNames,
       [](const Analysis& x, const Analysis& y) { return !NamesFound(x, y) || !NamesFound(y, x); }},
      {GuardVeto::kQuotes,
       [](const Analysis& x, const Analysis& y) {
         return !QuotesFound(x, y) || !QuotesFound(y, x);
       }},
      {GuardVeto::kPolarity,
       [](const Analysis& x, const Analysis& y) { return x.polarity != y.polarity; }},
      {GuardVeto::kOrder,
       [](const Analysis& x, const Analysis& y) { return !SameOrderOfSharedAnchors(x, y); }},
      {GuardVeto::kReordered, Reordered},
      {GuardVeto::kSwappedWord, SwappedWord},
  };
  uint32_t broken = 0;
  for (const auto& [veto, breaks] : kRules) {
    if (!breaks(a, b)) continue;
    broken |= uint32_t{1} << static_cast<int>(veto);
    if (first_only) break;
  }
  return broken;
}

}  // namespace

GuardVeto SemanticGuardVeto(std::string_view a, std::string_view b) {
  const uint32_t broken = Check(a, b, /*first_only=*/true);
  return broken == 0 ? GuardVeto::kNone : static_cast<GuardVeto>(std::countr_zero(broken));
}

uint32_t SemanticGuardVetoes(std::string_view a, std::string_view b) {
  return Check(a, b, /*first_only=*/false);
}

std::string_view GuardVetoName(GuardVeto veto) {
  switch (veto) {
    case GuardVeto::kNone:
      return "none";
    case GuardVeto::kNumbers:
      return "numbers";
    case GuardVeto::kSymbols:
      return "symbols";
    case GuardVeto::kNames:
      return "names";
    case GuardVeto::kQuotes:
      return "quotes";
    case GuardVeto::kPolarity:
      return "polarity";
    case GuardVeto::kOrder:
      return "order";
    case GuardVeto::kReordered:
      return "reordered";
    case GuardVeto::kSwappedWord:
      return "swapped_word";
  }
  return "unknown";
}

size_t LongestCommonSubsequence(const std::vector<std::string_view>& a,
                                const std::vector<std::string_view>& b) {
  const size_t m = b.size();
  if (a.empty() || m == 0) return 0;
  const size_t words = (m + 63) / 64;
  // One bit mask over b's positions per distinct token of b that a holds too (the others
  // never match).
  const std::unordered_set<std::string_view> in_a(a.begin(), a.end());
  std::unordered_map<std::string_view, size_t> ids;
  std::vector<uint64_t> masks;
  for (size_t j = 0; j < m; ++j) {
    if (!in_a.contains(b[j])) continue;
    auto [it, added] = ids.try_emplace(b[j], ids.size());
    if (added) masks.resize(masks.size() + words, 0);
    masks[it->second * words + j / 64] |= uint64_t{1} << (j % 64);
  }
  // V's zero bits (of the low m) count the LCS of b and the prefix of a read so far:
  // V' = (V + (V & M)) | (V & ~M), a multi-word addition.
  std::vector<uint64_t> v(words, ~uint64_t{0});
  for (std::string_view token : a) {
    const auto it = ids.find(token);
    if (it == ids.end()) continue;  // M = 0 leaves V as it is
    const uint64_t* mask = &masks[it->second * words];
    uint64_t carry = 0;
    for (size_t w = 0; w < words; ++w) {
      const uint64_t u = v[w] & mask[w];
      const uint64_t sum = v[w] + u;
      const uint64_t total = sum + carry;
      carry = static_cast<uint64_t>(sum < v[w]) | static_cast<uint64_t>(total < sum);
      v[w] = total | (v[w] & ~mask[w]);
    }
  }
  size_t ones = 0;
  for (size_t w = 0; w < words; ++w) {
    uint64_t bits = v[w];
    if (w + 1 == words && m % 64 != 0) bits &= (uint64_t{1} << (m % 64)) - 1;
    ones += static_cast<size_t>(std::popcount(bits));
  }
  return m - ones;
}

}  // namespace strata::embedding
