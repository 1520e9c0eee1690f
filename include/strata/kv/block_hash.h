// Block hash: the key of one full KV block in the prefix cache, chained over the blocks before it
//   hash(block i) = HashBlockTokens(hash(block i-1), salt, the block's token ids),
//   hash(block -1) = kRootBlockHash,
// so equal hashes mean (up to a 2^-64 collision) equal token prefixes under the same salt.
//
// The mix is xxHash64-style (Y. Collet, xxHash spec: 64-bit lanes, multiply-rotate rounds, the
// XXH64 avalanche), written here so the kv module needs nothing beyond common. It is not
// cryptographic and not stable across versions of Strata: hashes never leave the process.
// Collisions are handled by KvCacheManager (it compares stored token ids), not here.
//
// Thread rules: pure function, any thread.
#pragma once

#include <cstdint>
#include <span>

namespace strata::kv {

using BlockHash = uint64_t;

// The parent hash of a sequence's first block.
inline constexpr BlockHash kRootBlockHash = 0x6a09e667f3bcc908ULL;

// Hash of one block's token ids chained on its parent block's hash. `salt` is the identity of
// what produced the KV (model, adapter, KV dtype). Any number of tokens (a full block in practice).
BlockHash HashBlockTokens(BlockHash parent, uint64_t salt, std::span<const int32_t> tokens);

}  // namespace strata::kv
