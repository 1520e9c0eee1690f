// Host-only: the per-step inputs the CUDA backend derives from a batch (no device needed).
#include "backend/cuda/step_inputs.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

namespace strata::backend::cuda {
namespace {

template <typename T>
const T* Field(const std::vector<uint8_t>& host, int64_t offset) {
  return reinterpret_cast<const T*>(host.data() + offset);
}

struct TwoSequenceBatch {
  std::vector<int32_t> prompt = {5, 6, 7, 8, 9};   // positions 3..7 of a chunked prefill
  std::vector<int32_t> decode = {11};              // position 9
  std::vector<kv::BlockId> blocks_a = {7, 2, 30};  // block size 4: positions 0..11
  std::vector<kv::BlockId> blocks_b = {4, 0, 9, 12};
  Batch batch;
  TwoSequenceBatch() {
    batch.sequences.push_back({prompt, 3, blocks_a, LogitsWanted::kAll});
    batch.sequences.push_back({decode, 9, blocks_b, LogitsWanted::kLast});
  }
};

TEST(StepShape, CountsTokensRowsAndTheBlocksEachSequenceReaches) {
  TwoSequenceBatch b;
  const StepShape s = ShapeOfBatch(b.batch, 4);
  EXPECT_EQ(s.num_tokens, 6);
  EXPECT_EQ(s.num_seqs, 2);
  EXPECT_EQ(s.num_rows, 6);
  EXPECT_EQ(s.table_len, 2 + 3);  // ends 8 and 10 -> 2 and 3 blocks, not the 3 and 4 given
  EXPECT_EQ(s.max_query_len, 5);
  EXPECT_EQ(s.max_context, 10);
  EXPECT_FALSE(s.decode_only);
  b.batch.sequences.erase(b.batch.sequences.begin());
  EXPECT_TRUE(ShapeOfBatch(b.batch, 4).decode_only);
}

TEST(StepInputs, SlotsPositionsAndPackedBlockTablesFollowTheSequences) {
  TwoSequenceBatch b;
  const StepLayout layout = StepLayout::For(6, 2, 5);
  std::vector<uint8_t> host(layout.total_bytes, 0xee);
  const int64_t used = FillStepInputs(b.batch, 4, 2, layout, host.data());
  EXPECT_EQ(used, layout.block_table + 5 * 4);
  const int32_t* tokens = Field<int32_t>(host, layout.tokens);
  const int64_t* pos = Field<int64_t>(host, layout.positions);
  const int64_t* slots = Field<int64_t>(host, layout.slots);
  EXPECT_EQ(std::vector<int32_t>(tokens, tokens + 6), (std::vector<int32_t>{5, 6, 7, 8, 9, 11}));
  EXPECT_EQ(std::vector<int64_t>(pos, pos + 6), (std::vector<int64_t>{3, 4, 5, 6, 7, 9}));
  // slot = block_ids[pos / 4] * 4 + pos % 4.
  EXPECT_EQ(
      std::vector<int64_t>(slots, slots + 6),
      (std::vector<int64_t>{7 * 4 + 3, 2 * 4 + 0, 2 * 4 + 1, 2 * 4 + 2, 2 * 4 + 3, 9 * 4 + 1}));
  const int32_t* ctx = Field<int32_t>(host, layout.context_lens);
  const int32_t* offsets = Field<int32_t>(host, layout.table_offsets);
  const int32_t* cu = Field<int32_t>(host, layout.cu_seqlens);
  const int32_t* table = Field<int32_t>(host, layout.block_table);
  EXPECT_EQ(ctx[0], 8);
  EXPECT_EQ(ctx[1], 10);
  EXPECT_EQ(offsets[0], 0);
  EXPECT_EQ(offsets[1], 2);
  EXPECT_EQ(std::vector<int32_t>(cu, cu + 3), (std::vector<int32_t>{0, 5, 6}));
  EXPECT_EQ(std::vector<int32_t>(table, table + 5), (std::vector<int32_t>{7, 2, 4, 0, 9}));
}

TEST(StepInputs, PaddingSequencesTouchNoKvAndSeeNoContext) {
  std::vector<int32_t> t0 = {3};
  std::vector<int32_t> t1 = {4};
  std::vector<kv::BlockId> blocks0 = {1, 5};
  std::vector<kv::BlockId> blocks1 = {6};
  Batch batch;
  batch.sequences.push_back({t0, 6, blocks0, LogitsWanted::kLast});
  batch.sequences.push_back({t1, 0, blocks1, LogitsWanted::kLast});
  const StepLayout layout = StepLayout::For(4, 4, 4 * 8);
  std::vector<uint8_t> host(layout.total_bytes, 0xee);
  FillStepInputs(batch, 4, 4, layout, host.data());
  const int32_t* tokens = Field<int32_t>(host, layout.tokens);
  const int64_t* slots = Field<int64_t>(host, layout.slots);
  const int64_t* pos = Field<int64_t>(host, layout.positions);
  const int32_t* ctx = Field<int32_t>(host, layout.context_lens);
  const int32_t* cu = Field<int32_t>(host, layout.cu_seqlens);
  EXPECT_EQ(std::vector<int64_t>(slots, slots + 4),
            (std::vector<int64_t>{5 * 4 + 2, 6 * 4, -1, -1}));
  EXPECT_EQ(tokens[2], 0);
  EXPECT_EQ(tokens[3], 0);
  EXPECT_EQ(pos[3], 0);
  EXPECT_EQ(std::vector<int32_t>(ctx, ctx + 4), (std::vector<int32_t>{7, 1, 0, 0}));
  EXPECT_EQ(std::vector<int32_t>(cu, cu + 5), (std::vector<int32_t>{0, 1, 2, 3, 4}));
}

TEST(StepLayout, SectionsAre256ByteAlignedAndTheTableComesLast) {
  const StepLayout l = StepLayout::For(7, 3, 11);
  for (int64_t offset : {l.tokens, l.positions, l.slots, l.context_lens, l.table_offsets,
                         l.cu_seqlens, l.block_table}) {
    EXPECT_EQ(offset % 256, 0);
  }
  EXPECT_GT(l.block_table, l.cu_seqlens);
  EXPECT_GE(l.total_bytes, l.block_table + 11 * 4);
}

TEST(LogitRowRuns, MergesAdjacentWantedRowsAndSkipsUnwantedOnes) {
  std::vector<int32_t> three = {1, 2, 3};
  std::vector<int32_t> one = {4};
  std::vector<kv::BlockId> blocks = {0};
  Batch batch;
  batch.sequences.push_back({three, 0, blocks, LogitsWanted::kNone});  // rows 0-2: none
  batch.sequences.push_back({three, 0, blocks, LogitsWanted::kLast});  // row 5
  batch.sequences.push_back({three, 0, blocks, LogitsWanted::kAll});   // rows 6-8
  batch.sequences.push_back({one, 0, blocks, LogitsWanted::kLast});    // row 9
  batch.sequences.push_back({three, 0, blocks, LogitsWanted::kLast});  // row 12
  const std::vector<RowRun> runs = LogitRowRuns(batch);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].src, 5);
  EXPECT_EQ(runs[0].dst, 0);
  EXPECT_EQ(runs[0].count, 5);
  EXPECT_EQ(runs[1].src, 12);
  EXPECT_EQ(runs[1].dst, 5);
  EXPECT_EQ(runs[1].count, 1);
}

TEST(OrderDecodeFirst, RunsOneTokenSlicesFirstAndMapsLogitsBackToBatchOrder) {
  const std::vector<int32_t> p0 = {1, 2, 3};
  const std::vector<int32_t> d1 = {4};
  const std::vector<int32_t> p2 = {5, 6};
  const std::vector<int32_t> d3 = {7};
  const std::vector<int32_t> p4 = {8, 9, 10, 11};
  const std::vector<kv::BlockId> blocks = {0, 1, 2, 3};
  Batch batch;
  batch.sequences.push_back({p0, 0, blocks, LogitsWanted::kAll});   // logits rows 0..2
  batch.sequences.push_back({d1, 5, blocks, LogitsWanted::kLast});  // row 3
  batch.sequences.push_back({p2, 0, blocks, LogitsWanted::kNone});  // none
  batch.sequences.push_back({d3, 6, blocks, LogitsWanted::kLast});  // row 4
  batch.sequences.push_back({p4, 0, blocks, LogitsWanted::kLast});  // row 5
  const DecodeFirstStep step = OrderDecodeFirst(batch);
  ASSERT_EQ(step.batch.sequences.size(), 5u);
  EXPECT_EQ(step.num_decode, 2);
  // Run order: d1, d3, p0, p2, p4 -> token rows d1 0, d3 1, p0 2..4, p2 5..6, p4 7..10.
  EXPECT_EQ(step.batch.sequences[0].tokens.data(), d1.data());
  EXPECT_EQ(step.batch.sequences[1].tokens.data(), d3.data());
  EXPECT_EQ(step.batch.sequences[2].tokens.data(), p0.data());
  EXPECT_EQ(step.batch.sequences[3].tokens.data(), p2.data());
  EXPECT_EQ(step.batch.sequences[4].tokens.data(), p4.data());
  EXPECT_EQ(step.batch.sequences[1].start_pos, 6);
  // {src, dst, count}: d1 and d3 stay adjacent in both orders and merge.
  const std::vector<std::array<int64_t, 3>> want = {{0, 3, 2}, {2, 0, 3}, {10, 5, 1}};
  ASSERT_EQ(step.runs.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(step.runs[i].src, want[i][0]) << i;
    EXPECT_EQ(step.runs[i].dst, want[i][1]) << i;
    EXPECT_EQ(step.runs[i].count, want[i][2]) << i;
  }
}

TEST(OrderDecodeFirst, MergesRunsThatStayContiguousInBothOrders) {
  const std::vector<int32_t> d = {4};
  const std::vector<int32_t> p = {5, 6};
  const std::vector<kv::BlockId> blocks = {0, 1};
  Batch batch;
  batch.sequences.push_back({d, 3, blocks, LogitsWanted::kLast});
  batch.sequences.push_back({d, 4, blocks, LogitsWanted::kLast});
  batch.sequences.push_back({p, 0, blocks, LogitsWanted::kAll});
  const DecodeFirstStep step = OrderDecodeFirst(batch);
  EXPECT_EQ(step.num_decode, 2);
  ASSERT_EQ(step.runs.size(), 1u);
  EXPECT_EQ(step.runs[0].src, 0);
  EXPECT_EQ(step.runs[0].dst, 0);
  EXPECT_EQ(step.runs[0].count, 4);
}

}  // namespace
}  // namespace strata::backend::cuda
