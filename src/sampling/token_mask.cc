#include "strata/sampling/token_mask.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace strata::sampling {

bool AnyTokenAllowed(std::span<const uint32_t> allowed) {
  return std::any_of(allowed.begin(), allowed.end(), [](uint32_t w) { return w != 0; });
}

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// 32 logits at `p` under mask word `bits`, neither all set nor all clear. Branchless: a
// grammar's mask is close to random bit by bit, where a branch per id mispredicts about half
// the time (~4x slower over Gemma's 262,144 ids).
inline void MaskWord(uint32_t bits, float* p) {
#if defined(__SSE2__)
  const __m128i word = _mm_set1_epi32(static_cast<int>(bits));
  const __m128 minus_inf = _mm_set1_ps(kNegInf);
  for (int g = 0; g < 8; ++g) {
    const __m128i lane_bits =
        _mm_setr_epi32(static_cast<int>(1u << (4 * g)), static_cast<int>(1u << (4 * g + 1)),
                       static_cast<int>(1u << (4 * g + 2)), static_cast<int>(1u << (4 * g + 3)));
    const __m128 keep =
        _mm_castsi128_ps(_mm_cmpeq_epi32(_mm_and_si128(word, lane_bits), lane_bits));
    const __m128 x = _mm_loadu_ps(p + 4 * g);
    _mm_storeu_ps(p + 4 * g, _mm_or_ps(_mm_and_ps(keep, x), _mm_andnot_ps(keep, minus_inf)));
  }
#else
  uint32_t u[32];
  std::memcpy(u, p, sizeof(u));
  const uint32_t minus_inf = std::bit_cast<uint32_t>(kNegInf);
  for (int j = 0; j < 32; ++j) {
    const uint32_t keep = 0u - ((bits >> j) & 1u);
    u[j] = (u[j] & keep) | (minus_inf & ~keep);
  }
  std::memcpy(p, u, sizeof(u));
#endif
}

}  // namespace

void ApplyTokenMask(std::span<const uint32_t> allowed, std::span<float> logits) {
  const size_t n = logits.size();
  const size_t whole = std::min(n / 32, allowed.size());  // words with 32 ids in `logits`
  float* p = logits.data();
  for (size_t w = 0; w < whole; ++w, p += 32) {
    const uint32_t bits = allowed[w];
    if (bits == ~uint32_t{0}) continue;
    if (bits == 0) {
      std::fill(p, p + 32, kNegInf);
      continue;
    }
    MaskWord(bits, p);
  }
  // The rest: a last partial word, and ids beyond the mask (not allowed).
  for (size_t i = whole * 32; i < n; ++i) {
    const size_t w = i / 32;
    const uint32_t bits = w < allowed.size() ? allowed[w] : 0u;
    if (((bits >> (i % 32)) & 1u) == 0) logits[i] = kNegInf;
  }
}

}  // namespace strata::sampling
