// CudaBackend against CpuBackend on the same synthetic models: logits within stated
// tolerances, greedy tokens identical, the same INVALID_ARGUMENT answers. Every test here needs
// a device and skips without one.
//
// Tolerances are on max |gpu - cpu| / max(1, max |cpu|) over a step's logits:
//   kExactTolerance (1e-3): paths whose weights are used exactly — fp32/fp16 weights (cuBLAS
//     fp32, or fp16 with split activations) and quantized weights through the quantized matmul
//     (up to 16 tokens a call). Differences are fp32 summation order, ~1e-5.
//   kFp16WeightTolerance (3e-2): quantized weights above 16 tokens, dequantized to fp16 for
//     cuBLAS (weights and activations rounded to 11 bits, ~2.5e-4 each).
#include "strata/backend/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "strata/backend/cpu/cpu_backend.h"
#include "strata/common/mapped_file.h"
#include "strata/model/gguf_file.h"
#include "unit/backend_cuda/greedy_driver.h"
#include "unit/backend_cuda/model_cases.h"
#include "unit/backend_cuda/synthetic_model.h"

namespace strata::backend::cuda {
namespace {

using model::GgmlType;
using testing::ArgMax;
using testing::CaseName;
using testing::Cases;
using testing::kBlocksPerSequence;
using testing::MakeSequences;
using testing::ModelCase;
using testing::Seq;

constexpr double kExactTolerance = 1e-3;
constexpr double kFp16WeightTolerance = 3e-2;
constexpr int32_t kBlockSize = 4;
constexpr int64_t kKvBudget = int64_t{8} << 20;

struct Backends {
  std::vector<uint8_t> bytes;  // mapped by `file`
  std::unique_ptr<model::GgufFile> file;
  std::unique_ptr<cpu::CpuBackend> cpu;
  std::unique_ptr<CudaBackend> gpu;
};

std::unique_ptr<Backends> MakeBackends(const ModelCase& c) {
  auto b = std::make_unique<Backends>();
  b->bytes = testing::BuildSyntheticModel(c.spec);
  auto file = model::GgufFile::Parse(MappedFile::FromBytes(b->bytes));
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return nullptr;
  b->file = std::make_unique<model::GgufFile>(std::move(*file));
  cpu::CpuBackendOptions co;
  co.num_threads = 4;
  co.kv_budget_bytes = kKvBudget;
  co.block_size = kBlockSize;
  auto cpu = cpu::CpuBackend::Create(*b->file, co);
  EXPECT_TRUE(cpu.ok()) << cpu.status().ToString();
  if (!cpu.ok()) return nullptr;
  b->cpu = std::move(*cpu);
  CudaBackendOptions go;
  go.kv_budget_bytes = kKvBudget;
  go.block_size = kBlockSize;
  go.cuda_graphs = c.graphs;
  auto gpu = CudaBackend::Create(*b->file, go);
  EXPECT_TRUE(gpu.ok()) << gpu.status().ToString();
  if (!gpu.ok()) return nullptr;
  b->gpu = std::move(*gpu);
  return b;
}

// max |got - want| / max(1, max |want|), with the index of the worst element.
double RelativeDiff(const std::vector<float>& got, const std::vector<float>& want, size_t* worst) {
  double scale = 1.0;
  for (float w : want) scale = std::max(scale, static_cast<double>(std::fabs(w)));
  double diff = 0.0;
  *worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i]));
    if (!(d <= diff)) {  // NaN counts as worst
      diff = std::isnan(d) ? INFINITY : d;
      *worst = i;
    }
  }
  return diff / scale;
}

// Runs steps until every sequence has generated `steps` tokens: prompts in chunks (staggered
// by one step per sequence), then decodes, mixed in the same batches. Both backends get the
// same batches; the CPU's greedy token is appended. Checks the logits of every step against
// `tolerance` and, with `same_tokens`, that the GPU's greedy token equals the CPU's.
void DriveAndCompare(Backends& b, std::vector<Seq> seqs, int steps, double tolerance,
                     bool same_tokens, const std::string& what) {
  const int64_t vocab = b.cpu->config().vocab_size;
  double worst_diff = 0.0;
  int token_mismatches = 0;
  for (int64_t step = 0;; ++step) {
    std::vector<size_t> owners;  // sequence of each slice
    const Batch batch = NextBatch(seqs, step, steps, &owners);
    if (batch.sequences.empty()) break;
    std::vector<float> want;
    std::vector<float> got;
    Status cs = b.cpu->Forward(batch, &want);
    ASSERT_TRUE(cs.ok()) << cs.ToString();
    Status gs = b.gpu->Forward(batch, &got);
    ASSERT_TRUE(gs.ok()) << what << " step " << step << ": " << gs.ToString();
    ASSERT_EQ(got.size(), want.size()) << what << " step " << step;
    size_t worst = 0;
    const double diff = RelativeDiff(got, want, &worst);
    worst_diff = std::max(worst_diff, diff);
    ASSERT_LE(diff, tolerance) << what << " step " << step << ": worst logit " << worst << " (row "
                               << worst / vocab << ", token " << worst % vocab << "): gpu "
                               << got[worst] << " cpu " << want[worst];
    int64_t row = 0;
    for (size_t i = 0; i < batch.sequences.size(); ++i) {
      if (batch.sequences[i].logits == LogitsWanted::kNone) continue;
      const int32_t cpu_token = ArgMax(want.data() + row * vocab, vocab);
      const int32_t gpu_token = ArgMax(got.data() + row * vocab, vocab);
      if (cpu_token != gpu_token) ++token_mismatches;
      if (same_tokens) {
        ASSERT_EQ(gpu_token, cpu_token) << what << " step " << step << " sequence " << owners[i]
                                        << " token " << seqs[owners[i]].generated;
      }
      ++row;
    }
    Advance(batch, owners, want, vocab, &seqs);
  }
  ::testing::Test::RecordProperty("worst_relative_logit_diff", std::to_string(worst_diff));
  ::testing::Test::RecordProperty("greedy_token_mismatches", token_mismatches);
}

class CudaBackendVsCpu : public ::testing::TestWithParam<ModelCase> {
 protected:
  void SetUp() override {
    if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
    backends_ = MakeBackends(GetParam());
    ASSERT_NE(backends_, nullptr);
  }
  std::unique_ptr<Backends> backends_;
};

// Up to 16 tokens per step (the quantized matmul's range): greedy tokens identical to the
// CPU's over 64 generated tokens per sequence, prefill chunks mixed with decodes, decode
// batches of 3, 2 and 1 sequences (graph buckets 4, 2, 1, padded).
TEST_P(CudaBackendVsCpu, GreedyTokensMatchOver64StepsWithMixedBatches) {
  const int64_t vocab = backends_->cpu->config().vocab_size;
  DriveAndCompare(*backends_, MakeSequences({5, 9, 12}, {5, 6, 8}, vocab), 64, kExactTolerance,
                  /*same_tokens=*/true, GetParam().name);
}

// Large steps: a 20-sequence prefill of ~300 tokens in one batch and 20-sequence decodes
// (graph bucket 32), which take the cuBLAS paths. Token choices are the CPU's.
TEST_P(CudaBackendVsCpu, LogitsMatchForLargeBatches) {
  const int64_t vocab = backends_->cpu->config().vocab_size;
  const bool quantized = testing::IsQuantized(GetParam().spec.weight_type);
  DriveAndCompare(*backends_, testing::WideSequences(vocab), 8,
                  quantized ? kFp16WeightTolerance : kExactTolerance,
                  /*same_tokens=*/!quantized, GetParam().name);
}

// Logits of every row (LogitsWanted::kAll) of a prefill, and no rows for kNone.
TEST_P(CudaBackendVsCpu, AllRowsOfAPrefillMatch) {
  Backends& b = *backends_;
  const int64_t vocab = b.cpu->config().vocab_size;
  std::vector<Seq> seqs = MakeSequences({13, 7}, {64}, vocab);
  Batch batch;
  batch.sequences.push_back({seqs[0].tokens, 0, seqs[0].blocks, LogitsWanted::kAll});
  batch.sequences.push_back({seqs[1].tokens, 0, seqs[1].blocks, LogitsWanted::kNone});
  std::vector<float> want;
  std::vector<float> got;
  ASSERT_TRUE(b.cpu->Forward(batch, &want).ok());
  Status s = b.gpu->Forward(batch, &got);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(got.size(), static_cast<size_t>(13 * vocab));
  ASSERT_EQ(want.size(), got.size());
  size_t worst = 0;
  const bool quantized = testing::IsQuantized(GetParam().spec.weight_type);
  // 20 tokens: quantized weights take the fp16 cuBLAS path.
  EXPECT_LE(RelativeDiff(got, want, &worst), quantized ? kFp16WeightTolerance : kExactTolerance)
      << "worst logit " << worst << ": gpu " << got[worst] << " cpu " << want[worst];
}

// A mixed step whose decode rows sit between prefill slices (the backend runs them first, on
// the decode kernel): the logits still come back in batch order, kAll rows and kNone slices
// included.
TEST_P(CudaBackendVsCpu, MixedStepWithDecodesBetweenPrefillsMatches) {
  Backends& b = *backends_;
  const int64_t vocab = b.cpu->config().vocab_size;
  std::vector<Seq> seqs = MakeSequences({6, 9, 5, 11, 7}, {64}, vocab);
  // Step 1: prefill sequences 1 and 3, so that they decode in step 2.
  Batch first;
  first.sequences.push_back({seqs[1].tokens, 0, seqs[1].blocks, LogitsWanted::kLast});
  first.sequences.push_back({seqs[3].tokens, 0, seqs[3].blocks, LogitsWanted::kLast});
  std::vector<float> want;
  std::vector<float> got;
  ASSERT_TRUE(b.cpu->Forward(first, &want).ok());
  ASSERT_TRUE(b.gpu->Forward(first, &got).ok());
  seqs[1].tokens.push_back(ArgMax(want.data(), vocab));
  seqs[3].tokens.push_back(ArgMax(want.data() + vocab, vocab));
  auto last = [](const Seq& q) { return std::span<const int32_t>(q.tokens).last(1); };
  Batch mixed;
  mixed.sequences.push_back({seqs[0].tokens, 0, seqs[0].blocks, LogitsWanted::kAll});
  mixed.sequences.push_back({last(seqs[1]), 9, seqs[1].blocks, LogitsWanted::kLast});
  mixed.sequences.push_back({seqs[2].tokens, 0, seqs[2].blocks, LogitsWanted::kNone});
  mixed.sequences.push_back({last(seqs[3]), 11, seqs[3].blocks, LogitsWanted::kLast});
  mixed.sequences.push_back({seqs[4].tokens, 0, seqs[4].blocks, LogitsWanted::kLast});
  ASSERT_TRUE(b.cpu->Forward(mixed, &want).ok());
  Status s = b.gpu->Forward(mixed, &got);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(want.size(), static_cast<size_t>((6 + 1 + 1 + 1) * vocab));
  ASSERT_EQ(got.size(), want.size());
  size_t worst = 0;
  // 30 tokens: quantized weights take the fp16 cuBLAS path.
  const bool quantized = testing::IsQuantized(GetParam().spec.weight_type);
  EXPECT_LE(RelativeDiff(got, want, &worst), quantized ? kFp16WeightTolerance : kExactTolerance)
      << "worst logit " << worst << " (row " << worst / vocab << "): gpu " << got[worst] << " cpu "
      << want[worst];
  for (int64_t row = 0; row < 9; ++row) {
    if (!quantized) {
      EXPECT_EQ(ArgMax(got.data() + row * vocab, vocab), ArgMax(want.data() + row * vocab, vocab))
          << "row " << row;
    }
  }
}

// The same malformed batches are INVALID_ARGUMENT on both backends, and the GPU backend keeps
// working afterwards.
TEST_P(CudaBackendVsCpu, MalformedBatchesAreInvalidArgumentLikeOnTheCpu) {
  Backends& b = *backends_;
  const int32_t vocab = static_cast<int32_t>(b.cpu->config().vocab_size);
  const int64_t context = b.cpu->config().context_length;
  const int32_t pool = std::min(b.cpu->kv_geometry().num_blocks, b.gpu->kv_geometry().num_blocks);
  std::vector<int32_t> ok_tokens = {1, 2, 3};
  std::vector<int32_t> bad_high = {1, vocab};
  std::vector<int32_t> bad_low = {-1};
  std::vector<int32_t> none;
  std::vector<kv::BlockId> blocks(kBlocksPerSequence);
  for (int i = 0; i < kBlocksPerSequence; ++i) blocks[i] = i;
  std::vector<kv::BlockId> one_block = {0};
  std::vector<kv::BlockId> outside = {0, pool};
  std::vector<kv::BlockId> negative = {-1};

  std::vector<std::pair<std::string, Batch>> cases;
  cases.push_back({"empty batch", Batch{}});
  auto single = [&](std::span<const int32_t> t, int64_t start, std::span<const kv::BlockId> ids) {
    Batch batch;
    batch.sequences.push_back({t, start, ids, LogitsWanted::kLast});
    return batch;
  };
  cases.push_back({"no tokens", single(none, 0, blocks)});
  cases.push_back({"negative start", single(ok_tokens, -1, blocks)});
  cases.push_back({"beyond the context", single(ok_tokens, context - 2, blocks)});
  cases.push_back({"too few blocks", single(ok_tokens, 2, one_block)});
  cases.push_back({"block outside the pool", single(ok_tokens, 0, outside)});
  cases.push_back({"negative block", single(ok_tokens, 0, negative)});
  cases.push_back({"token past the vocab", single(bad_high, 0, blocks)});
  cases.push_back({"negative token", single(bad_low, 0, blocks)});
  {
    Batch mixed = single(ok_tokens, 0, blocks);
    mixed.sequences.push_back({bad_low, 5, blocks, LogitsWanted::kLast});
    cases.push_back({"bad second sequence", mixed});
  }
  for (const auto& [name, batch] : cases) {
    std::vector<float> logits;
    const Status cs = b.cpu->Forward(batch, &logits);
    const Status gs = b.gpu->Forward(batch, &logits);
    EXPECT_EQ(cs.code(), StatusCode::kInvalidArgument) << name << ": " << cs.ToString();
    EXPECT_EQ(gs.code(), StatusCode::kInvalidArgument) << name << ": " << gs.ToString();
  }
  std::vector<float> logits;
  const Status s = b.gpu->Forward(single(ok_tokens, 0, blocks), &logits);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(logits.size(), static_cast<size_t>(vocab));
}

TEST_P(CudaBackendVsCpu, ReportsItsKvPoolAndMemory) {
  const CudaBackend& g = *backends_->gpu;
  const KvGeometry kv = g.kv_geometry();
  const model::ModelConfig& c = g.config();
  EXPECT_EQ(kv.block_size, kBlockSize);
  EXPECT_EQ(kv.bytes_per_block,
            c.n_layers * kBlockSize * c.n_kv_heads * (c.head_dim_k + c.head_dim_v) * 2);
  EXPECT_EQ(kv.num_blocks, kKvBudget / kv.bytes_per_block);
  EXPECT_EQ(g.kv_bytes(), kv.num_blocks * kv.bytes_per_block);
  EXPECT_GT(g.weight_bytes(), 0);
  EXPECT_EQ(c.vocab_size, backends_->cpu->config().vocab_size);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaBackendVsCpu, ::testing::ValuesIn(Cases()), CaseName);

}  // namespace
}  // namespace strata::backend::cuda
