// CudaBackend::Create's answers. Bad options, unsupported models, and UNAVAILABLE on a machine
// without a device need no device and run on every machine; the memory sizing tests need one.
#include <cuda_runtime.h>
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

std::unique_ptr<testing::SyntheticModelFile> Open(const testing::SyntheticSpec& spec) {
  return testing::OpenSyntheticModel(spec);
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

TEST(CudaBackendCreate, SizesTheKvPoolFromTheFreeMemoryFraction) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  auto m = Open({});
  ASSERT_NE(m, nullptr);
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  CudaBackendOptions options;
  options.memory_fraction = 0.02;
  options.block_size = 16;
  auto b = CudaBackend::Create(*m->file, options);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const KvGeometry kv = (*b)->kv_geometry();
  EXPECT_EQ(kv.block_size, 16);
  EXPECT_GE(kv.num_blocks, 1);
  EXPECT_EQ((*b)->kv_bytes(), kv.num_blocks * kv.bytes_per_block);
  // At most the fraction of what was free (the workspaces come out of the same share).
  EXPECT_LE(static_cast<double>((*b)->kv_bytes()), 0.02 * static_cast<double>(free_bytes));
  EXPECT_GT((*b)->weight_bytes(), 0);
}

TEST(CudaBackendCreate, AKvBudgetBeyondTheDeviceIsFailedPrecondition) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  auto m = Open({});
  ASSERT_NE(m, nullptr);
  CudaBackendOptions options;
  options.kv_budget_bytes = int64_t{1} << 50;  // a petabyte
  auto b = CudaBackend::Create(*m->file, options);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition) << b.status().ToString();
  // The failed allocation left no error behind: the next backend is created normally.
  options.kv_budget_bytes = int64_t{1} << 20;
  auto next = CudaBackend::Create(*m->file, options);
  EXPECT_TRUE(next.ok()) << next.status().ToString();
}

}  // namespace
}  // namespace strata::backend::cuda
