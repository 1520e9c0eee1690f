#include "strata/kv/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace strata::kv {
namespace {

TEST(BlockPool, StartsWithEveryBlockFreeInAscendingOrder) {
  BlockPool pool(5);
  EXPECT_EQ(pool.num_blocks(), 5);
  EXPECT_EQ(pool.num_free(), 5);
  EXPECT_EQ(pool.FreeListForTesting(), (std::vector<BlockId>{0, 1, 2, 3, 4}));
  for (BlockId id = 0; id < 5; ++id) EXPECT_EQ(pool.ref_count(id), 0);
}

TEST(BlockPool, AllocateGivesDistinctBlocksWithRefCountOne) {
  BlockPool pool(8);
  std::vector<BlockId> ids = {42};  // Allocate appends; existing entries stay.
  ASSERT_TRUE(pool.Allocate(3, &ids));
  ASSERT_TRUE(pool.Allocate(2, &ids));
  EXPECT_EQ(ids, (std::vector<BlockId>{42, 0, 1, 2, 3, 4}));
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_EQ(pool.ref_count(ids[i]), 1);
  EXPECT_EQ(pool.num_free(), 3);
}

TEST(BlockPool, AllocationIsAllOrNothing) {
  BlockPool pool(4);
  std::vector<BlockId> ids;
  ASSERT_TRUE(pool.Allocate(3, &ids));
  std::vector<BlockId> more = {7};
  EXPECT_FALSE(pool.Allocate(2, &more));
  EXPECT_EQ(more, (std::vector<BlockId>{7}));  // untouched
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.ref_count(3), 0);
  EXPECT_TRUE(pool.Allocate(1, &more));
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_FALSE(pool.Allocate(1, &more));
  EXPECT_TRUE(pool.Allocate(0, &more));  // nothing asked, nothing taken
  EXPECT_EQ(more.size(), 2u);
}

TEST(BlockPool, EmptyPoolFitsOnlyNothing) {
  BlockPool pool(0);
  std::vector<BlockId> ids;
  EXPECT_TRUE(pool.Allocate(0, &ids));
  EXPECT_FALSE(pool.Allocate(1, &ids));
  EXPECT_TRUE(ids.empty());
}

TEST(BlockPool, SharedBlockIsFreedByItsLastRelease) {
  BlockPool pool(2);
  std::vector<BlockId> ids;
  ASSERT_TRUE(pool.Allocate(1, &ids));
  const BlockId id = ids[0];
  pool.AddRef(id);
  pool.AddRef(id);
  EXPECT_EQ(pool.ref_count(id), 3);
  pool.Release(id);
  pool.Release(id);
  EXPECT_EQ(pool.ref_count(id), 1);
  EXPECT_EQ(pool.num_free(), 1);
  pool.Release(id);
  EXPECT_EQ(pool.ref_count(id), 0);
  EXPECT_EQ(pool.num_free(), 2);
}

TEST(BlockPool, FreedBlocksReturnInEvictionOrder) {
  // FIFO: the block released longest ago is allocated first (LRU eviction of cached blocks).
  BlockPool pool(4);
  std::vector<BlockId> ids;
  ASSERT_TRUE(pool.Allocate(4, &ids));
  pool.Release(2);
  pool.Release(0);
  pool.Release(3);
  EXPECT_EQ(pool.FreeListForTesting(), (std::vector<BlockId>{2, 0, 3}));
  std::vector<BlockId> again;
  ASSERT_TRUE(pool.Allocate(2, &again));
  EXPECT_EQ(again, (std::vector<BlockId>{2, 0}));
  pool.Release(1);
  EXPECT_EQ(pool.FreeListForTesting(), (std::vector<BlockId>{3, 1}));
}

TEST(BlockPool, ReclaimTakesOneFreeBlockFromAnywhereInTheList) {
  BlockPool pool(5);
  pool.Reclaim(2);  // middle
  EXPECT_EQ(pool.ref_count(2), 1);
  EXPECT_EQ(pool.num_free(), 4);
  pool.Reclaim(4);  // back
  pool.Reclaim(0);  // front
  EXPECT_EQ(pool.FreeListForTesting(), (std::vector<BlockId>{1, 3}));
  std::vector<BlockId> ids;
  EXPECT_FALSE(pool.Allocate(3, &ids));
  ASSERT_TRUE(pool.Allocate(2, &ids));
  EXPECT_EQ(ids, (std::vector<BlockId>{1, 3}));
  pool.Release(2);
  EXPECT_EQ(pool.FreeListForTesting(), (std::vector<BlockId>{2}));
}

TEST(BlockPool, FreeCountReturnsToPoolSizeAfterRandomAllocateShareRelease) {
  constexpr int32_t kBlocks = 64;
  std::mt19937 rng(1234);
  for (int round = 0; round < 20; ++round) {
    BlockPool pool(kBlocks);
    std::vector<BlockId> held;  // one entry per reference held
    for (int step = 0; step < 500; ++step) {
      const int op = static_cast<int>(rng() % 3);
      if (op == 0) {
        const int32_t n = static_cast<int32_t>(rng() % 9);
        const int32_t free_before = pool.num_free();
        const size_t held_before = held.size();
        const bool ok = pool.Allocate(n, &held);
        ASSERT_EQ(ok, n <= free_before);
        ASSERT_EQ(pool.num_free(), ok ? free_before - n : free_before);
        ASSERT_EQ(held.size(), held_before + (ok ? n : 0));
      } else if (op == 1 && !held.empty()) {
        const BlockId id = held[rng() % held.size()];
        pool.AddRef(id);
        held.push_back(id);
      } else if (!held.empty()) {
        const size_t i = rng() % held.size();
        pool.Release(held[i]);
        held[i] = held.back();
        held.pop_back();
      }
      // Invariants: ref counts equal the references held; free blocks are those at zero.
      std::vector<int32_t> expected(kBlocks, 0);
      for (BlockId id : held) ++expected[id];
      int32_t zeros = 0;
      for (BlockId id = 0; id < kBlocks; ++id) {
        ASSERT_EQ(pool.ref_count(id), expected[id]) << "block " << id;
        zeros += expected[id] == 0;
      }
      ASSERT_EQ(pool.num_free(), zeros);
      std::vector<BlockId> free_list = pool.FreeListForTesting();
      ASSERT_EQ(static_cast<int32_t>(free_list.size()), zeros);
      for (BlockId id : free_list) ASSERT_EQ(expected[id], 0);
    }
    std::shuffle(held.begin(), held.end(), rng);
    for (BlockId id : held) pool.Release(id);
    EXPECT_EQ(pool.num_free(), kBlocks);
    std::vector<BlockId> all;
    EXPECT_TRUE(pool.Allocate(kBlocks, &all));
    std::sort(all.begin(), all.end());
    for (BlockId id = 0; id < kBlocks; ++id) EXPECT_EQ(all[id], id);
  }
}

TEST(BlockPoolDeathTest, MisuseIsAProgrammerError) {
  BlockPool pool(2);
  EXPECT_DEATH(pool.Release(0), "ref_counts_");  // not in use
  EXPECT_DEATH(pool.AddRef(1), "ref_counts_");   // free: Reclaim, not AddRef
  EXPECT_DEATH(pool.ref_count(2), "num_blocks_");
  std::vector<BlockId> ids;
  EXPECT_DEATH(pool.Allocate(-1, &ids), "n >= 0");
  ASSERT_TRUE(pool.Allocate(1, &ids));
  EXPECT_DEATH(pool.Reclaim(ids[0]), "ref_counts_");  // in use
}

}  // namespace
}  // namespace strata::kv
