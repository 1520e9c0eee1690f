#include "strata/sampling/token_mask.h"

#include <algorithm>
#include <limits>

namespace strata::sampling {

bool AnyTokenAllowed(std::span<const uint32_t> allowed) {
  return std::any_of(allowed.begin(), allowed.end(), [](uint32_t w) { return w != 0; });
}

void ApplyTokenMask(std::span<const uint32_t> allowed, std::span<float> logits) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (size_t w = 0; w * 32 < logits.size(); ++w) {
    const uint32_t bits = w < allowed.size() ? allowed[w] : 0u;
    if (bits == ~uint32_t{0}) continue;
    const size_t end = std::min(logits.size(), (w + 1) * 32);
    for (size_t i = w * 32; i < end; ++i) {
      if ((bits >> (i - w * 32) & 1u) == 0) logits[i] = kNegInf;
    }
  }
}

}  // namespace strata::sampling
