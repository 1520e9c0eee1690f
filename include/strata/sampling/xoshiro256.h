// Xoshiro256: the xoshiro256** generator (Blackman & Vigna, "Scrambled Linear Pseudorandom
// Number Generators", 2021), seeded through SplitMix64 as its authors recommend.
//
// Why not std::mt19937 + std::uniform_real_distribution: the distribution's algorithm is left
// to each standard library, so the same seed samples different tokens with libstdc++ and
// libc++. Everything here is specified bit for bit, so a seed means the same stream everywhere.
//
// Not thread-safe; one per sequence.
#pragma once

#include <cstdint>

namespace strata::sampling {

class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed) {
    // SplitMix64 (Steele, Lea & Flood 2014) spreads any seed, 0 included, over the state; the
    // state is never all zero because SplitMix64 is a bijection of distinct counters.
    uint64_t x = seed;
    for (uint64_t& word : state_) {
      x += 0x9E3779B97F4A7C15ULL;
      uint64_t z = x;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
      word = z ^ (z >> 31);
    }
  }

  // The next 64 random bits.
  uint64_t Next() {
    const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1): the top 53 bits as a double's mantissa, exact on every platform.
  double NextDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  uint64_t state_[4];
};

}  // namespace strata::sampling
