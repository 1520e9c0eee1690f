#include "strata/common/utf8.h"

#include <cstdint>

namespace strata {

bool IsValidUtf8(std::string_view text, size_t* error_offset) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      if (error_offset != nullptr) *error_offset = i;
      return false;  // a continuation byte, an overlong lead (C0, C1) or F5..FF
    }
    bool ok = i + len <= n && s[i + 1] >= lo && s[i + 1] <= hi;
    for (size_t k = 2; ok && k < len; ++k) ok = s[i + k] >= 0x80 && s[i + k] <= 0xBF;
    if (!ok) {
      if (error_offset != nullptr) *error_offset = i;
      return false;
    }
    i += len;
  }
  return true;
}

std::string ToValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t bad = 0;
  while (!IsValidUtf8(text, &bad)) {
    out.append(text.substr(0, bad));
    out.append("\xEF\xBF\xBD");  // U+FFFD
    text.remove_prefix(bad + 1);
  }
  out.append(text);
  return out;
}

}  // namespace strata
