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

void BlockTable::ReleaseAll(BlockPool* pool) {
  STRATA_CHECK(pool != nullptr);
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) pool->Release(*it);
  blocks_.clear();
}

}  // namespace strata::kv
