// JsonString: a string as a JSON string literal (quotes, backslashes and control characters
// escaped), for the CPU benchmarks' one-line JSON results.
#pragma once

#include <cstdio>
#include <string>

namespace strata::bench {

inline std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace strata::bench
