#include "strata/tokenizer/pre_tokenizer.h"

#include <array>
#include <cstdint>

#include "strata/tokenizer/unicode.h"

namespace strata::tokenizer {
namespace {

// What the splits need to know about one code point. A position past the end of the current
// chunk reads as 0 (not even kPresent), which is how llama.cpp's fast paths see it too.
enum CharBits : uint8_t {
  kPresent = 1 << 0,
  kLetter = 1 << 1,      // \p{L}
  kNumber = 1 << 2,      // \p{N}
  kSpace = 1 << 3,       // \s
  kPunctClass = 1 << 4,  // [\p{P}\$\+<=>\^~\|], the default pre-tokenizer's first split
  kAsciiDigit = 1 << 5,  // [0-9]
};

uint8_t BitsOf(char32_t cp) {
  uint8_t bits = kPresent;
  const UnicodeClass cls = GetUnicodeClass(cp);
  if (cls == UnicodeClass::kLetter) bits |= kLetter;
  if (cls == UnicodeClass::kNumber) bits |= kNumber;
  if (IsUnicodeWhitespace(cp)) bits |= kSpace;
  if (cls == UnicodeClass::kPunctuation) bits |= kPunctClass;
  switch (cp) {
    case '$':
    case '+':
    case '<':
    case '=':
    case '>':
    case '^':
    case '~':
    case '|':
      bits |= kPunctClass;
      break;
    default:
      break;
  }
  if (cp >= '0' && cp <= '9') bits |= kAsciiDigit;
  return bits;
}

// Walks one chunk [begin, end) of the text and records word lengths. Positions only grow, so
// they never fall before `begin`.
class ChunkSplitter {
 public:
  static constexpr char32_t kNone = 0xFFFFFFFF;

  ChunkSplitter(std::span<const char32_t> cps, std::span<const uint8_t> bits, size_t begin,
                size_t end, std::vector<size_t>* words)
      : cps_(cps), bits_(bits), end_(end), word_start_(begin), words_(words) {}

  char32_t Cp(size_t pos) const { return pos < end_ ? cps_[pos] : kNone; }
  uint8_t Bits(size_t pos) const { return pos < end_ ? bits_[pos] : 0; }
  size_t end() const { return end_; }

  // Closes the current word at `pos` (an empty word is dropped).
  void EndWordAt(size_t pos) {
    if (pos > word_start_) words_->push_back(pos - word_start_);
    word_start_ = pos;
  }

  // Length of the contraction 's 't 'm 'd 're 've 'll at `pos`, or 0. With `ignore_case`
  // ASCII lowering is enough: llama.cpp lowercases with the full Unicode table, but the only
  // non-ASCII code points that lowercase to ASCII are U+0130 ('i') and U+212A ('k'), and neither
  // letter occurs in a contraction.
  size_t ContractionLength(size_t pos, bool ignore_case) const {
    if (Cp(pos) != '\'' || pos + 1 >= end_) return 0;
    const auto lower = [ignore_case](char32_t c) {
      return ignore_case && c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
    };
    const char32_t c1 = lower(Cp(pos + 1));
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (pos + 2 >= end_) return 0;
    const char32_t c2 = lower(Cp(pos + 2));
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
  }

  // Whitespace handling shared by all fast paths once nothing else matched at `pos`:
  // \s*[\r\n]+ (when `newline_runs`), then \s+(?!\S), then \s+; a lone other code point
  // becomes a word of its own. Returns the new position.
  size_t SplitWhitespace(size_t pos, bool newline_runs) {
    size_t num_spaces = 0;
    size_t after_last_newline = 0;
    while (Bits(pos + num_spaces) & kSpace) {
      const char32_t c = Cp(pos + num_spaces);
      if (c == '\r' || c == '\n') after_last_newline = pos + num_spaces + 1;
      ++num_spaces;
    }
    if (newline_runs && after_last_newline > 0) {
      pos = after_last_newline;
    } else if (num_spaces > 1 && pos + num_spaces < end_) {
      // Leave the last space to start the next word (" word").
      pos += num_spaces - 1;
    } else if (num_spaces > 0) {
      pos += num_spaces;
    } else {
      ++pos;
    }
    EndWordAt(pos);
    return pos;
  }

 private:
  std::span<const char32_t> cps_;
  std::span<const uint8_t> bits_;
  size_t end_;
  size_t word_start_;
  std::vector<size_t>* words_;
};

bool IsLetterOrNumberOrSpace(uint8_t bits) { return (bits & (kLetter | kNumber | kSpace)) != 0; }

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void SplitGpt2Chunk(ChunkSplitter& s, size_t pos) {
  while (pos < s.end()) {
    if (const size_t n = s.ContractionLength(pos, /*ignore_case=*/false); n > 0) {
      pos += n;
      s.EndWordAt(pos);
      continue;
    }
    const char32_t c = s.Cp(pos);
    // An optional leading space belongs to the word that follows it.
    const size_t skip = c == ' ' ? 1 : 0;
    const uint8_t next = s.Bits(pos + skip);
    if (next & (kLetter | kNumber)) {
      const uint8_t kind = next & kLetter ? kLetter : kNumber;
      pos += skip;
      while (s.Bits(pos) & kind) ++pos;
      s.EndWordAt(pos);
      continue;
    }
    if ((next & kPresent) && !IsLetterOrNumberOrSpace(next)) {
      pos += skip;
      while ((s.Bits(pos) & kPresent) && !IsLetterOrNumberOrSpace(s.Bits(pos))) ++pos;
      s.EndWordAt(pos);
      continue;
    }
    pos = s.SplitWhitespace(pos, /*newline_runs=*/false);
  }
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
void SplitLlama3Chunk(ChunkSplitter& s, size_t pos, size_t max_digits) {
  while (pos < s.end()) {
    if (const size_t n = s.ContractionLength(pos, /*ignore_case=*/true); n > 0) {
      pos += n;
      s.EndWordAt(pos);
      continue;
    }
    const char32_t c = s.Cp(pos);
    const uint8_t bits = s.Bits(pos);
    const bool is_newline = c == '\r' || c == '\n';
    // One code point that is not \r, \n or a number may lead a run of letters (" word",
    // "(word", "\tword").
    if (!is_newline && !(bits & kNumber) && ((bits & kLetter) || (s.Bits(pos + 1) & kLetter))) {
      ++pos;
      while (s.Bits(pos) & kLetter) ++pos;
      s.EndWordAt(pos);
      continue;
    }
    if (bits & kNumber) {
      size_t group_start = pos;
      while (s.Bits(pos) & kNumber) {
        ++pos;
        if (pos - group_start >= max_digits) {
          s.EndWordAt(pos);
          group_start = pos;
        }
      }
      s.EndWordAt(pos);
      continue;
    }
    // llama.cpp tests the code point at `pos` for presence here, not the one after the
    // optional space; so a trailing lone space takes this branch (same result as \s+).
    const size_t skip = c == ' ' ? 1 : 0;
    const uint8_t next = s.Bits(pos + skip);
    if (!IsLetterOrNumberOrSpace(next) && (bits & kPresent)) {
      pos += skip;
      while ((s.Bits(pos) & kPresent) && !IsLetterOrNumberOrSpace(s.Bits(pos))) ++pos;
      while (s.Cp(pos) == '\r' || s.Cp(pos) == '\n') ++pos;
      s.EndWordAt(pos);
      continue;
    }
    pos = s.SplitWhitespace(pos, /*newline_runs=*/true);
  }
}

// A regex made of one character class and '+': the chunk splits into maximal runs of code
// points that are in the class and runs of those that are not.
void SplitClassRuns(std::span<const uint8_t> bits, uint8_t cls, size_t begin, size_t end,
                    std::vector<size_t>* words) {
  size_t start = begin;
  for (size_t pos = begin + 1; pos < end; ++pos) {
    if (((bits[pos] ^ bits[pos - 1]) & cls) != 0) {
      words->push_back(pos - start);
      start = pos;
    }
  }
  if (end > start) words->push_back(end - start);
}

// [0-9][0-9][0-9], matched left to right without overlap; text between matches stays whole.
void SplitDigitTriples(std::span<const uint8_t> bits, size_t begin, size_t end,
                       std::vector<size_t>* words) {
  size_t start = begin;
  size_t pos = begin;
  while (pos + 3 <= end) {
    if ((bits[pos] & bits[pos + 1] & bits[pos + 2] & kAsciiDigit) == 0) {
      ++pos;
      continue;
    }
    if (pos > start) words->push_back(pos - start);
    words->push_back(3);
    pos += 3;
    start = pos;
  }
  if (end > start) words->push_back(end - start);
}

enum class Stage { kPunctRuns, kGpt2, kLlama3, kQwen2, kNumberRuns, kDigitTriples };

// Applies one split to every chunk of `chunks` (lengths), like one entry of llama.cpp's
// regex list: words never cross the chunks of the stage before.
std::vector<size_t> ApplyStage(Stage stage, std::span<const char32_t> cps,
                               std::span<const uint8_t> bits, const std::vector<size_t>& chunks) {
  std::vector<size_t> words;
  words.reserve(chunks.size() + cps.size() / 4);
  size_t begin = 0;
  for (const size_t length : chunks) {
    const size_t end = begin + length;
    ChunkSplitter splitter(cps, bits, begin, end, &words);
    switch (stage) {
      case Stage::kPunctRuns:
        SplitClassRuns(bits, kPunctClass, begin, end, &words);
        break;
      case Stage::kNumberRuns:
        SplitClassRuns(bits, kNumber, begin, end, &words);
        break;
      case Stage::kDigitTriples:
        SplitDigitTriples(bits, begin, end, &words);
        break;
      case Stage::kGpt2:
        SplitGpt2Chunk(splitter, begin);
        break;
      case Stage::kLlama3:
        SplitLlama3Chunk(splitter, begin, /*max_digits=*/3);
        break;
      case Stage::kQwen2:
        SplitLlama3Chunk(splitter, begin, /*max_digits=*/1);
        break;
    }
    begin = end;
  }
  return words;
}

struct NamedPreTokenizer {
  std::string_view name;
  PreTokenizerSpec spec;
};

// tokenizer.ggml.pre values llama.cpp (src/llama-vocab.cpp) maps onto these four splits with no
// other tokenizer behaviour attached.
constexpr PreTokenizerSpec kDefault{PreTokenizerKind::kDefault, false};
constexpr PreTokenizerSpec kGpt2{PreTokenizerKind::kGpt2, false};
constexpr PreTokenizerSpec kLlama3{PreTokenizerKind::kLlama3, true};
constexpr PreTokenizerSpec kLlama3KeepMerges{PreTokenizerKind::kLlama3, false};
constexpr PreTokenizerSpec kQwen2{PreTokenizerKind::kQwen2, false};
constexpr std::array kNamedPreTokenizers = {
    NamedPreTokenizer{"default", kDefault},
    NamedPreTokenizer{"gpt-2", kGpt2},
    NamedPreTokenizer{"phi-2", kGpt2},
    NamedPreTokenizer{"mpt", kGpt2},
    NamedPreTokenizer{"olmo", kGpt2},
    NamedPreTokenizer{"jais", kGpt2},
    NamedPreTokenizer{"gigachat", kGpt2},
    NamedPreTokenizer{"exaone4", kGpt2},
    NamedPreTokenizer{"llama3", kLlama3},
    NamedPreTokenizer{"llama-v3", kLlama3},
    NamedPreTokenizer{"llama-bpe", kLlama3},
    NamedPreTokenizer{"falcon3", kLlama3},
    NamedPreTokenizer{"falcon-h1", kLlama3},
    NamedPreTokenizer{"pixtral", kLlama3},
    NamedPreTokenizer{"midm-2.0", kLlama3},
    NamedPreTokenizer{"lfm2", kLlama3},
    NamedPreTokenizer{"dbrx", kLlama3KeepMerges},
    NamedPreTokenizer{"smaug-bpe", kLlama3KeepMerges},
    NamedPreTokenizer{"qwen2", kQwen2},
    NamedPreTokenizer{"deepseek-r1-qwen", kQwen2},
    NamedPreTokenizer{"megrez", kQwen2},
    NamedPreTokenizer{"stablelm2", kQwen2},
};

}  // namespace

std::optional<PreTokenizerSpec> LookupPreTokenizer(std::string_view pre) {
  for (const NamedPreTokenizer& named : kNamedPreTokenizers) {
    if (named.name == pre) return named.spec;
  }
  return std::nullopt;
}

std::string_view PreTokenizerKindName(PreTokenizerKind kind) {
  switch (kind) {
    case PreTokenizerKind::kDefault:
      return "default";
    case PreTokenizerKind::kGpt2:
      return "gpt2";
    case PreTokenizerKind::kLlama3:
      return "llama3";
    case PreTokenizerKind::kQwen2:
      return "qwen2";
  }
  return "unknown";
}

std::vector<size_t> SplitWords(PreTokenizerKind kind, std::span<const char32_t> cps) {
  if (cps.empty()) return {};
  std::vector<uint8_t> bits(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) bits[i] = BitsOf(cps[i]);

  std::vector<size_t> words = {cps.size()};
  switch (kind) {
    case PreTokenizerKind::kDefault:
      for (const Stage stage :
           {Stage::kPunctRuns, Stage::kGpt2, Stage::kNumberRuns, Stage::kDigitTriples}) {
        words = ApplyStage(stage, cps, bits, words);
      }
      break;
    case PreTokenizerKind::kGpt2:
      words = ApplyStage(Stage::kGpt2, cps, bits, words);
      break;
    case PreTokenizerKind::kLlama3:
      words = ApplyStage(Stage::kLlama3, cps, bits, words);
      break;
    case PreTokenizerKind::kQwen2:
      words = ApplyStage(Stage::kQwen2, cps, bits, words);
      break;
  }
  return words;
}

std::vector<std::string> SplitWordsUtf8(PreTokenizerKind kind, std::string_view text) {
  const std::vector<char32_t> cps = DecodeUtf8(text);
  std::vector<std::string> words;
  size_t begin = 0;
  for (const size_t length : SplitWords(kind, cps)) {
    words.push_back(EncodeUtf8(std::span(cps).subspan(begin, length)));
    begin += length;
  }
  return words;
}

}  // namespace strata::tokenizer
