// BlockPool: the fixed-size KV blocks of one cache, with reference counts and a free list.
//
// A block is an index into the KV storage (backend::cpu::KvStorage or its CUDA twin); the pool
// only does the bookkeeping. A block is free when its reference count is 0.
//
// Free-list order is FIFO: Allocate takes the blocks that were released longest ago (at
// construction, ascending ids) and Release appends a block at the back. This is the seam for the
// prefix cache: a released block keeps its KV contents until it is allocated again, so FIFO order
// evicts the least recently used cached block first (LRU, as vLLM v1's free block queue), and
// Reclaim takes one specific free block back out of the middle in O(1) on a cache hit. The free
// list is intrusive (two int32 links per block), so no operation allocates after construction
// except appending to Allocate's output vector.
//
// Thread rules: engine thread only; not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

namespace strata::kv {

using BlockId = int32_t;

class BlockPool {
 public:
  // num_blocks >= 0 (0 gives a pool on which every non-empty Allocate fails).
  explicit BlockPool(int32_t num_blocks);

  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  int32_t num_blocks() const { return num_blocks_; }
  int32_t num_free() const { return num_free_; }

  // Takes `n` (>= 0) free blocks, each with ref count 1, from the front of the free list and
  // appends them to *out in that order. When fewer than n are free it takes none, leaves *out
  // untouched and returns false: "does not fit" is a normal outcome (the scheduler preempts),
  // not an error.
  bool Allocate(int32_t n, std::vector<BlockId>* out);

  // Adds a reference to a block that is in use (ref count >= 1), e.g. a prefix shared by two
  // sequences. To take a free block back use Reclaim.
  void AddRef(BlockId id);

  // Drops one reference; at zero the block goes to the back of the free list.
  void Release(BlockId id);

  // Takes the free block `id` (ref count 0) out of the free list wherever it sits and gives it
  // ref count 1: a prefix-cache hit on a block that no sequence references any more.
  void Reclaim(BlockId id);

  // References held on `id`; 0 when the block is free.
  int32_t ref_count(BlockId id) const;

  // The free blocks from front (next to be allocated) to back. O(num_free); for tests and
  // debugging.
  std::vector<BlockId> FreeListForTesting() const;

 private:
  void PushBack(BlockId id);
  void Unlink(BlockId id);

  int32_t num_blocks_;
  int32_t num_free_ = 0;
  std::vector<int32_t> ref_counts_;  // [num_blocks]
  // Doubly linked free list over block ids; index num_blocks_ is the sentinel (its next_ is the
  // front, its prev_ the back). Links of blocks in use are meaningless.
  std::vector<BlockId> prev_;  // [num_blocks + 1]
  std::vector<BlockId> next_;  // [num_blocks + 1]
};

}  // namespace strata::kv
