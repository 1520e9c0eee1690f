// The backend flags every tool shares: each flag's values, and refusals that leave the spec
// as it was.
#include "strata/backend/backend_flags.h"

#include <gtest/gtest.h>

#include <string>

namespace strata::backend {
namespace {

TEST(BackendFlags, EachFlagSetsItsField) {
  BackendSpec spec;
  ASSERT_TRUE(ApplyBackendFlag("--backend", "cuda", &spec).ok());
  EXPECT_EQ(spec.kind, BackendKind::kCuda);
  ASSERT_TRUE(ApplyBackendFlag("--device", "3", &spec).ok());
  EXPECT_EQ(spec.device, 3);
  ASSERT_TRUE(ApplyBackendFlag("--gpu-memory-fraction", "0.5", &spec).ok());
  EXPECT_DOUBLE_EQ(spec.gpu_memory_fraction, 0.5);
  ASSERT_TRUE(ApplyBackendFlag("--cuda-graphs", "false", &spec).ok());
  EXPECT_FALSE(spec.cuda_graphs);
  EXPECT_EQ(spec.cuda_f16_weights, cuda::F16WeightCopies::kAuto);  // the default
  ASSERT_TRUE(ApplyBackendFlag("--cuda-f16-weights", "off", &spec).ok());
  EXPECT_EQ(spec.cuda_f16_weights, cuda::F16WeightCopies::kOff);
  ASSERT_TRUE(ApplyBackendFlag("--cuda-f16-weights", "on", &spec).ok());
  EXPECT_EQ(spec.cuda_f16_weights, cuda::F16WeightCopies::kOn);
  ASSERT_TRUE(ApplyBackendFlag("--cuda-f16-weights", "auto", &spec).ok());
  EXPECT_EQ(spec.cuda_f16_weights, cuda::F16WeightCopies::kAuto);
  ASSERT_TRUE(ApplyBackendFlag("--threads", "7", &spec).ok());
  EXPECT_EQ(spec.threads, 7);
  ASSERT_TRUE(ApplyBackendFlag("--kv-budget-bytes", "1048576", &spec).ok());
  EXPECT_EQ(spec.kv_budget_bytes, 1048576);
  ASSERT_TRUE(ApplyBackendFlag("--kv-dtype", "f32", &spec).ok());
  EXPECT_EQ(spec.kv_dtype, cpu::KvDtype::kF32);
  ASSERT_TRUE(ApplyBackendFlag("--kv-dtype", "q8_0", &spec).ok());
  EXPECT_EQ(spec.kv_dtype, cpu::KvDtype::kQ8_0);
  ASSERT_TRUE(ApplyBackendFlag("--matmul-precision", "int8", &spec).ok());
  EXPECT_EQ(spec.matmul_precision, cpu::MatMulPrecisionSetting::kInt8);
  ASSERT_TRUE(ApplyBackendFlag("--matmul-precision", "auto", &spec).ok());
  EXPECT_EQ(spec.matmul_precision, cpu::MatMulPrecisionSetting::kAuto);
}

TEST(BackendFlags, BadValuesAreInvalidArgumentNamingTheFlagAndLeaveTheSpec) {
  struct Case {
    const char* flag;
    const char* value;
  };
  const Case cases[] = {{"--backend", "gpu"},
                        {"--device", "-1"},
                        {"--device", "1x"},
                        {"--gpu-memory-fraction", "0"},
                        {"--gpu-memory-fraction", "1.5"},
                        {"--gpu-memory-fraction", "nan"},
                        {"--gpu-memory-fraction", ""},
                        {"--cuda-graphs", "maybe"},
                        {"--cuda-f16-weights", "true"},
                        {"--cuda-f16-weights", "AUTO"},
                        {"--cuda-f16-weights", ""},
                        {"--threads", "2000"},
                        {"--kv-budget-bytes", "-5"},
                        {"--kv-budget-bytes", "99999999999999999999999"},
                        {"--kv-dtype", "q4_0"},
                        {"--kv-dtype", "Q8_0"},
                        {"--matmul-precision", "fp8"}};
  for (const Case& c : cases) {
    BackendSpec spec;
    const BackendSpec before = spec;
    Status s = ApplyBackendFlag(c.flag, c.value, &spec);
    ASSERT_FALSE(s.ok()) << c.flag << " " << c.value;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message().rfind(c.flag, 0), 0u) << s.message();
    EXPECT_EQ(spec.kind, before.kind);
    EXPECT_EQ(spec.device, before.device);
    EXPECT_EQ(spec.gpu_memory_fraction, before.gpu_memory_fraction);
    EXPECT_EQ(spec.cuda_f16_weights, before.cuda_f16_weights);
    EXPECT_EQ(spec.threads, before.threads);
    EXPECT_EQ(spec.kv_budget_bytes, before.kv_budget_bytes);
  }
}

TEST(BackendFlags, OnlyTheBackendFlagsAreClaimedAndEachIsInTheUsage) {
  for (const char* flag :
       {"--backend", "--device", "--gpu-memory-fraction", "--cuda-graphs", "--cuda-f16-weights",
        "--threads", "--kv-budget-bytes", "--kv-dtype", "--matmul-precision"}) {
    EXPECT_TRUE(IsBackendFlag(flag)) << flag;
    EXPECT_NE(std::string(kBackendFlagsUsage).find(std::string(flag) + " "), std::string::npos)
        << flag;
  }
  for (const char* flag : {"--model", "--backends", "-backend", "--threads=2", ""}) {
    EXPECT_FALSE(IsBackendFlag(flag)) << flag;
  }
}

}  // namespace
}  // namespace strata::backend
