#include "strata/backend/cuda/memory_plan.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace strata::backend::cuda {
namespace {

TEST(GraphBucket, BatchRunsInTheSmallestBucketThatHoldsIt) {
  EXPECT_EQ(GraphBucketIndex(1), 0);
  EXPECT_EQ(GraphBucketIndex(2), 1);
  EXPECT_EQ(GraphBucketIndex(3), 2);
  EXPECT_EQ(GraphBucketIndex(4), 2);
  EXPECT_EQ(GraphBucketIndex(5), 3);
  EXPECT_EQ(GraphBucketIndex(17), 5);
  EXPECT_EQ(GraphBucketIndex(64), 6);
  EXPECT_EQ(GraphBucketIndex(65), 7);
  EXPECT_EQ(GraphBucketIndex(128), 7);
  for (int64_t n = 1; n <= 128; ++n) {
    const int i = GraphBucketIndex(n);
    ASSERT_GE(i, 0) << n;
    EXPECT_GE(kGraphBuckets[i], n);
    if (i > 0) {
      EXPECT_LT(kGraphBuckets[i - 1], n);
    }
  }
}

TEST(GraphBucket, EmptyAndOversizedBatchesRunEagerly) {
  EXPECT_EQ(GraphBucketIndex(0), -1);
  EXPECT_EQ(GraphBucketIndex(-3), -1);
  EXPECT_EQ(GraphBucketIndex(129), -1);
  EXPECT_EQ(GraphBucketIndex(int64_t{1} << 40), -1);
}

TEST(KvSizing, BytesPerBlockCountEveryLayersFp16KeysAndValues) {
  // 2 layers x 16 tokens x 4 heads x (64 + 32 dims) x 2 bytes.
  EXPECT_EQ(KvBytesPerBlock(2, 4, 64, 32, 16), 2 * 16 * 4 * 96 * 2);
  EXPECT_EQ(KvBytesPerBlock(1, 1, 1, 1, 1), 4);
}

TEST(KvSizing, PoolTakesTheFractionOfFreeMemoryLessTheWorkspaces) {
  // 1000 free, 90% = 900, minus 100 of workspaces = 800 -> 8 blocks of 100.
  EXPECT_EQ(KvPoolBlocks(1000, 0.9, 100, 0, 100), 8);
  // Rounds down to whole blocks.
  EXPECT_EQ(KvPoolBlocks(1000, 0.9, 100, 0, 99), 8);
  EXPECT_EQ(KvPoolBlocks(1000, 1.0, 0, 0, 1000), 1);
  EXPECT_EQ(KvPoolBlocks(1000, 1.0, 1, 0, 1000), 0);
}

TEST(KvSizing, AnExplicitBudgetWinsOverFreeMemory) {
  EXPECT_EQ(KvPoolBlocks(1000, 0.5, 900, 4096, 1024), 4);
  EXPECT_EQ(KvPoolBlocks(0, 0.5, 0, 4096, 1024), 4);
}

TEST(KvSizing, NothingLeftGivesNoBlocks) {
  EXPECT_EQ(KvPoolBlocks(1000, 0.5, 600, 0, 1), 0);  // workspaces exceed the share
  EXPECT_EQ(KvPoolBlocks(0, 0.9, 0, 0, 16), 0);
  EXPECT_EQ(KvPoolBlocks(1000, 0.9, 0, 0, 0), 0);  // a degenerate block size
}

TEST(KvSizing, HugeBudgetsClampToInt32Blocks) {
  EXPECT_EQ(KvPoolBlocks(0, 1.0, 0, int64_t{1} << 50, 2), INT32_MAX);
}

}  // namespace
}  // namespace strata::backend::cuda
