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
#include <string>
#include <vector>

#include "strata/backend/cpu/cpu_backend.h"
#include "strata/common/mapped_file.h"
#include "strata/model/gguf_file.h"
#include "unit/backend_cuda/synthetic_model.h"

namespace strata::backend::cuda {
namespace {

using model::GgmlType;

constexpr double kExactTolerance = 1e-3;
constexpr double kFp16WeightTolerance = 3e-2;
constexpr int32_t kBlockSize = 4;
constexpr int64_t kKvBudget = int64_t{8} << 20;
constexpr int64_t kBlocksPerSequence = 40;  // 160 positions, more than any test's context

struct ModelCase {
  std::string name;
  testing::SyntheticSpec spec;
  bool graphs = true;
};

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

int32_t ArgMax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
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

struct Seq {
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int64_t prompt_len = 0;
  int64_t computed = 0;  // tokens whose KV is written
  int64_t chunk = 0;     // prompt tokens per prefill chunk
  int64_t first_step = 0;
  int generated = 0;
  std::vector<kv::BlockId> blocks;
};

std::vector<Seq> MakeSequences(const std::vector<int64_t>& prompt_lens,
                               const std::vector<int64_t>& chunks, int64_t vocab) {
  std::vector<Seq> seqs(prompt_lens.size());
  for (size_t s = 0; s < seqs.size(); ++s) {
    Seq& q = seqs[s];
    q.prompt_len = prompt_lens[s];
    for (int64_t k = 0; k < q.prompt_len; ++k) {
      q.tokens.push_back(static_cast<int32_t>((s * 31 + k * 7 + 1) % vocab));
    }
    q.chunk = chunks[s % chunks.size()];
    q.first_step = static_cast<int64_t>(s);
    for (int64_t i = 0; i < kBlocksPerSequence; ++i) {
      q.blocks.push_back(static_cast<kv::BlockId>(s * kBlocksPerSequence + i));
    }
  }
  return seqs;
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
    Batch batch;
    std::vector<size_t> owners;  // sequence of each slice
    for (size_t s = 0; s < seqs.size(); ++s) {
      Seq& q = seqs[s];
      if (q.generated >= steps || step < q.first_step) continue;
      SequenceSlice slice;
      if (q.computed < q.prompt_len) {
        const int64_t n = std::min(q.chunk, q.prompt_len - q.computed);
        slice.tokens = std::span<const int32_t>(q.tokens.data() + q.computed, n);
        slice.logits = q.computed + n == q.prompt_len ? LogitsWanted::kLast : LogitsWanted::kNone;
      } else {
        slice.tokens = std::span<const int32_t>(q.tokens.data() + q.computed, 1);
        slice.logits = LogitsWanted::kLast;
      }
      slice.start_pos = q.computed;
      slice.block_ids = q.blocks;
      batch.sequences.push_back(slice);
      owners.push_back(s);
    }
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
      Seq& q = seqs[owners[i]];
      q.computed += static_cast<int64_t>(batch.sequences[i].tokens.size());
      if (batch.sequences[i].logits == LogitsWanted::kNone) continue;
      const int32_t cpu_token = ArgMax(want.data() + row * vocab, vocab);
      const int32_t gpu_token = ArgMax(got.data() + row * vocab, vocab);
      if (cpu_token != gpu_token) ++token_mismatches;
      if (same_tokens) {
        ASSERT_EQ(gpu_token, cpu_token)
            << what << " step " << step << " sequence " << owners[i] << " token " << q.generated;
      }
      q.tokens.push_back(cpu_token);
      ++q.generated;
      ++row;
    }
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
  std::vector<int64_t> lens;
  for (int s = 0; s < 20; ++s) lens.push_back(3 + (s * 7) % 29);
  std::vector<Seq> seqs = MakeSequences(lens, {64}, vocab);
  for (Seq& q : seqs) q.first_step = 0;  // every prompt in the first step
  const bool quantized = GetParam().spec.weight_type != GgmlType::kF32 &&
                         GetParam().spec.weight_type != GgmlType::kF16;
  DriveAndCompare(*backends_, std::move(seqs), 8,
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
  const bool quantized = GetParam().spec.weight_type != GgmlType::kF32 &&
                         GetParam().spec.weight_type != GgmlType::kF16;
  // 20 tokens: quantized weights take the fp16 cuBLAS path.
  EXPECT_LE(RelativeDiff(got, want, &worst), quantized ? kFp16WeightTolerance : kExactTolerance)
      << "worst logit " << worst << ": gpu " << got[worst] << " cpu " << want[worst];
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

std::vector<ModelCase> Cases() {
  std::vector<ModelCase> cases;
  for (bool graphs : {true, false}) {
    const std::string suffix = graphs ? "_graphs" : "_eager";
    for (GgmlType t :
         {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
      ModelCase c;
      c.spec.weight_type = t;
      c.spec.seed = 7 + static_cast<uint32_t>(t);
      c.graphs = graphs;
      c.name = "llama_" + std::string(model::GgmlTypeName(t)) + suffix;
      cases.push_back(c);
    }
    for (GgmlType t : {GgmlType::kF16, GgmlType::kQ4_K}) {
      // Gemma 3: sliding-window layers (0 and 1; 2 is global), q/k norms, post norms, GeGLU,
      // embedding scale, a tied output and a soft-cap.
      ModelCase c;
      c.spec.arch = "gemma3";
      c.spec.weight_type = t;
      c.spec.layers = 3;
      c.spec.sliding_window = 8;
      c.spec.softcap = 5.0f;
      c.spec.tied_output = true;
      c.spec.seed = 99 + static_cast<uint32_t>(t);
      c.graphs = graphs;
      c.name = "gemma3_" + std::string(model::GgmlTypeName(t)) + suffix;
      cases.push_back(c);
    }
  }
  return cases;
}

std::string CaseName(const ::testing::TestParamInfo<ModelCase>& info) {
  std::string name = info.param.name;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Models, CudaBackendVsCpu, ::testing::ValuesIn(Cases()), CaseName);

}  // namespace
}  // namespace strata::backend::cuda
