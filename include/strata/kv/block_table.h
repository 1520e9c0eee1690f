// BlockTable: the KV blocks holding one sequence's tokens, in position order. Token position p
// lives in blocks()[p / block_size] at slot p % block_size.
//
// Ownership: owned by the sequence; the table holds one pool reference on each of its blocks
// until ReleaseAll. Thread rules: engine thread only (the backend reads blocks() during a forward
// that the engine thread waits for).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "strata/kv/block_pool.h"

namespace strata::kv {

class BlockTable {
 public:
  // block_size: tokens per block (> 0), the same as the pool's storage.
  explicit BlockTable(int32_t block_size);

  int32_t block_size() const { return block_size_; }
  std::span<const BlockId> blocks() const { return blocks_; }
  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }

  // Tokens the blocks can hold: num_blocks() * block_size().
  int64_t capacity() const { return static_cast<int64_t>(blocks_.size()) * block_size_; }

  // Extra blocks needed so that the table holds `total_tokens` (>= 0) tokens; 0 when it already
  // does.
  int32_t BlocksNeeded(int64_t total_tokens) const;

  // Appends blocks (whose references the table now owns) after the existing ones.
  void Append(std::span<const BlockId> ids);

  // Releases the table's reference on every block and leaves the table empty. Blocks are released
  // last-position first, so in the pool's FIFO free list a sequence's tail blocks are evicted
  // before its prefix blocks (the ones a later request is most likely to share).
  void ReleaseAll(BlockPool* pool);

  // Keeps the first `num_blocks` (<= num_blocks()) blocks and releases the others, last-position
  // first (as ReleaseAll).
  void TruncateTo(int32_t num_blocks, BlockPool* pool);

 private:
  int32_t block_size_;
  std::vector<BlockId> blocks_;
};

}  // namespace strata::kv
