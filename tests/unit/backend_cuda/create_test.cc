// CudaBackend::Create's answers that need no device: bad options, unsupported models, and
// UNAVAILABLE on a machine without one. They run on every machine.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "strata/backend/cuda/cuda_backend.h"
#include "strata/common/mapped_file.h"
#include "strata/model/gguf_file.h"
#include "unit/backend_cuda/synthetic_model.h"

namespace strata::backend::cuda {
namespace {

// A parsed synthetic model; the bytes outlive the file that maps them.
struct ModelFile {
  std::vector<uint8_t> bytes;
  std::unique_ptr<model::GgufFile> file;
};

std::unique_ptr<ModelFile> Open(const testing::SyntheticSpec& spec) {
  auto m = std::make_unique<ModelFile>();
  m->bytes = testing::BuildSyntheticModel(spec);
  auto file = model::GgufFile::Parse(MappedFile::FromBytes(m->bytes));
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return nullptr;
  m->file = std::make_unique<model::GgufFile>(std::move(*file));
  return m;
}

TEST(CudaBackendCreate, BadOptionsAreInvalidArgumentOnEveryMachine) {
  auto m = Open({});
  ASSERT_NE(m, nullptr);
  std::vector<CudaBackendOptions> bad(7);
  bad[0].block_size = 0;
  bad[1].block_size = 1025;
  bad[2].memory_fraction = 0.0;
  bad[3].memory_fraction = 1.5;
  bad[4].memory_fraction = std::numeric_limits<double>::quiet_NaN();
  bad[5].kv_budget_bytes = -1;
  bad[6].device = -1;
  for (size_t i = 0; i < bad.size(); ++i) {
    auto b = CudaBackend::Create(*m->file, bad[i]);
    ASSERT_FALSE(b.ok()) << "case " << i;
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument)
        << "case " << i << ": " << b.status().ToString();
  }
}

TEST(CudaBackendCreate, AnUnknownArchitectureIsUnimplementedOnEveryMachine) {
  testing::SyntheticSpec spec;
  spec.arch = "gpt2";
  auto m = Open(spec);
  ASSERT_NE(m, nullptr);
  auto b = CudaBackend::Create(*m->file, {});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kUnimplemented) << b.status().ToString();
}

TEST(CudaBackendCreate, HeadsWiderThanTheAttentionKernelsAreUnimplementedOnEveryMachine) {
  testing::SyntheticSpec spec;
  spec.embd = 512;
  spec.heads = 1;
  spec.kv_heads = 1;  // one head of 512 dimensions
  auto m = Open(spec);
  ASSERT_NE(m, nullptr);
  auto b = CudaBackend::Create(*m->file, {});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kUnimplemented) << b.status().ToString();
}

TEST(CudaBackendCreate, WithoutADeviceCreateIsUnavailable) {
  if (CudaDeviceAvailable()) GTEST_SKIP() << "this machine has a CUDA device";
  auto m = Open({});
  ASSERT_NE(m, nullptr);
  auto b = CudaBackend::Create(*m->file, {});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kUnavailable) << b.status().ToString();
}

}  // namespace
}  // namespace strata::backend::cuda
