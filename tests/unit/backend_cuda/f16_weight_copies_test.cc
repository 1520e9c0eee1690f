// CudaBackend with persistent fp16 copies of its quantized weights (f16_weight_copies on)
// against the same model without them (off: every call of more than 16 tokens dequantizes into
// the workspace). The copies are made by the per-call path's own kernel, so the logits must be
// bit-identical, for prefills and for wide decode steps, eager and in CUDA graphs. Every test
// here needs a device and skips without one.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "strata/backend/cuda/cuda_backend.h"
#include "unit/backend_cuda/greedy_driver.h"
#include "unit/backend_cuda/model_cases.h"
#include "unit/backend_cuda/synthetic_model.h"

namespace strata::backend::cuda {
namespace {

using testing::CaseName;
using testing::ModelCase;
using testing::Seq;

constexpr int32_t kBlockSize = 4;
constexpr int64_t kKvBudget = int64_t{8} << 20;

std::vector<ModelCase> QuantizedCases() {
  std::vector<ModelCase> out;
  for (const ModelCase& c : testing::Cases()) {
    if (testing::IsQuantized(c.spec.weight_type)) out.push_back(c);
  }
  return out;
}

std::unique_ptr<CudaBackend> Make(const model::GgufFile& file, bool graphs,
                                  F16WeightCopies copies) {
  CudaBackendOptions o;
  o.kv_budget_bytes = kKvBudget;
  o.block_size = kBlockSize;
  o.cuda_graphs = graphs;
  o.f16_weight_copies = copies;
  auto b = CudaBackend::Create(file, o);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return b.ok() ? std::move(*b) : nullptr;
}

// Index of the first element whose bits differ; -1 when none does.
int64_t FirstDifference(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<int64_t>(i);
  }
  return -1;
}

class CudaBackendF16Copies : public ::testing::TestWithParam<ModelCase> {
 protected:
  void SetUp() override {
    if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
    model_ = testing::OpenSyntheticModel(GetParam().spec);
    ASSERT_NE(model_, nullptr);
    with_ = Make(*model_->file, GetParam().graphs, F16WeightCopies::kOn);
    without_ = Make(*model_->file, GetParam().graphs, F16WeightCopies::kOff);
    ASSERT_NE(with_, nullptr);
    ASSERT_NE(without_, nullptr);
  }

  // Runs `batch` on both backends and expects the same logits, bit for bit.
  void ExpectSameLogits(const Batch& batch, const std::string& what, std::vector<float>* logits) {
    std::vector<float> got;
    const Status a = with_->Forward(batch, &got);
    ASSERT_TRUE(a.ok()) << what << ": " << a.ToString();
    const Status b = without_->Forward(batch, logits);
    ASSERT_TRUE(b.ok()) << what << ": " << b.ToString();
    ASSERT_EQ(got.size(), logits->size()) << what;
    const int64_t vocab = with_->config().vocab_size;
    const int64_t i = FirstDifference(got, *logits);
    ASSERT_EQ(i, -1) << what << ": logit " << i << " (row " << i / vocab << ", token " << i % vocab
                     << ") is " << got[i] << " with the copies and " << (*logits)[i] << " without";
  }

  std::unique_ptr<testing::SyntheticModelFile> model_;
  std::unique_ptr<CudaBackend> with_;
  std::unique_ptr<CudaBackend> without_;
};

// Every row of a 40-token prefill (every matmul above 16 tokens), then the wide schedule: 20
// prompts (~300 tokens) in one step, then 20-sequence decode steps (20 tokens a matmul; graph
// bucket 32 with graphs on: captured, then replayed).
TEST_P(CudaBackendF16Copies, LogitsAreBitIdenticalToDequantizingPerCall) {
  const int64_t vocab = with_->config().vocab_size;
  std::vector<float> logits;
  {
    std::vector<Seq> one = testing::MakeSequences({40}, {64}, vocab);
    Batch prefill;
    prefill.sequences.push_back({one[0].tokens, 0, one[0].blocks, LogitsWanted::kAll});
    ExpectSameLogits(prefill, "40-token prefill", &logits);
    if (HasFatalFailure()) return;
    ASSERT_EQ(logits.size(), static_cast<size_t>(40 * vocab));
  }
  std::vector<Seq> seqs = testing::WideSequences(vocab);
  constexpr int kSteps = 4;
  int64_t wide_decodes = 0;
  for (int64_t step = 0;; ++step) {
    std::vector<size_t> owners;
    const Batch batch = testing::NextBatch(seqs, step, kSteps, &owners);
    if (batch.sequences.empty()) break;
    int64_t tokens = 0;
    for (const SequenceSlice& s : batch.sequences) tokens += static_cast<int64_t>(s.tokens.size());
    if (tokens == static_cast<int64_t>(batch.sequences.size()) && tokens > 16) ++wide_decodes;
    ExpectSameLogits(batch, "wide schedule step " + std::to_string(step), &logits);
    if (HasFatalFailure()) return;
    testing::Advance(batch, owners, logits, vocab, &seqs);
  }
  // The schedule did reach the fp16 path in decode steps (a graph's capture and its replays).
  EXPECT_GE(wide_decodes, 2);
}

TEST_P(CudaBackendF16Copies, ReportsTheCopiesInItsMemoryAndDescription) {
  const model::ModelConfig& c = with_->config();
  const int64_t per_layer = c.n_heads * c.head_dim_k * c.n_embd +     // wq
                            c.n_kv_heads * c.head_dim_k * c.n_embd +  // wk
                            c.n_kv_heads * c.head_dim_v * c.n_embd +  // wv
                            c.n_embd * c.n_heads * c.head_dim_v +     // wo
                            3 * c.n_ff * c.n_embd;                    // gate, up, down
  // The output (once, also when it is the tied token embedding); fp16: 2 bytes a weight.
  const int64_t want = 2 * (c.n_layers * per_layer + c.vocab_size * c.n_embd);
  EXPECT_EQ(with_->f16_copy_bytes(), want);
  EXPECT_EQ(without_->f16_copy_bytes(), 0);
  EXPECT_EQ(with_->weight_bytes(), without_->weight_bytes() + want);
  // The KV pool is the budget either way.
  EXPECT_EQ(with_->kv_bytes(), without_->kv_bytes());

  const std::string on = with_->Describe();
  const std::string off = without_->Describe();
  EXPECT_NE(on.find(", fp16 weight copies "), std::string::npos) << on;
  EXPECT_EQ(on.back(), ')') << on;
  EXPECT_NE(off.find(", no fp16 weight copies (off))"), std::string::npos) << off;

  // auto, with a small model and a device's worth of free memory: copies.
  auto automatic = Make(*model_->file, GetParam().graphs, F16WeightCopies::kAuto);
  ASSERT_NE(automatic, nullptr);
  EXPECT_EQ(automatic->f16_copy_bytes(), want) << automatic->Describe();
}

INSTANTIATE_TEST_SUITE_P(Models, CudaBackendF16Copies, ::testing::ValuesIn(QuantizedCases()),
                         CaseName);

// A model with nothing quantized has nothing to copy, whatever the setting, and says nothing.
TEST(CudaBackendF16CopiesCreate, AModelWithNothingQuantizedCopiesAndSaysNothing) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  testing::SyntheticSpec spec;
  spec.weight_type = model::GgmlType::kF16;
  auto m = testing::OpenSyntheticModel(spec);
  ASSERT_NE(m, nullptr);
  for (F16WeightCopies copies :
       {F16WeightCopies::kAuto, F16WeightCopies::kOn, F16WeightCopies::kOff}) {
    auto b = Make(*m->file, /*graphs=*/false, copies);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->f16_copy_bytes(), 0);
    EXPECT_EQ(b->Describe().find("fp16 weight copies"), std::string::npos) << b->Describe();
  }
}

// `on` that cannot fit beside the KV budget is FAILED_PRECONDITION saying what to change; the
// device is left usable.
TEST(CudaBackendF16CopiesCreate, OnThatDoesNotFitIsFailedPrecondition) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  testing::SyntheticSpec spec;
  spec.weight_type = model::GgmlType::kQ4_K;
  auto m = testing::OpenSyntheticModel(spec);
  ASSERT_NE(m, nullptr);
  CudaBackendOptions o;
  o.kv_budget_bytes = int64_t{1} << 50;  // a petabyte
  o.f16_weight_copies = F16WeightCopies::kOn;
  auto b = CudaBackend::Create(*m->file, o);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition) << b.status().ToString();
  EXPECT_NE(b.status().message().find("fp16 copies"), std::string::npos) << b.status().message();
  EXPECT_NE(b.status().message().find("--cuda-f16-weights"), std::string::npos);
  EXPECT_NE(Make(*m->file, /*graphs=*/false, F16WeightCopies::kOn), nullptr);
}

}  // namespace
}  // namespace strata::backend::cuda
