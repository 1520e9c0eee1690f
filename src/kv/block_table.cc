#include "strata/kv/block_table.h"

#include <algorithm>

#include "strata/common/check.h"

namespace strata::kv {

BlockTable::BlockTable(int32_t block_size) : block_size_(block_size) {
  STRATA_CHECK(block_size > 0);
}

int32_t BlockTable::BlocksNeeded(int64_t total_tokens) const {
  STRATA_CHECK(total_tokens >= 0);
  const int64_t blocks_total = total_tokens / block_size_ + (total_tokens % block_size_ != 0);
  const int64_t extra = blocks_total - static_cast<int64_t>(blocks_.size());
  if (extra <= 0) return 0;
  // A sequence longer than 2^31 blocks cannot be allocated by an int32 pool anyway.
  return static_cast<int32_t>(std::min<int64_t>(extra, INT32_MAX));
}

void BlockTable::Append(std::span<const BlockId> ids) {
  blocks_.insert(blocks_.end(), ids.begin(), ids.end());
}

void BlockTable::ReleaseAll(BlockPool* pool) { TruncateTo(0, pool); }

void BlockTable::TruncateTo(int32_t num_blocks, BlockPool* pool) {
  STRATA_CHECK(pool != nullptr);
  STRATA_CHECK(num_blocks >= 0 && num_blocks <= this->num_blocks());
  while (static_cast<int32_t>(blocks_.size()) > num_blocks) {
    pool->Release(blocks_.back());
    blocks_.pop_back();
  }
}

}  // namespace strata::kv
