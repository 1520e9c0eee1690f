#include "strata/kv/block_hash.h"

#include <bit>
#include <cstddef>

namespace strata::kv {
namespace {

// The XXH64 primes.
constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ULL;

uint64_t Round(uint64_t acc, uint64_t lane) {
  acc += lane * kPrime2;
  acc = std::rotl(acc, 31);
  return acc * kPrime1;
}

// Folds one 64-bit lane into the hash state (XXH64's tail step for 8-byte words).
uint64_t Fold(uint64_t h, uint64_t lane) {
  h ^= Round(0, lane);
  return std::rotl(h, 27) * kPrime1 + kPrime4;
}

// XXH64's final avalanche: every input bit affects every output bit.
uint64_t Avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  h ^= h >> 32;
  return h;
}

}  // namespace

BlockHash HashBlockTokens(BlockHash parent, uint64_t salt, std::span<const int32_t> tokens) {
  uint64_t h = kPrime5 + static_cast<uint64_t>(tokens.size()) * 4;
  h = Fold(h, parent);
  h = Fold(h, salt);
  // Two token ids per 64-bit lane; an odd last id fills the low half of a final lane.
  std::size_t i = 0;
  for (; i + 1 < tokens.size(); i += 2) {
    const uint64_t lane = static_cast<uint64_t>(static_cast<uint32_t>(tokens[i])) |
                          static_cast<uint64_t>(static_cast<uint32_t>(tokens[i + 1])) << 32;
    h = Fold(h, lane);
  }
  if (i < tokens.size()) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(tokens[i])) * kPrime1;
    h = std::rotl(h, 23) * kPrime2 + kPrime3;
  }
  return Avalanche(h);
}

}  // namespace strata::kv
