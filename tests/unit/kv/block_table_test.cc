#include "strata/kv/block_table.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "strata/kv/block_pool.h"

namespace strata::kv {
namespace {

TEST(BlockTable, StartsEmpty) {
  BlockTable table(16);
  EXPECT_EQ(table.block_size(), 16);
  EXPECT_TRUE(table.blocks().empty());
  EXPECT_EQ(table.num_blocks(), 0);
  EXPECT_EQ(table.capacity(), 0);
}

TEST(BlockTable, BlocksNeededRoundsUpAndCountsHeldBlocks) {
  BlockTable table(16);
  EXPECT_EQ(table.BlocksNeeded(0), 0);
  EXPECT_EQ(table.BlocksNeeded(1), 1);
  EXPECT_EQ(table.BlocksNeeded(15), 1);
  EXPECT_EQ(table.BlocksNeeded(16), 1);
  EXPECT_EQ(table.BlocksNeeded(17), 2);
  EXPECT_EQ(table.BlocksNeeded(97), 7);
  const BlockId two[] = {5, 3};
  table.Append(two);
  EXPECT_EQ(table.capacity(), 32);
  EXPECT_EQ(table.BlocksNeeded(0), 0);
  EXPECT_EQ(table.BlocksNeeded(31), 0);
  EXPECT_EQ(table.BlocksNeeded(32), 0);  // exactly full
  EXPECT_EQ(table.BlocksNeeded(33), 1);
  EXPECT_EQ(table.BlocksNeeded(48), 1);
  EXPECT_EQ(table.BlocksNeeded(49), 2);
}

TEST(BlockTable, BlockSizeOneNeedsABlockPerToken) {
  BlockTable table(1);
  EXPECT_EQ(table.BlocksNeeded(7), 7);
  const BlockId ids[] = {0, 1, 2};
  table.Append(ids);
  EXPECT_EQ(table.capacity(), 3);
  EXPECT_EQ(table.BlocksNeeded(7), 4);
}

TEST(BlockTable, BlocksNeededHandlesHugeTokenCounts) {
  BlockTable table(16);
  // 2^35 tokens would need 2^31 blocks, one more than an int32 pool can hold: saturates.
  EXPECT_EQ(table.BlocksNeeded(int64_t{1} << 35), INT32_MAX);
  EXPECT_EQ(table.BlocksNeeded(int64_t{16} * 1'000'000'000), 1'000'000'000);
}

TEST(BlockTable, AppendKeepsPositionOrder) {
  BlockTable table(4);
  const BlockId a[] = {9, 2};
  const BlockId b[] = {7};
  table.Append(a);
  table.Append(b);
  table.Append({});
  ASSERT_EQ(table.num_blocks(), 3);
  EXPECT_EQ(table.blocks()[0], 9);
  EXPECT_EQ(table.blocks()[1], 2);
  EXPECT_EQ(table.blocks()[2], 7);
  EXPECT_EQ(table.capacity(), 12);
}

TEST(BlockTable, ReleaseAllReturnsBlocksTailFirstAndEmptiesTheTable) {
  BlockPool pool(6);
  BlockTable table(16);
  std::vector<BlockId> ids;
  ASSERT_TRUE(pool.Allocate(table.BlocksNeeded(40), &ids));
  table.Append(ids);
  EXPECT_EQ(pool.num_free(), 3);
  table.ReleaseAll(&pool);
  EXPECT_EQ(table.num_blocks(), 0);
  EXPECT_EQ(table.capacity(), 0);
  EXPECT_EQ(pool.num_free(), 6);
  // The prefix block (position 0) is the last to be evicted.
  EXPECT_EQ(pool.FreeListForTesting(), (std::vector<BlockId>{3, 4, 5, 2, 1, 0}));
}

TEST(BlockTable, SharedPrefixSurvivesOneSequenceRelease) {
  BlockPool pool(8);
  BlockTable first(16);
  BlockTable second(16);
  std::vector<BlockId> ids;
  ASSERT_TRUE(pool.Allocate(3, &ids));
  first.Append(ids);
  // The second sequence shares the first two blocks and owns one more.
  pool.AddRef(ids[0]);
  pool.AddRef(ids[1]);
  second.Append(std::span<const BlockId>(ids).first(2));
  std::vector<BlockId> own;
  ASSERT_TRUE(pool.Allocate(second.BlocksNeeded(40), &own));
  second.Append(own);
  EXPECT_EQ(pool.num_free(), 4);
  first.ReleaseAll(&pool);
  EXPECT_EQ(pool.num_free(), 5);  // only the unshared block came back
  EXPECT_EQ(pool.ref_count(ids[0]), 1);
  second.ReleaseAll(&pool);
  EXPECT_EQ(pool.num_free(), 8);
}

TEST(BlockTable, FreeCountReturnsToPoolSizeAfterManySequences) {
  constexpr int32_t kBlocks = 40;
  BlockPool pool(kBlocks);
  std::mt19937 rng(7);
  std::vector<BlockTable> tables;
  std::vector<int64_t> lengths;
  for (int step = 0; step < 2000; ++step) {
    const int op = static_cast<int>(rng() % 4);
    if (op == 0 || tables.empty()) {
      tables.emplace_back(static_cast<int32_t>(1 + rng() % 16));
      lengths.push_back(0);
    } else if (op == 1 || op == 2) {
      // Grow a sequence; when it does not fit, preempt it (free everything), as the scheduler.
      const size_t i = rng() % tables.size();
      const int64_t want = lengths[i] + 1 + static_cast<int64_t>(rng() % 20);
      std::vector<BlockId> ids;
      if (pool.Allocate(tables[i].BlocksNeeded(want), &ids)) {
        tables[i].Append(ids);
        lengths[i] = want;
        ASSERT_GE(tables[i].capacity(), want);
        ASSERT_LT(tables[i].capacity() - want, tables[i].block_size());
      } else {
        tables[i].ReleaseAll(&pool);
        lengths[i] = 0;
      }
    } else {
      // Finish or cancel one.
      const size_t i = rng() % tables.size();
      tables[i].ReleaseAll(&pool);
      tables.erase(tables.begin() + static_cast<ptrdiff_t>(i));
      lengths.erase(lengths.begin() + static_cast<ptrdiff_t>(i));
    }
    int32_t held = 0;
    for (const BlockTable& t : tables) held += t.num_blocks();
    ASSERT_EQ(pool.num_free(), kBlocks - held);
  }
  for (BlockTable& t : tables) t.ReleaseAll(&pool);
  EXPECT_EQ(pool.num_free(), kBlocks);
}

}  // namespace
}  // namespace strata::kv
