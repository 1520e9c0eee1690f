// KvCacheManager: the KV blocks of every sequence in one cache, with prefix caching.
//
// What the scheduler sees (vLLM v1's KV cache manager, in our words): a sequence asks for room
// for its tokens and gets it or a plain `false` ("does not fit" is a normal outcome that makes
// the scheduler preempt, never an error); a new sequence first learns how many of its prompt
// tokens are already in the cache. The data structure behind it stays here.
//
// Prefix caching: every *full* block of a sequence is keyed by a hash chain,
//   hash(block i) = H(hash(block i-1), salt, the block's block_size token ids),
// with hash(block -1) = a fixed seed, and `salt` the model/adapter identity (two models never
// share blocks). When a block becomes full and computed, CommitComputed registers it in a
// hash -> block map. A new sequence reuses the longest chain of cached blocks that matches its
// token prefix (taking a reference on each: AddRef when in use by another sequence, Reclaim
// when free). When a sequence is freed its blocks go back to the pool's FIFO free list but keep
// their hashes, so they stay reusable until the pool hands them out again for new contents: the
// unreferenced cached blocks are evicted least-recently-used first (BlockPool's FIFO order;
// BlockTable::ReleaseAll frees tail blocks first). A block's hash entry is dropped exactly when
// the pool reallocates it.
//
// Hash collisions: the map stores each cached block's token ids beside its hash and a hit
// compares them, so a collision is a miss, never wrong KV. A hit also checks that the block was
// registered right after the block the lookup just matched (still holding the same contents), so
// equal blocks after different prefixes whose chain hashes collide do not mix either. When two
// sequences compute the same block (both missed), the first registered stays the cached one.
//
// Sliding-window layers: every layer keeps the KV of every position in the same blocks (the
// window only masks attention), so a cached block is valid for all layers.
//
// Thread rules: engine thread only; not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "strata/kv/block_hash.h"
#include "strata/kv/block_pool.h"
#include "strata/kv/block_table.h"

namespace strata::kv {

using SequenceId = int64_t;
// BlockHash, HashBlockTokens: strata/kv/block_hash.h.

struct KvCacheManagerOptions {
  int32_t num_blocks = 0;   // blocks in the cache (the backend's KvGeometry::num_blocks)
  int32_t block_size = 16;  // tokens per block (KvGeometry::block_size)
  bool enable_prefix_caching = true;
  // Identity of what produced the KV (model file, adapter, KV dtype): part of every hash.
  uint64_t salt = 0;
  // Tests only: replaces HashBlockTokens (e.g. by a constant, to force collisions). nullptr in
  // production.
  BlockHash (*hash_for_testing)(BlockHash parent, uint64_t salt,
                                std::span<const int32_t> tokens) = nullptr;
};

struct KvCacheStats {
  int32_t num_blocks = 0;
  int32_t used_blocks = 0;        // referenced by at least one sequence
  int32_t free_blocks = 0;        // not referenced (cached ones included): what Allocate can use
  int32_t cached_blocks = 0;      // free or not, blocks whose hash is registered
  int64_t prefix_queries = 0;     // prompt blocks looked up (full blocks only): per
                                  // StartSequence floor((tokens - 1) / block_size)
  int64_t prefix_hits = 0;        // of which found in the cache
  int64_t prefix_hit_tokens = 0;  // tokens whose KV was reused
};

class KvCacheManager {
 public:
  explicit KvCacheManager(const KvCacheManagerOptions& options);

  KvCacheManager(const KvCacheManager&) = delete;
  KvCacheManager& operator=(const KvCacheManager&) = delete;

  int32_t block_size() const;
  int32_t num_blocks() const;
  // Blocks Allocate can hand out now (free ones, cached or not).
  int32_t num_free_blocks() const;

  // Starts sequence `id` (which must not be live) and returns how many of its leading `tokens`
  // already have KV in the cache: a multiple of block_size, and always < tokens.size() (the
  // last token is computed so the forward yields its logits; a fully cached prompt recomputes
  // its last block). The matched blocks are now the sequence's first blocks. With prefix
  // caching off, or for an empty `tokens`, returns 0. Taking the hit blocks needs no free
  // block beyond those themselves (a cached free block is reclaimed, not allocated).
  int64_t StartSequence(SequenceId id, std::span<const int32_t> tokens);

  // What StartSequence(id, tokens) would find now, without taking anything or counting a
  // lookup: the hit in tokens, and how many of the hit blocks are free (taking them lowers
  // num_free_blocks()). Lets the scheduler decide on admission before it starts a sequence.
  struct PrefixProbe {
    int64_t hit_tokens = 0;
    int32_t free_hit_blocks = 0;
  };
  PrefixProbe ProbePrefix(std::span<const int32_t> tokens) const;

  // Makes sequence `id` (live) able to hold `total_tokens` tokens, allocating blocks as needed.
  // All or nothing: false (nothing taken) when the free blocks are too few.
  [[nodiscard]] bool Reserve(SequenceId id, int64_t total_tokens);

  // Blocks Reserve(id, total_tokens) would need to allocate now.
  int32_t BlocksNeeded(SequenceId id, int64_t total_tokens) const;

  // Tells the cache that the first `num_computed` of `tokens` (the sequence's tokens so far,
  // prompt then output) have their KV written, so every block they fill can be cached. Call
  // after each forward; cheap when no new block became full. No-op with prefix caching off.
  void CommitComputed(SequenceId id, std::span<const int32_t> tokens, int64_t num_computed);

  // Rolls sequence `id` back to its first `num_tokens` positions (0 <= num_tokens <= the tokens
  // it has room for), as speculative decoding does with rejected tokens: the blocks wholly past
  // them return to the pool (cached ones stay reusable: their KV still matches the tokens they
  // were registered with), and the block the cut passes through keeps its leading positions
  // and will be rewritten after them, so it is dropped from the prefix cache and the
  // sequence's hash chain goes back to the last full block before the cut. A block the cut
  // passes through that another sequence also holds (a shared prefix block) cannot be
  // rewritten: returns false and changes nothing. Positions below the cut keep their KV.
  [[nodiscard]] bool Truncate(SequenceId id, int64_t num_tokens);

  // Ends sequence `id` (preempted, finished or cancelled): releases its blocks (cached ones stay
  // reusable until evicted). Unknown ids are a programmer error.
  void FreeSequence(SequenceId id);

  bool IsLive(SequenceId id) const;
  // The sequence's blocks in position order (valid until the next call that changes it).
  std::span<const BlockId> Blocks(SequenceId id) const;

  KvCacheStats Stats() const;

 private:
  struct SequenceState {
    explicit SequenceState(int32_t block_size) : table(block_size) {}

    BlockTable table;
    // Leading full blocks whose hash chain has been computed (hits included); CommitComputed
    // continues from there.
    int32_t num_hashed_blocks = 0;
    BlockHash last_hash = kRootBlockHash;  // hash of block num_hashed_blocks - 1
    // The registered block that holds this sequence's block num_hashed_blocks - 1 (its own, a
    // hit, or an identical block registered first by another sequence), and that block's
    // generation: the parent of the next block registered. -1 before the first block.
    BlockId parent = -1;
    uint64_t parent_generation = 0;
    // False once a block could not be registered (a hash collision, or a parent evicted): the
    // blocks after it are not cached.
    bool caching = true;
    // Per hashed block (num_hashed_blocks of them): its chain hash, the registered block that
    // stands for it and that block's generation then; Truncate rolls the chain back with it.
    struct Link {
      BlockHash hash;
      BlockId node;
      uint64_t generation;
    };
    std::vector<Link> chain;
  };

  // Prefix-cache state of one block (indexed by BlockId).
  struct CachedBlock {
    bool registered = false;  // `hash` -> this block is in cached_
    BlockHash hash = 0;
    // The block before it in the chain it was registered for (-1 for a first block) and that
    // block's generation then. A hit also checks these, so two chains whose hashes collide never
    // mix, and an entry whose parent was reallocated is never hit.
    BlockId parent = -1;
    uint64_t parent_generation = 0;
    uint64_t generation = 0;  // +1 each time the pool hands the block out
  };

  SequenceState& Live(SequenceId id);
  const SequenceState& Live(SequenceId id) const;
  BlockHash Hash(BlockHash parent, std::span<const int32_t> tokens) const;
  // The cached blocks holding the longest block-aligned prefix of `tokens` that leaves the
  // last token out, in order (appended to *hits); returns the chain hash of the last of them
  // (kRootBlockHash when none).
  BlockHash FindPrefix(std::span<const int32_t> tokens, std::vector<BlockId>* hits,
                       std::vector<BlockHash>* hashes = nullptr) const;
  // True when the registered block `id` holds `tokens` and was registered after `parent` (-1:
  // none) in its current generation: then its KV is that of `parent`'s prefix plus `tokens`.
  bool Matches(BlockId id, BlockId parent, std::span<const int32_t> tokens) const;
  // True when `id`'s registered parent has been reallocated since (the entry cannot be hit).
  bool IsStale(BlockId id) const;
  void Register(BlockId id, BlockHash hash, BlockId parent, uint64_t parent_generation,
                std::span<const int32_t> tokens);
  void Unregister(BlockId id);
  void RegisterFullBlocks(SequenceState* seq, std::span<const int32_t> tokens, int64_t num_full);

  KvCacheManagerOptions options_;
  BlockPool pool_;
  std::unordered_map<SequenceId, SequenceState> sequences_;
  std::unordered_map<BlockHash, BlockId> cached_;  // hash -> the block registered for it
  std::vector<CachedBlock> block_info_;            // [num_blocks]
  std::vector<int32_t> block_tokens_;  // [num_blocks, block_size]: token ids of registered blocks
  std::vector<BlockId> new_blocks_;    // Reserve's scratch (kept to avoid allocating per call)
  int64_t prefix_queries_ = 0;
  int64_t prefix_hits_ = 0;
  int64_t prefix_hit_tokens_ = 0;
};

}  // namespace strata::kv
