#include "strata/kv/block_pool.h"

#include <cstddef>

#include "strata/common/check.h"

namespace strata::kv {

BlockPool::BlockPool(int32_t num_blocks) : num_blocks_(num_blocks) {
  STRATA_CHECK(num_blocks >= 0);
  const auto n = static_cast<std::size_t>(num_blocks);
  ref_counts_.assign(n, 0);
  prev_.resize(n + 1);
  next_.resize(n + 1);
  prev_[num_blocks_] = num_blocks_;
  next_[num_blocks_] = num_blocks_;
  for (BlockId id = 0; id < num_blocks_; ++id) PushBack(id);
}

bool BlockPool::Allocate(int32_t n, std::vector<BlockId>* out) {
  STRATA_CHECK(n >= 0);
  STRATA_CHECK(out != nullptr);
  if (n > num_free_) return false;
  out->reserve(out->size() + static_cast<std::size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const BlockId id = next_[num_blocks_];
    Unlink(id);
    ref_counts_[id] = 1;
    out->push_back(id);
  }
  return true;
}

void BlockPool::AddRef(BlockId id) {
  STRATA_CHECK(id >= 0 && id < num_blocks_);
  STRATA_CHECK(ref_counts_[id] >= 1);
  ++ref_counts_[id];
}

void BlockPool::Release(BlockId id) {
  STRATA_CHECK(id >= 0 && id < num_blocks_);
  STRATA_CHECK(ref_counts_[id] >= 1);
  if (--ref_counts_[id] == 0) PushBack(id);
}

void BlockPool::Reclaim(BlockId id) {
  STRATA_CHECK(id >= 0 && id < num_blocks_);
  STRATA_CHECK(ref_counts_[id] == 0);
  Unlink(id);
  ref_counts_[id] = 1;
}

int32_t BlockPool::ref_count(BlockId id) const {
  STRATA_CHECK(id >= 0 && id < num_blocks_);
  return ref_counts_[id];
}

std::vector<BlockId> BlockPool::FreeListForTesting() const {
  std::vector<BlockId> ids;
  ids.reserve(static_cast<std::size_t>(num_free_));
  for (BlockId id = next_[num_blocks_]; id != num_blocks_; id = next_[id]) ids.push_back(id);
  return ids;
}

void BlockPool::PushBack(BlockId id) {
  const BlockId back = prev_[num_blocks_];
  prev_[id] = back;
  next_[id] = num_blocks_;
  next_[back] = id;
  prev_[num_blocks_] = id;
  ++num_free_;
}

void BlockPool::Unlink(BlockId id) {
  next_[prev_[id]] = next_[id];
  prev_[next_[id]] = prev_[id];
  --num_free_;
}

}  // namespace strata::kv
