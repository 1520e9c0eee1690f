// The decode plan and workspace arithmetic: pure host code, runs without a device.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "strata/kernels/paged_attention.h"

namespace strata::kernels {
namespace {

TEST(PagedAttentionDecodePlan, OneLongSequenceGetsAPartitionPerChunk) {
  // 4097 keys = 64 full chunks of 64 and one of 1; 8 CTAs per partition, so up to 128 fill the
  // GPU.
  const PagedAttentionDecodePlan plan = PlanPagedAttentionDecode(1, 32, 8, 128, 4097, 0);
  EXPECT_EQ(plan.num_partitions, 65);
  EXPECT_EQ(plan.chunk_tokens, kPagedAttentionDefaultChunkTokens);
  EXPECT_EQ(plan.workspace_bytes, PagedAttentionDecodeWorkspaceBytes(1, 32, 128, 65));
  EXPECT_GT(plan.workspace_bytes, 0);
}

TEST(PagedAttentionDecodePlan, ContextsWithinOneChunkAreNotSplit) {
  for (int64_t context : {0, 1, 33, 64}) {
    const PagedAttentionDecodePlan plan = PlanPagedAttentionDecode(4, 32, 8, 128, context, 0);
    EXPECT_EQ(plan.num_partitions, 1) << "context " << context;
    EXPECT_EQ(plan.workspace_bytes, 0) << "context " << context;
  }
}

TEST(PagedAttentionDecodePlan, ALargeBatchFillsTheGpuWithoutSplitting) {
  // 256 sequences x 8 KV heads = 2048 CTAs already.
  const PagedAttentionDecodePlan plan = PlanPagedAttentionDecode(256, 32, 8, 128, 8192, 0);
  EXPECT_EQ(plan.num_partitions, 1);
  EXPECT_EQ(plan.workspace_bytes, 0);
  // 64 x 8 = 512 CTAs: two partitions reach the target of 1024.
  EXPECT_EQ(PlanPagedAttentionDecode(64, 32, 8, 128, 8192, 0).num_partitions, 2);
}

TEST(PagedAttentionDecodePlan, LargeGqaGroupsCountTheirExtraCtas) {
  // 64 query heads per KV head take 8 CTAs each: 128 x 1 x 8 = 1024 CTAs, no split.
  EXPECT_EQ(PlanPagedAttentionDecode(128, 64, 1, 128, 8192, 0).num_partitions, 1);
  // With 4 query heads per KV head, 128 CTAs: 8 partitions.
  EXPECT_EQ(PlanPagedAttentionDecode(128, 4, 1, 128, 8192, 0).num_partitions, 8);
}

TEST(PagedAttentionDecodePlan, TheSlidingWindowBoundsTheKeysToSplit) {
  EXPECT_EQ(PlanPagedAttentionDecode(1, 4, 1, 256, 100000, 64).num_partitions, 1);
  EXPECT_EQ(PlanPagedAttentionDecode(1, 4, 1, 256, 100000, 65).num_partitions, 2);
  EXPECT_EQ(PlanPagedAttentionDecode(1, 4, 1, 256, 1000, 100000).num_partitions, 16);
}

TEST(PagedAttentionDecodePlan, ChunkTokensCanBeChosen) {
  const PagedAttentionDecodePlan plan = PlanPagedAttentionDecode(1, 4, 1, 64, 97, 0, 16);
  EXPECT_EQ(plan.num_partitions, 7);
  EXPECT_EQ(plan.chunk_tokens, 16);
}

TEST(PagedAttentionDecodePlan, PartitionsAreCapped) {
  const PagedAttentionDecodePlan plan =
      PlanPagedAttentionDecode(1, 1, 1, 64, int64_t{1} << 40, 0, 1);
  EXPECT_EQ(plan.num_partitions, kPagedAttentionMaxPartitions);
  EXPECT_EQ(plan.workspace_bytes,
            PagedAttentionDecodeWorkspaceBytes(1, 1, 64, kPagedAttentionMaxPartitions));
}

TEST(PagedAttentionDecodePlan, InvalidInputsGiveTheUnsplitPlan) {
  const PagedAttentionDecodePlan plans[] = {
      PlanPagedAttentionDecode(0, 4, 1, 64, 4097, 0),       // no sequences
      PlanPagedAttentionDecode(1, 6, 4, 64, 4097, 0),       // heads not a multiple
      PlanPagedAttentionDecode(1, 4, 0, 64, 4097, 0),       // no KV heads
      PlanPagedAttentionDecode(1, 4, 1, 0, 4097, 0),        // no head dim
      PlanPagedAttentionDecode(1, 4, 1, 64, 4097, -1),      // negative window
      PlanPagedAttentionDecode(1, 4, 1, 64, 4097, 0, 513),  // chunk too large
      PlanPagedAttentionDecode(1, 4, 1, 64, 4097, 0, -2),   // negative chunk
  };
  for (const PagedAttentionDecodePlan& plan : plans) {
    EXPECT_EQ(plan.num_partitions, 1);
    EXPECT_EQ(plan.chunk_tokens, kPagedAttentionDefaultChunkTokens);
    EXPECT_EQ(plan.workspace_bytes, 0);
  }
}

TEST(PagedAttentionDecodeWorkspace, SectionsAre256ByteAligned) {
  // 15 rows x 2 partitions: max and sum 120 bytes each -> 256; outputs 15 x 2 x 7 x 4 = 840 ->
  // 1024.
  EXPECT_EQ(PagedAttentionDecodeWorkspaceBytes(3, 5, 7, 2), 256 + 256 + 1024);
  // 1 x 32 rows x 9 partitions: 1152 -> 1280 twice; 1152 x 128 = 147456 (aligned).
  EXPECT_EQ(PagedAttentionDecodeWorkspaceBytes(1, 32, 128, 9), 1280 + 1280 + 147456);
}

TEST(PagedAttentionDecodeWorkspace, OnePartitionNeedsNone) {
  EXPECT_EQ(PagedAttentionDecodeWorkspaceBytes(8, 32, 128, 1), 0);
}

TEST(PagedAttentionDecodeWorkspace, InvalidOrOverflowingSizesAreRejected) {
  EXPECT_EQ(PagedAttentionDecodeWorkspaceBytes(0, 32, 128, 2), -1);
  EXPECT_EQ(PagedAttentionDecodeWorkspaceBytes(1, 32, 128, 0), -1);
  EXPECT_EQ(PagedAttentionDecodeWorkspaceBytes(1, -1, 128, 2), -1);
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(PagedAttentionDecodeWorkspaceBytes(kMax, kMax, 256, 256), -1);
}

}  // namespace
}  // namespace strata::kernels
