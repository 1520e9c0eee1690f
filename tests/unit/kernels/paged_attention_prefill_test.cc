// Prefill / chunked-prefill attention kernel against a float64 reference
// (kernels/paged_attention_prefill.cu).
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

struct PrefillSeq {
  int32_t context = 0;  // tokens in the cache, the new ones included
  int32_t queries = 0;  // new tokens: positions [context - queries, context)
};

struct PrefillCase {
  std::string name;
  CacheShape shape;
  int32_t group = 1;
  std::vector<PrefillSeq> seqs;
  int32_t sliding_window = 0;
  int32_t max_query_len_hint = 0;  // 0: the true maximum; smaller: the CTAs must loop
};

std::vector<int32_t> Contexts(const std::vector<PrefillSeq>& seqs) {
  std::vector<int32_t> out;
  for (const PrefillSeq& s : seqs) out.push_back(s.context);
  return out;
}

void CheckPrefill(const PrefillCase& c, const PagedKvCache& cache, uint32_t seed) {
  const int32_t num_seqs = static_cast<int32_t>(c.seqs.size());
  const int32_t num_heads = c.shape.num_kv_heads * c.group;
  const int32_t dk = c.shape.head_dim_k;
  const int32_t dv = c.shape.head_dim_v;
  std::vector<int32_t> cu{0};
  int32_t max_q = 0;
  for (const PrefillSeq& s : c.seqs) {
    cu.push_back(cu.back() + s.queries);
    max_q = std::max(max_q, s.queries);
  }
  const int64_t total_q = cu.back();
  const std::vector<float> q =
      paged_test::RandomFloats(static_cast<size_t>(total_q) * num_heads * dk, seed);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));

  test::DeviceBuffer<float> d_q(q);
  test::DeviceBuffer<int32_t> d_cu(cu);
  test::DeviceBuffer<int32_t> d_tables(cache.tables());
  test::DeviceBuffer<int32_t> d_offsets(cache.offsets());
  test::DeviceBuffer<int32_t> d_contexts(Contexts(c.seqs));
  test::DeviceBuffer<float> d_out(static_cast<size_t>(total_q) * num_heads * dv);
  ASSERT_TRUE(d_q.ok() && d_cu.ok() && d_tables.ok() && d_offsets.ok() && d_contexts.ok() &&
              d_out.ok());
  // NaN everywhere first: an output the kernel forgets to write fails the comparison.
  ASSERT_EQ(cudaMemset(d_out.get(), 0xff, d_out.size() * sizeof(float)), cudaSuccess);

  PagedAttentionPrefillArgs args;
  args.kv = cache.Layer();
  args.q = d_q.get();
  args.cu_seqlens_q = d_cu.get();
  args.block_tables = d_tables.get();
  args.block_table_offsets = d_offsets.get();
  args.context_lens = d_contexts.get();
  args.num_seqs = num_seqs;
  args.max_query_len = c.max_query_len_hint > 0 ? c.max_query_len_hint : max_q;
  args.num_heads = num_heads;
  args.scale = scale;
  args.sliding_window = c.sliding_window;
  args.out = d_out.get();
  ASSERT_EQ(LaunchPagedAttentionPrefill(args, nullptr), 0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = d_out.Download();

  std::vector<double> want(got.size(), 0.0);
  for (int32_t s = 0; s < num_seqs; ++s) {
    const PrefillSeq& seq = c.seqs[static_cast<size_t>(s)];
    for (int32_t i = 0; i < seq.queries; ++i) {
      const int64_t row = cu[static_cast<size_t>(s)] + i;
      cache.Reference(static_cast<size_t>(s), seq.context - seq.queries + i,
                      q.data() + row * num_heads * dk, num_heads, scale, c.sliding_window,
                      want.data() + row * num_heads * dv);
    }
  }
  paged_test::ExpectAllClose(got, want, dv, paged_test::Tolerance(c.shape.dtype),
                             "row (query token * num_heads + head)");
}

// gtest prints a failing parameter with this (instead of its bytes).
void PrintTo(const PrefillCase& c, std::ostream* os) { *os << c.name; }

class PagedAttentionPrefill : public ::testing::TestWithParam<PrefillCase> {};

TEST_P(PagedAttentionPrefill, MatchesTheFloat64Reference) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const PrefillCase& c = GetParam();
  PagedKvCache cache(c.shape, Contexts(c.seqs), /*num_blocks_hint=*/0, BlockOrder::kShuffled,
                     /*seed=*/31);
  ASSERT_TRUE(cache.ok()) << "device allocation or upload failed";
  CheckPrefill(c, cache, /*seed=*/37);
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

std::vector<PrefillCase> PrefillCases() {
  // A ragged batch: whole prompts of odd lengths (1, 7, block_size +- 1, 97), a chunk of a
  // prompt whose start is already cached (start_pos 163), and a decode-like single query.
  const std::vector<PrefillSeq> ragged = {{1, 1},   {7, 7},    {15, 15}, {17, 17},
                                          {97, 97}, {200, 37}, {50, 1}};
  std::vector<PrefillCase> cases;
  for (KvElementType dtype : {KvElementType::kF32, KvElementType::kF16}) {
    for (int32_t block_size : {1, 16}) {
      for (int32_t group : {1, 4, 8}) {
        for (int32_t dim : {64, 128, 256}) {
          PrefillCase c;
          c.name = std::string(paged_test::DtypeName(dtype)) + "_block" +
                   std::to_string(block_size) + "_group" + std::to_string(group) + "_dim" +
                   std::to_string(dim);
          c.shape = Shape(dtype, block_size, 2, dim, dim);
          c.group = group;
          c.seqs = ragged;
          cases.push_back(c);
        }
      }
    }
  }
  auto add = [&](PrefillCase c) { cases.push_back(std::move(c)); };
  add({"f16_ChunkAtTheEndOfA4097TokenContext",
       Shape(KvElementType::kF16, 16, 2, 128, 128),
       4,
       {{4097, 65}, {4097, 1}, {130, 130}},
       0,
       0});
  add({"f32_SlidingWindowSmallerThanTheChunk",
       Shape(KvElementType::kF32, 16, 2, 64, 64),
       4,
       {{97, 97}, {200, 37}, {3, 3}},
       5,
       0});
  add({"f16_SlidingWindowAcrossTileBoundaries",
       Shape(KvElementType::kF16, 1, 1, 256, 256),
       4,
       {{97, 97}, {300, 70}},
       33,
       0});
  add({"f32_SlidingWindowLargerThanTheContext",
       Shape(KvElementType::kF32, 16, 2, 128, 128),
       8,
       {{97, 97}, {200, 37}},
       1000,
       0});
  add({"f32_CtasLoopWhenTheQueryLengthHintIsLow",
       Shape(KvElementType::kF32, 16, 2, 64, 64),
       4,
       {{97, 97}, {200, 37}, {5, 1}},
       0,
       1});
  add({"f32_Group7", Shape(KvElementType::kF32, 16, 2, 128, 128), 7, {{97, 97}, {200, 37}}, 0, 0});
  add({"f16_Group16", Shape(KvElementType::kF16, 16, 1, 128, 128), 16, {{97, 97}, {40, 9}}, 0, 0});
  add({"f16_Group40Dim256TakesTwoCtasPerKvHead",
       Shape(KvElementType::kF16, 16, 1, 256, 256),
       40,
       {{17, 17}, {40, 3}},
       0,
       0});
  add({"f32_Group64Dim64",
       Shape(KvElementType::kF32, 16, 1, 64, 64),
       64,
       {{17, 17}, {33, 2}},
       0,
       0});
  add({"f32_Group96Dim64TakesTwoCtasPerKvHead",
       Shape(KvElementType::kF32, 16, 1, 64, 64),
       96,
       {{9, 9}},
       0,
       0});
  add({"f32_UnequalHeadDims",
       Shape(KvElementType::kF32, 16, 2, 96, 40),
       4,
       {{97, 97}, {200, 37}},
       0,
       0});
  add({"f16_OddHeadDims",
       Shape(KvElementType::kF16, 1, 1, 200, 130),
       4,
       {{97, 97}, {60, 21}},
       7,
       0});
  add({"f16_SmallHeadDims",
       Shape(KvElementType::kF16, 16, 3, 16, 8),
       2,
       {{97, 97}, {60, 21}},
       0,
       0});
  add({"f32_SequencesWithoutQueriesAreSkipped",
       Shape(KvElementType::kF32, 16, 2, 64, 64),
       4,
       {{10, 0}, {97, 97}, {30, 0}},
       0,
       0});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Sweep, PagedAttentionPrefill, ::testing::ValuesIn(PrefillCases()),
                         [](const ::testing::TestParamInfo<PrefillCase>& info) {
                           return info.param.name;
                         });

TEST(PagedAttentionPrefillLargeCache, BlocksPastTwoToThe32ElementsAreAddressedIn64Bits) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const CacheShape shape = paged_test::LargeCacheShape();
  const PrefillCase c{"large", shape, 4, {{97, 97}, {1000, 40}, {4097, 17}}, 0, 0};
  const int64_t first_used_block = paged_test::kLargeCacheBlocks - (7 + 63 + 257);
  ASSERT_GT(first_used_block * shape.block_size * shape.num_kv_heads * shape.head_dim_k,
            int64_t{1} << 32);
  if (!paged_test::DeviceHasFreeBytes(paged_test::LargeCacheBytes() + (int64_t{1} << 30))) {
    GTEST_SKIP() << "needs " << paged_test::LargeCacheBytes() / (1 << 30) + 1
                 << " GiB of free device memory";
  }
  PagedKvCache cache(shape, Contexts(c.seqs), paged_test::kLargeCacheBlocks, BlockOrder::kTop,
                     /*seed=*/47);
  ASSERT_TRUE(cache.ok()) << "device allocation or upload failed";
  CheckPrefill(c, cache, /*seed=*/53);
}

TEST(PagedAttentionPrefillLaunch, RejectsInvalidShapesWithoutLaunching) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  test::DeviceBuffer<float> dummy(4096);
  test::DeviceBuffer<int32_t> ints(16);
  ASSERT_TRUE(dummy.ok() && ints.ok());
  PagedAttentionPrefillArgs args;
  args.kv.k = dummy.get();
  args.kv.v = dummy.get();
  args.kv.dtype = KvElementType::kF32;
  args.kv.num_kv_heads = 2;
  args.kv.head_dim_k = 64;
  args.kv.head_dim_v = 64;
  args.kv.block_size = 16;
  args.q = dummy.get();
  args.out = dummy.get();
  args.cu_seqlens_q = ints.get();
  args.block_tables = ints.get();
  args.block_table_offsets = ints.get();
  args.context_lens = ints.get();
  args.num_seqs = 1;
  args.max_query_len = 1;
  args.num_heads = 4;
  const int kInvalid = static_cast<int>(cudaErrorInvalidValue);

  PagedAttentionPrefillArgs bad = args;
  bad.kv.num_kv_heads = 4;
  bad.num_heads = 6;  // not a multiple of the KV heads
  EXPECT_EQ(LaunchPagedAttentionPrefill(bad, nullptr), kInvalid);
  bad = args;
  bad.kv.head_dim_v = 0;
  EXPECT_EQ(LaunchPagedAttentionPrefill(bad, nullptr), kInvalid);
  bad = args;
  bad.kv.dtype = static_cast<KvElementType>(7);
  EXPECT_EQ(LaunchPagedAttentionPrefill(bad, nullptr), kInvalid);
  bad = args;
  bad.cu_seqlens_q = nullptr;
  EXPECT_EQ(LaunchPagedAttentionPrefill(bad, nullptr), kInvalid);
  bad = args;
  bad.sliding_window = -1;
  EXPECT_EQ(LaunchPagedAttentionPrefill(bad, nullptr), kInvalid);
  bad = args;
  bad.num_seqs = 0;
  EXPECT_EQ(LaunchPagedAttentionPrefill(bad, nullptr), 0) << "nothing to do";
}

}  // namespace
}  // namespace strata::kernels
