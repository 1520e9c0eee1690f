#include "strata/tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace strata::tokenizer {
namespace {

bool IsContinuation(uint8_t byte) { return (byte & 0xC0) == 0x80; }

struct ByteAlphabet {
  std::array<char32_t, 256> to_unicode{};
  // Indexed by code point; the alphabet lies within U+0000..U+0143.
  std::array<int16_t, 0x144> to_byte{};
};

constexpr bool IsPrintableByte(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr ByteAlphabet MakeByteAlphabet() {
  ByteAlphabet alphabet;
  alphabet.to_byte.fill(-1);
  char32_t next_unprintable = 0x100;
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = IsPrintableByte(b) ? static_cast<char32_t>(b) : next_unprintable++;
    alphabet.to_unicode[b] = cp;
    alphabet.to_byte[cp] = static_cast<int16_t>(b);
  }
  return alphabet;
}

constexpr ByteAlphabet kByteAlphabet = MakeByteAlphabet();

}  // namespace

UnicodeClass GetUnicodeClass(char32_t cp) {
  if (cp < 0x100) return static_cast<UnicodeClass>(internal::kLatin1Classes[cp]);
  if (cp > kMaxCodepoint) return UnicodeClass::kUnassigned;
  // The last range starting at or before cp holds it.
  const uint32_t* begin = internal::kUnicodeClassRanges;
  const uint32_t* end = begin + internal::kNumUnicodeClassRanges;
  const uint32_t key = (static_cast<uint32_t>(cp) << 8) | 0xFF;
  const uint32_t* it = std::upper_bound(begin, end, key);
  return static_cast<UnicodeClass>(*(it - 1) & 0xFF);
}

bool IsUnicodeWhitespace(char32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20;
  switch (cp) {
    case 0x0085:
    case 0x00A0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::string_view UnicodeTablesVersion() { return internal::kUnicodeVersion; }

char32_t DecodeUtf8(std::string_view text, size_t* pos) {
  const size_t i = *pos;
  const size_t left = text.size() - i;
  const auto at = [&](size_t k) { return static_cast<uint8_t>(text[i + k]); };
  const uint8_t lead = at(0);
  if (lead < 0x80) {
    *pos = i + 1;
    return lead;
  }
  // Like llama.cpp: the lead byte alone decides the length; only the continuation bytes'
  // top bits are checked, so overlong forms and surrogates decode.
  if (lead >= 0xC0 && lead < 0xE0) {
    if (left >= 2 && IsContinuation(at(1))) {
      *pos = i + 2;
      return (static_cast<char32_t>(lead & 0x1F) << 6) | (at(1) & 0x3F);
    }
  } else if (lead >= 0xE0 && lead < 0xF0) {
    if (left >= 3 && IsContinuation(at(1)) && IsContinuation(at(2))) {
      *pos = i + 3;
      return (static_cast<char32_t>(lead & 0x0F) << 12) |
             (static_cast<char32_t>(at(1) & 0x3F) << 6) | (at(2) & 0x3F);
    }
  } else if (lead >= 0xF0 && lead < 0xF8) {
    if (left >= 4 && IsContinuation(at(1)) && IsContinuation(at(2)) && IsContinuation(at(3))) {
      const char32_t cp = (static_cast<char32_t>(lead & 0x07) << 18) |
                          (static_cast<char32_t>(at(1) & 0x3F) << 12) |
                          (static_cast<char32_t>(at(2) & 0x3F) << 6) | (at(3) & 0x3F);
      // llama.cpp throws on these when re-encoding; we call the lead byte invalid instead.
      if (cp <= kMaxCodepoint) {
        *pos = i + 4;
        return cp;
      }
    }
  }
  *pos = i + 1;
  return kReplacementCharacter;
}

std::vector<char32_t> DecodeUtf8(std::string_view text) {
  std::vector<char32_t> cps;
  cps.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) cps.push_back(DecodeUtf8(text, &pos));
  return cps;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp <= kMaxCodepoint) {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    AppendUtf8(kReplacementCharacter, out);
  }
}

std::string EncodeUtf8(std::span<const char32_t> cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) AppendUtf8(cp, &out);
  return out;
}

char32_t ByteToUnicode(uint8_t byte) { return kByteAlphabet.to_unicode[byte]; }

std::optional<uint8_t> UnicodeToByte(char32_t cp) {
  if (cp >= kByteAlphabet.to_byte.size() || kByteAlphabet.to_byte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(kByteAlphabet.to_byte[cp]);
}

}  // namespace strata::tokenizer
