// Strict UTF-8 validation for text that arrives from the network (RFC 3629): no overlong
// forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF, no truncated sequences.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace strata {

// True when `text` is valid UTF-8. When false and `error_offset` is not null, it receives the
// byte offset of the first invalid sequence.
bool IsValidUtf8(std::string_view text, size_t* error_offset = nullptr);

// `text` with each invalid byte replaced by U+FFFD: for messages that quote untrusted input and
// must themselves be valid UTF-8 (gRPC status details, JSON bodies).
std::string ToValidUtf8(std::string_view text);

}  // namespace strata
