#include "strata/tokenizer/unicode_normalization.h"

#include <algorithm>

#include "strata/tokenizer/unicode.h"

namespace strata::tokenizer {
namespace {

// Hangul syllable decomposition constants (Unicode Standard §3.12).
constexpr char32_t kHangulBase = 0xAC00;
constexpr char32_t kLeadBase = 0x1100;
constexpr char32_t kVowelBase = 0x1161;
constexpr char32_t kTrailBase = 0x11A7;
constexpr char32_t kVowelCount = 21;
constexpr char32_t kTrailCount = 28;
constexpr char32_t kHangulCount = 19 * kVowelCount * kTrailCount;  // 11172 syllables

// The value of the range holding `cp` in a table of (first cp << 8 | value) range starts.
uint8_t RangeValue(const uint32_t* table, size_t size, char32_t cp) {
  if (cp > kMaxCodepoint) return 0;
  const uint32_t key = (static_cast<uint32_t>(cp) << 8) | 0xFF;
  const uint32_t* it = std::upper_bound(table, table + size, key);
  return it == table ? 0 : static_cast<uint8_t>(*(it - 1) & 0xFF);
}

// The index of `cp` among the first words of a table of `stride`-word records sorted by their
// first word, or -1.
ptrdiff_t FindRecord(const uint32_t* table, size_t size, size_t stride, char32_t cp) {
  size_t lo = 0;
  size_t hi = size / stride;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    const uint32_t key = table[mid * stride];
    if (key == cp) return static_cast<ptrdiff_t>(mid);
    if (key < cp) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return -1;
}

// Appends the full canonical decomposition of `cp` (recursing through one-step mappings; the
// data's nesting is at most four deep).
void AppendDecomposition(char32_t cp, std::u32string* out) {
  if (cp >= kHangulBase && cp < kHangulBase + kHangulCount) {
    const char32_t index = cp - kHangulBase;
    out->push_back(kLeadBase + index / (kVowelCount * kTrailCount));
    out->push_back(kVowelBase + (index % (kVowelCount * kTrailCount)) / kTrailCount);
    if (index % kTrailCount != 0) out->push_back(kTrailBase + index % kTrailCount);
    return;
  }
  const ptrdiff_t i =
      FindRecord(internal::kCanonicalDecompositions, internal::kCanonicalDecompositionsSize, 3, cp);
  if (i < 0) {
    out->push_back(cp);
    return;
  }
  const uint32_t* record = internal::kCanonicalDecompositions + 3 * i;
  AppendDecomposition(record[1], out);
  if (record[2] != 0) AppendDecomposition(record[2], out);
}

}  // namespace

uint8_t CanonicalCombiningClass(char32_t cp) {
  return RangeValue(internal::kCombiningClassRanges, internal::kCombiningClassRangesSize, cp);
}

bool IsNonspacingMark(char32_t cp) {
  return RangeValue(internal::kNonspacingMarkRanges, internal::kNonspacingMarkRangesSize, cp) != 0;
}

std::u32string ToNfd(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t cp : text) AppendDecomposition(cp, &out);
  // Canonical ordering: each maximal run of non-starters is sorted stably by combining class.
  size_t i = 0;
  while (i < out.size()) {
    if (CanonicalCombiningClass(out[i]) == 0) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < out.size() && CanonicalCombiningClass(out[end]) != 0) ++end;
    if (end - i > 1) {
      std::stable_sort(out.begin() + i, out.begin() + end, [](char32_t a, char32_t b) {
        return CanonicalCombiningClass(a) < CanonicalCombiningClass(b);
      });
    }
    i = end;
  }
  return out;
}

void AppendLowercase(char32_t cp, std::u32string* out) {
  if (cp < 0x80) {
    out->push_back(cp >= 'A' && cp <= 'Z' ? cp + ('a' - 'A') : cp);
    return;
  }
  if (cp == 0x0130) {  // LATIN CAPITAL LETTER I WITH DOT ABOVE: SpecialCasing.txt
    out->push_back(U'i');
    out->push_back(0x0307);
    return;
  }
  const ptrdiff_t i = FindRecord(internal::kLowercasePairs, internal::kLowercasePairsSize, 2, cp);
  out->push_back(i < 0 ? cp : internal::kLowercasePairs[2 * i + 1]);
}

std::string_view LowercaseTablesVersion() { return internal::kLowercaseUnicodeVersion; }

}  // namespace strata::tokenizer
