// CreateBackend and the kind resolution behind --backend. The CPU cases and the answers on a
// machine without a device run everywhere; the CUDA cases run where a device is visible (the
// GPU check runs this binary there) and skip elsewhere.
#include "strata/backend/backend_factory.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "strata/common/mapped_file.h"
#include "strata/model/gguf_file.h"
#include "support/tiny_llama.h"
#include "unit/backend_cuda/synthetic_model.h"

namespace strata::backend {
namespace {

struct ModelFile {
  std::vector<uint8_t> bytes;
  std::unique_ptr<model::GgufFile> file;
};

std::unique_ptr<ModelFile> TinyModel() {
  auto m = std::make_unique<ModelFile>();
  m->bytes = testing::tiny_llama::BuildModel();
  auto file = model::GgufFile::Parse(MappedFile::FromBytes(m->bytes));
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return nullptr;
  m->file = std::make_unique<model::GgufFile>(std::move(*file));
  return m;
}

TEST(BackendKind, ParsesTheThreeNamesAndRefusesOthersNamingTheChoices) {
  for (BackendKind kind : {BackendKind::kAuto, BackendKind::kCpu, BackendKind::kCuda}) {
    StatusOr<BackendKind> parsed = ParseBackendKind(BackendKindName(kind));
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(*parsed, kind);
  }
  for (const char* bad : {"", "CPU", "gpu", "cuda0", "auto "}) {
    StatusOr<BackendKind> parsed = ParseBackendKind(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("auto, cpu or cuda"), std::string::npos);
  }
}

TEST(F16WeightCopies, ParsesTheThreeNamesAndRefusesOthersNamingTheChoices) {
  for (cuda::F16WeightCopies copies :
       {cuda::F16WeightCopies::kAuto, cuda::F16WeightCopies::kOn, cuda::F16WeightCopies::kOff}) {
    StatusOr<cuda::F16WeightCopies> parsed = ParseF16WeightCopies(F16WeightCopiesName(copies));
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(*parsed, copies);
  }
  for (const char* bad : {"", "On", "true", "yes", "auto "}) {
    StatusOr<cuda::F16WeightCopies> parsed = ParseF16WeightCopies(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("auto, on or off"), std::string::npos);
  }
}

TEST(BackendKind, CpuStaysCpuAndAutoFollowsTheDevice) {
  EXPECT_EQ(*ResolveBackendKind(BackendKind::kCpu), BackendKind::kCpu);
  EXPECT_EQ(*ResolveBackendKind(BackendKind::kAuto),
            CudaBackendUsable() ? BackendKind::kCuda : BackendKind::kCpu);
  EXPECT_FALSE(CudaBackendUsable() && !CudaBackendBuilt());
}

TEST(BackendKind, CudaWithoutADeviceIsOneClearFailedPrecondition) {
  if (CudaBackendUsable()) GTEST_SKIP() << "this machine can run the CUDA backend";
  StatusOr<BackendKind> kind = ResolveBackendKind(BackendKind::kCuda);
  ASSERT_FALSE(kind.ok());
  EXPECT_EQ(kind.status().code(), StatusCode::kFailedPrecondition);
  const std::string& message = kind.status().message();
  EXPECT_EQ(message.find('\n'), std::string::npos);
  EXPECT_NE(message.find(CudaBackendBuilt() ? "no CUDA device" : "no CUDA backend"),
            std::string::npos)
      << message;

  auto m = TinyModel();
  ASSERT_NE(m, nullptr);
  BackendSpec spec;
  spec.kind = BackendKind::kCuda;
  StatusOr<std::unique_ptr<Backend>> b = CreateBackend(*m->file, spec);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition);
}

TEST(CreateBackend, CpuRunsTheModelAndDescribesItself) {
  auto m = TinyModel();
  ASSERT_NE(m, nullptr);
  BackendSpec spec;
  spec.kind = BackendKind::kCpu;
  spec.threads = 1;
  spec.block_size = 4;
  StatusOr<std::unique_ptr<Backend>> b = CreateBackend(*m->file, spec);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*b)->name(), "cpu");
  EXPECT_EQ((*b)->Describe().rfind("cpu (", 0), 0u) << (*b)->Describe();
  EXPECT_NE((*b)->Describe().find("1 threads"), std::string::npos) << (*b)->Describe();
  EXPECT_EQ((*b)->kv_geometry().block_size, 4);

  const std::vector<int32_t> tokens = {1, 5, 9};
  const std::vector<kv::BlockId> blocks = {0};
  Batch batch;
  batch.sequences.push_back({tokens, 0, blocks, LogitsWanted::kLast});
  std::vector<float> logits;
  ASSERT_TRUE((*b)->Forward(batch, &logits).ok());
  EXPECT_EQ(static_cast<int64_t>(logits.size()), (*b)->config().vocab_size);
}

TEST(CreateBackend, ZeroKvBudgetIsTheCpuDefaultAndAnExplicitOneIsKept) {
  auto m = TinyModel();
  ASSERT_NE(m, nullptr);
  BackendSpec spec;
  spec.kind = BackendKind::kCpu;
  spec.threads = 1;
  auto whole = CreateBackend(*m->file, spec);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const KvGeometry g = (*whole)->kv_geometry();
  EXPECT_EQ(g.num_blocks, kDefaultCpuKvBudgetBytes / g.bytes_per_block);

  spec.kv_budget_bytes = g.bytes_per_block * 3;
  auto small = CreateBackend(*m->file, spec);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ((*small)->kv_geometry().num_blocks, 3);

  spec.kv_budget_bytes = -1;
  auto negative = CreateBackend(*m->file, spec);
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().code(), StatusCode::kInvalidArgument);
}

TEST(CreateBackend, CpuQ8KvHoldsMoreBlocksInTheSameBudgetAndSaysSo) {
  auto m = TinyModel();
  ASSERT_NE(m, nullptr);
  BackendSpec spec;
  spec.kind = BackendKind::kCpu;
  spec.threads = 1;
  spec.kv_budget_bytes = int64_t{4} << 20;
  auto f16 = CreateBackend(*m->file, spec);
  ASSERT_TRUE(f16.ok()) << f16.status().ToString();
  EXPECT_NE((*f16)->Describe().find(", f16 KV)"), std::string::npos) << (*f16)->Describe();
  spec.kv_dtype = cpu::KvDtype::kQ8_0;
  auto q8 = CreateBackend(*m->file, spec);
  ASSERT_TRUE(q8.ok()) << q8.status().ToString();
  EXPECT_NE((*q8)->Describe().find(", q8_0 KV)"), std::string::npos) << (*q8)->Describe();
  EXPECT_GT((*q8)->kv_geometry().num_blocks, (*f16)->kv_geometry().num_blocks);
  EXPECT_LT((*q8)->kv_geometry().bytes_per_block, (*f16)->kv_geometry().bytes_per_block);

  const std::vector<int32_t> tokens = {1, 5, 9};
  const std::vector<kv::BlockId> blocks = {0};
  Batch batch;
  batch.sequences.push_back({tokens, 0, blocks, LogitsWanted::kLast});
  std::vector<float> logits;
  ASSERT_TRUE((*q8)->Forward(batch, &logits).ok());
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
}

TEST(CreateBackend, CudaOnADeviceDescribesTheDeviceAndRefusesAnF32KvCache) {
  if (!CudaBackendUsable()) GTEST_SKIP() << "no CUDA device";
  auto m = TinyModel();
  ASSERT_NE(m, nullptr);
  BackendSpec spec;
  spec.kind = BackendKind::kAuto;
  spec.kv_budget_bytes = int64_t{16} << 20;
  spec.block_size = 4;
  StatusOr<std::unique_ptr<Backend>> b = CreateBackend(*m->file, spec);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*b)->name(), "cuda");
  const std::string d = (*b)->Describe();
  EXPECT_EQ(d.rfind("cuda (", 0), 0u) << d;
  EXPECT_NE(d.find(", sm_"), std::string::npos) << d;
  EXPECT_NE(d.find("graphs on"), std::string::npos) << d;

  for (cpu::KvDtype dtype : {cpu::KvDtype::kF32, cpu::KvDtype::kQ8_0}) {
    spec.kv_dtype = dtype;
    StatusOr<std::unique_ptr<Backend>> refused = CreateBackend(*m->file, spec);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find(cpu::KvDtypeName(dtype)), std::string::npos);
  }
}

// --cuda-f16-weights reaches the backend through the plugin: a quantized model says which way
// it went in its description, and `on` that cannot fit is the backend's FAILED_PRECONDITION.
TEST(CreateBackend, CudaFollowsTheFp16WeightCopiesSetting) {
  if (!CudaBackendUsable()) GTEST_SKIP() << "no CUDA device";
  cuda::testing::SyntheticSpec model_spec;
  model_spec.weight_type = model::GgmlType::kQ8_0;
  auto m = cuda::testing::OpenSyntheticModel(model_spec);
  ASSERT_NE(m, nullptr);
  BackendSpec spec;
  spec.kind = BackendKind::kCuda;
  spec.kv_budget_bytes = int64_t{8} << 20;
  spec.cuda_f16_weights = cuda::F16WeightCopies::kOff;
  StatusOr<std::unique_ptr<Backend>> off = CreateBackend(*m->file, spec);
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_NE((*off)->Describe().find(", no fp16 weight copies (off))"), std::string::npos)
      << (*off)->Describe();

  spec.cuda_f16_weights = cuda::F16WeightCopies::kOn;
  StatusOr<std::unique_ptr<Backend>> on = CreateBackend(*m->file, spec);
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  EXPECT_NE((*on)->Describe().find(", fp16 weight copies "), std::string::npos)
      << (*on)->Describe();

  spec.kv_budget_bytes = int64_t{1} << 50;  // no room beside a petabyte of KV
  StatusOr<std::unique_ptr<Backend>> too_big = CreateBackend(*m->file, spec);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(too_big.status().message().find("--cuda-f16-weights"), std::string::npos)
      << too_big.status().message();
}

}  // namespace
}  // namespace strata::backend
