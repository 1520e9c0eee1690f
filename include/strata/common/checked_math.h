// Overflow-safe arithmetic for sizes and offsets read from untrusted files or requests.
// Each returns false (and leaves *out unspecified) when the exact result does not fit.
#pragma once

#include <cstdint>

namespace strata {

inline bool CheckedAdd(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

inline bool CheckedMul(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

// Rounds `value` up to a multiple of `alignment` (> 0).
inline bool CheckedAlignUp(uint64_t value, uint64_t alignment, uint64_t* out) {
  uint64_t rem = value % alignment;
  if (rem == 0) {
    *out = value;
    return true;
  }
  return CheckedAdd(value, alignment - rem, out);
}

}  // namespace strata
