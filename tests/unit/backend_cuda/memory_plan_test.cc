#include "strata/backend/cuda/memory_plan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

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

// 1000 free at fraction 1.0: 100 of workspaces, a dequantization workspace of 50, blocks of 10.
// Without copies the pool gets 1000 - 100 - 50 = 850; with copies of C it gets 900 - C.
F16CopyInputs Plan(int64_t copy_bytes) {
  F16CopyInputs in;
  in.free_bytes = 1000;
  in.memory_fraction = 1.0;
  in.workspace_bytes = 100;
  in.dequant_bytes = 50;
  in.copy_bytes = copy_bytes;
  in.bytes_per_block = 10;
  return in;
}

bool Decide(F16WeightCopies mode, const F16CopyInputs& in) {
  StatusOr<bool> copies = PlanF16WeightCopies(mode, in);
  EXPECT_TRUE(copies.ok()) << copies.status().ToString();
  return copies.ok() && *copies;
}

TEST(F16WeightCopiesPlan, AutoMakesThemWhileThePoolKeepsAtLeastHalf) {
  EXPECT_TRUE(Decide(F16WeightCopies::kAuto, Plan(100)));  // pool 800 of 850
  // The boundary: 900 - 475 = 425 is exactly half of 850; one byte more is below half.
  EXPECT_TRUE(Decide(F16WeightCopies::kAuto, Plan(475)));
  EXPECT_FALSE(Decide(F16WeightCopies::kAuto, Plan(476)));
  // Half is not enough where it is no whole block: 30 without, 15 with, blocks of 20.
  F16CopyInputs in = Plan(65);
  in.free_bytes = 180;
  in.bytes_per_block = 20;
  EXPECT_FALSE(Decide(F16WeightCopies::kAuto, in));
  in.bytes_per_block = 15;
  EXPECT_TRUE(Decide(F16WeightCopies::kAuto, in));
}

TEST(F16WeightCopiesPlan, AutoCountsTheFractionAndTheSavedWorkspace) {
  F16CopyInputs in = Plan(226);
  in.memory_fraction = 0.5;  // share 500: pool 350 without, 174 with: below half
  EXPECT_FALSE(Decide(F16WeightCopies::kAuto, in));
  in.copy_bytes = 225;  // 175 with: exactly half
  EXPECT_TRUE(Decide(F16WeightCopies::kAuto, in));
  // Copies no larger than the workspace they replace leave the pool as large or larger.
  in = Plan(50);
  in.free_bytes = 165;  // pool 15 either way
  EXPECT_TRUE(Decide(F16WeightCopies::kAuto, in));
}

TEST(F16WeightCopiesPlan, AutoMakesNoneWhereThePoolWouldBeEmptyAnyway) {
  F16CopyInputs in = Plan(10);
  in.free_bytes = 100;  // the workspaces alone exceed the share
  EXPECT_FALSE(Decide(F16WeightCopies::kAuto, in));
}

TEST(F16WeightCopiesPlan, OnMakesThemWhileTheyLeaveOneKvBlock) {
  EXPECT_TRUE(Decide(F16WeightCopies::kOn, Plan(476)));  // below half is still fine for on
  EXPECT_TRUE(Decide(F16WeightCopies::kOn, Plan(890)));  // exactly one block of 10 left
  StatusOr<bool> too_big = PlanF16WeightCopies(F16WeightCopies::kOn, Plan(891));
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kFailedPrecondition);
  const std::string& message = too_big.status().message();
  EXPECT_NE(message.find("891 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("--cuda-f16-weights"), std::string::npos) << message;
  EXPECT_NE(message.find("raise memory_fraction"), std::string::npos) << message;
}

TEST(F16WeightCopiesPlan, OffOrNothingQuantizedMakesNone) {
  EXPECT_FALSE(Decide(F16WeightCopies::kOff, Plan(10)));
  EXPECT_FALSE(Decide(F16WeightCopies::kOff, Plan(100000)));  // never an error either
  for (F16WeightCopies mode :
       {F16WeightCopies::kAuto, F16WeightCopies::kOn, F16WeightCopies::kOff}) {
    F16CopyInputs in = Plan(0);
    in.free_bytes = 0;  // nothing fits, and nothing needs to
    EXPECT_FALSE(Decide(mode, in));
  }
}

TEST(F16WeightCopiesPlan, WithAKvBudgetTheCopiesMustFitBesideIt) {
  F16CopyInputs in = Plan(400);
  in.kv_budget_bytes = 500;  // 100 + 400 + 500 = 1000: exactly the share
  EXPECT_TRUE(Decide(F16WeightCopies::kAuto, in));
  EXPECT_TRUE(Decide(F16WeightCopies::kOn, in));
  in.copy_bytes = 401;
  EXPECT_FALSE(Decide(F16WeightCopies::kAuto, in));
  StatusOr<bool> on = PlanF16WeightCopies(F16WeightCopies::kOn, in);
  ASSERT_FALSE(on.ok());
  EXPECT_EQ(on.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(on.status().message().find("lower kv_budget_bytes"), std::string::npos)
      << on.status().message();
  // The fraction still bounds them.
  in.copy_bytes = 400;
  in.memory_fraction = 0.9;
  EXPECT_FALSE(Decide(F16WeightCopies::kAuto, in));
}

}  // namespace
}  // namespace strata::backend::cuda
