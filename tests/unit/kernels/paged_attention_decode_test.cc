// Decode attention kernel against a float64 reference (kernels/paged_attention_decode.cu).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "strata/kernels/paged_attention.h"
#include "support/device_buffer.h"
#include "unit/kernels/paged_kv_fixture.h"

namespace strata::kernels {
namespace {

using paged_test::BlockOrder;
using paged_test::CacheShape;
using paged_test::PagedKvCache;

struct DecodeCase {
  std::string name;
  CacheShape shape;
  int32_t group = 1;              // query heads per KV head
  std::vector<int32_t> contexts;  // one sequence each; the query sits at context - 1
  int32_t sliding_window = 0;
  int32_t chunk_tokens = 0;    // 0: the default
  int32_t num_partitions = 0;  // 0: the plan's; else forced
  bool expect_split = false;   // the plan must split (the case exists to test the merge)
};

// Runs the decode kernel for `c` on `cache` and checks it against the reference.
void CheckDecode(const DecodeCase& c, const PagedKvCache& cache, uint32_t seed) {
  const int32_t num_seqs = static_cast<int32_t>(c.contexts.size());
  const int32_t num_heads = c.shape.num_kv_heads * c.group;
  const int32_t dk = c.shape.head_dim_k;
  const int32_t dv = c.shape.head_dim_v;
  const std::vector<float> q =
      paged_test::RandomFloats(static_cast<size_t>(num_seqs) * num_heads * dk, seed);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  int32_t max_context = 0;
  for (int32_t ctx : c.contexts) max_context = std::max(max_context, ctx);

  PagedAttentionDecodePlan plan = PlanPagedAttentionDecode(
      num_seqs, num_heads, c.shape.num_kv_heads, dv, max_context, c.sliding_window, c.chunk_tokens);
  if (c.num_partitions > 0) {
    plan.num_partitions = c.num_partitions;
    plan.workspace_bytes =
        PagedAttentionDecodeWorkspaceBytes(num_seqs, num_heads, dv, c.num_partitions);
  }
  if (c.expect_split) {
    ASSERT_GT(plan.num_partitions, 1) << "the case no longer exercises the merge";
  }

  test::DeviceBuffer<float> d_q(q);
  test::DeviceBuffer<int32_t> d_tables(cache.tables());
  test::DeviceBuffer<int32_t> d_offsets(cache.offsets());
  test::DeviceBuffer<int32_t> d_contexts(c.contexts);
  test::DeviceBuffer<float> d_out(static_cast<size_t>(num_seqs) * num_heads * dv);
  test::DeviceBuffer<uint8_t> d_workspace(static_cast<size_t>(plan.workspace_bytes));
  ASSERT_TRUE(d_q.ok() && d_tables.ok() && d_offsets.ok() && d_contexts.ok() && d_out.ok() &&
              d_workspace.ok());
  // NaN everywhere first: an output the kernel forgets to write fails the comparison.
  ASSERT_EQ(cudaMemset(d_out.get(), 0xff, d_out.size() * sizeof(float)), cudaSuccess);

  PagedAttentionDecodeArgs args;
  args.kv = cache.Layer();
  args.q = d_q.get();
  args.block_tables = d_tables.get();
  args.block_table_offsets = d_offsets.get();
  args.context_lens = d_contexts.get();
  args.num_seqs = num_seqs;
  args.num_heads = num_heads;
  args.scale = scale;
  args.sliding_window = c.sliding_window;
  args.out = d_out.get();
  ASSERT_EQ(
      LaunchPagedAttentionDecode(args, plan, d_workspace.get(), plan.workspace_bytes, nullptr), 0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = d_out.Download();

  std::vector<double> want(got.size(), 0.0);
  for (int32_t s = 0; s < num_seqs; ++s) {
    if (c.contexts[s] <= 0) continue;  // no keys: all-zero output
    cache.Reference(static_cast<size_t>(s), c.contexts[s] - 1,
                    q.data() + static_cast<int64_t>(s) * num_heads * dk, num_heads, scale,
                    c.sliding_window, want.data() + static_cast<int64_t>(s) * num_heads * dv);
  }
  paged_test::ExpectAllClose(got, want, dv, paged_test::Tolerance(c.shape.dtype),
                             "row (sequence * num_heads + head)");
}

// gtest prints a failing parameter with this (instead of its bytes).
void PrintTo(const DecodeCase& c, std::ostream* os) { *os << c.name; }

class PagedAttentionDecode : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(PagedAttentionDecode, MatchesTheFloat64Reference) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const DecodeCase& c = GetParam();
  PagedKvCache cache(c.shape, c.contexts, /*num_blocks_hint=*/0, BlockOrder::kShuffled,
                     /*seed=*/17);
  ASSERT_TRUE(cache.ok()) << "device allocation or upload failed";
  CheckDecode(c, cache, /*seed=*/23);
}

CacheShape Shape(KvElementType dtype, int32_t block_size, int32_t kv_heads, int32_t dk,
                 int32_t dv) {
  CacheShape s;
  s.dtype = dtype;
  s.block_size = block_size;
  s.num_kv_heads = kv_heads;
  s.head_dim_k = dk;
  s.head_dim_v = dv;
  return s;
}

std::vector<DecodeCase> DecodeCases() {
  std::vector<DecodeCase> cases;
  // The sweep: odd context lengths (1, 7, block_size - 1, block_size, block_size + 1, 97), block
  // sizes 1 and 16, GQA ratios 1, 2, 3, 4, 8 (fp16 takes the vectorized kernel for each of its
  // head-group widths 1, 2, 4, 8), head dims 64, 128, 256, both storage types.
  for (KvElementType dtype : {KvElementType::kF32, KvElementType::kF16}) {
    for (int32_t block_size : {1, 16}) {
      for (int32_t group : {1, 2, 3, 4, 8}) {
        for (int32_t dim : {64, 128, 256}) {
          DecodeCase c;
          c.name = std::string(paged_test::DtypeName(dtype)) + "_block" +
                   std::to_string(block_size) + "_group" + std::to_string(group) + "_dim" +
                   std::to_string(dim);
          c.shape = Shape(dtype, block_size, 2, dim, dim);
          c.group = group;
          c.contexts = {1, 7, 15, 16, 17, 97};
          cases.push_back(c);
        }
      }
    }
  }
  auto add = [&](DecodeCase c) { cases.push_back(std::move(c)); };
  add({"f16_Context4097SplitsIntoSeveralPartitions",
       Shape(KvElementType::kF16, 16, 2, 128, 128),
       4,
       {4097},
       0,
       0,
       0,
       true});
  add({"f32_Context4097SplitsIntoSeveralPartitions",
       Shape(KvElementType::kF32, 16, 1, 64, 64),
       8,
       {4097, 33},
       0,
       0,
       0,
       true});
  add({"f16_Dim256LongContextsSplit",
       Shape(KvElementType::kF16, 16, 1, 256, 256),
       4,
       {1000, 2500},
       0,
       0,
       0,
       true});
  add({"f32_SlidingWindowSmallerThanTheContext",
       Shape(KvElementType::kF32, 16, 2, 64, 64),
       4,
       {1, 3, 5, 6, 97},
       5,
       0,
       0,
       false});
  add({"f16_SlidingWindow1000OfContext4097Splits",
       Shape(KvElementType::kF16, 16, 2, 128, 128),
       4,
       {4097, 999, 1000, 1001},
       1000,
       0,
       0,
       true});
  add({"f32_SlidingWindowLargerThanTheContext",
       Shape(KvElementType::kF32, 1, 2, 64, 64),
       4,
       {1, 97, 300},
       5000,
       0,
       0,
       false});
  add({"f32_FewerPartitionsThanChunksLoopOverChunks",
       Shape(KvElementType::kF32, 16, 2, 64, 64),
       4,
       {1, 7, 97, 200},
       0,
       16,
       3,
       true});
  add({"f16_MorePartitionsThanChunksLeaveSomeEmpty",
       Shape(KvElementType::kF16, 1, 2, 128, 128),
       8,
       {1, 17, 97},
       0,
       16,
       20,
       true});
  add({"f32_SplitWithSlidingWindowAndTinyChunks",
       Shape(KvElementType::kF32, 16, 1, 64, 64),
       4,
       {1, 40, 97},
       33,
       7,
       4,
       true});
  // The vectorized kernel stages at most 512 block ids at a time: one partition over 1500 and
  // 9000 keys (block sizes 1 and 16) takes several rounds.
  add({"f16_OnePartitionOverManyTableRoundsBlock1",
       Shape(KvElementType::kF16, 1, 2, 128, 128),
       4,
       {1500, 700, 513},
       0,
       0,
       1,
       false});
  add({"f16_OnePartitionOverManyTableRoundsBlock16",
       Shape(KvElementType::kF16, 16, 1, 64, 64),
       2,
       {9000, 8193},
       0,
       0,
       1,
       false});
  // A plan made for a longer context than the batch has (as CUDA graphs are): most partitions
  // find no keys, sequences of one chunk write directly, longer ones merge.
  add({"f16_PlanForALongerContextThanTheBatchHas",
       Shape(KvElementType::kF16, 16, 2, 128, 128),
       4,
       {1, 64, 65, 300, 0},
       0,
       0,
       128,
       true});
  add({"f16_SlidingWindowWithManyPartitions",
       Shape(KvElementType::kF16, 16, 1, 256, 256),
       4,
       {5000, 100, 1025},
       1024,
       0,
       0,
       true});
  add({"f32_EmptyContextGivesZeros",
       Shape(KvElementType::kF32, 16, 2, 64, 64),
       4,
       {0, 5, 0},
       0,
       0,
       0,
       false});
  add({"f32_EmptyContextGivesZerosWhenSplit",
       Shape(KvElementType::kF32, 16, 2, 64, 64),
       4,
       {0, 50},
       0,
       16,
       2,
       true});
  add({"f16_Group16TakesTwoCtasPerKvHead",
       Shape(KvElementType::kF16, 16, 2, 128, 128),
       16,
       {1, 17, 97},
       0,
       0,
       0,
       false});
  add({"f32_Group12LeavesAPartialHeadChunk",
       Shape(KvElementType::kF32, 16, 1, 64, 64),
       12,
       {7, 97},
       0,
       16,
       0,
       true});
  add({"f32_Group7", Shape(KvElementType::kF32, 16, 2, 128, 128), 7, {1, 16, 97}, 0, 0, 0, false});
  add({"f32_UnequalHeadDims",
       Shape(KvElementType::kF32, 16, 2, 96, 40),
       4,
       {1, 17, 97},
       0,
       0,
       0,
       false});
  add({"f16_SmallHeadDims",
       Shape(KvElementType::kF16, 16, 3, 16, 8),
       2,
       {1, 17, 97},
       0,
       0,
       0,
       false});
  add({"f16_OddHeadDims",
       Shape(KvElementType::kF16, 1, 1, 200, 130),
       4,
       {1, 7, 97},
       0,
       32,
       0,
       true});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Sweep, PagedAttentionDecode, ::testing::ValuesIn(DecodeCases()),
                         [](const ::testing::TestParamInfo<DecodeCase>& info) {
                           return info.param.name;
                         });

TEST(PagedAttentionDecodeLargeCache, BlocksPastTwoToThe32ElementsAreAddressedIn64Bits) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const CacheShape shape = paged_test::LargeCacheShape();
  const DecodeCase c{"large", shape, 4, {97, 1000, 4097}, 0, 0, 0, true};
  const int64_t first_used_block = paged_test::kLargeCacheBlocks - (7 + 63 + 257);
  ASSERT_GT(first_used_block * shape.block_size * shape.num_kv_heads * shape.head_dim_k,
            int64_t{1} << 32);
  if (!paged_test::DeviceHasFreeBytes(paged_test::LargeCacheBytes() + (int64_t{1} << 30))) {
    GTEST_SKIP() << "needs " << paged_test::LargeCacheBytes() / (1 << 30) + 1
                 << " GiB of free device memory";
  }
  PagedKvCache cache(shape, c.contexts, paged_test::kLargeCacheBlocks, BlockOrder::kTop,
                     /*seed=*/41);
  ASSERT_TRUE(cache.ok()) << "device allocation or upload failed";
  CheckDecode(c, cache, /*seed=*/43);
}

TEST(PagedAttentionDecodeLaunch, RejectsInvalidShapesWithoutLaunching) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  test::DeviceBuffer<float> dummy(4096);
  test::DeviceBuffer<int32_t> ints(16);
  ASSERT_TRUE(dummy.ok() && ints.ok());
  PagedAttentionDecodeArgs args;
  args.kv.k = dummy.get();
  args.kv.v = dummy.get();
  args.kv.dtype = KvElementType::kF32;
  args.kv.num_kv_heads = 2;
  args.kv.head_dim_k = 64;
  args.kv.head_dim_v = 64;
  args.kv.block_size = 16;
  args.q = dummy.get();
  args.out = dummy.get();
  args.block_tables = ints.get();
  args.block_table_offsets = ints.get();
  args.context_lens = ints.get();
  args.num_seqs = 1;
  args.num_heads = 4;
  const PagedAttentionDecodePlan plan;
  const int kInvalid = static_cast<int>(cudaErrorInvalidValue);

  PagedAttentionDecodeArgs bad = args;
  bad.num_heads = 5;  // not a multiple of the KV heads
  EXPECT_EQ(LaunchPagedAttentionDecode(bad, plan, nullptr, 0, nullptr), kInvalid);
  bad = args;
  bad.kv.head_dim_k = kPagedAttentionMaxHeadDim + 1;
  EXPECT_EQ(LaunchPagedAttentionDecode(bad, plan, nullptr, 0, nullptr), kInvalid);
  bad = args;
  bad.kv.block_size = 0;
  EXPECT_EQ(LaunchPagedAttentionDecode(bad, plan, nullptr, 0, nullptr), kInvalid);
  bad = args;
  bad.context_lens = nullptr;
  EXPECT_EQ(LaunchPagedAttentionDecode(bad, plan, nullptr, 0, nullptr), kInvalid);

  PagedAttentionDecodePlan split;
  split.num_partitions = 4;
  split.workspace_bytes = PagedAttentionDecodeWorkspaceBytes(1, 4, 64, 4);
  EXPECT_EQ(LaunchPagedAttentionDecode(args, split, nullptr, 0, nullptr), kInvalid)
      << "a split plan needs its workspace";
  EXPECT_EQ(
      LaunchPagedAttentionDecode(args, split, dummy.get(), split.workspace_bytes - 1, nullptr),
      kInvalid);
  split.num_partitions = kPagedAttentionMaxPartitions + 1;
  EXPECT_EQ(LaunchPagedAttentionDecode(args, split, dummy.get(), 1 << 14, nullptr), kInvalid);

  bad = args;
  bad.num_seqs = 0;
  EXPECT_EQ(LaunchPagedAttentionDecode(bad, plan, nullptr, 0, nullptr), 0) << "nothing to do";
}

}  // namespace
}  // namespace strata::kernels
