// MatMulPlan: the precision settings, the choice from timings, the measurement, and the CPU
// backend running each weight type at its plan's precision.
#include "strata/backend/cpu/matmul_plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "random_weights.h"
#include "small_synthetic_model.h"
#include "strata/backend/cpu/cpu_backend.h"
#include "strata/model/gguf_file.h"
#include "strata/model/synthetic_model.h"

namespace strata::backend::cpu {
namespace {

bool HasInt8Kernels() { return MatMulInt8Supports(GgmlType::kQ8_0); }

TEST(MatMulPrecisionSetting, NamesRoundTripAndOthersAreRejected) {
  MatMulPrecisionSetting s = MatMulPrecisionSetting::kFp32;
  for (MatMulPrecisionSetting want : {MatMulPrecisionSetting::kAuto, MatMulPrecisionSetting::kInt8,
                                      MatMulPrecisionSetting::kFp32}) {
    ASSERT_TRUE(ParseMatMulPrecisionSetting(MatMulPrecisionSettingName(want), &s));
    EXPECT_EQ(s, want);
  }
  EXPECT_EQ(MatMulPrecisionSettingName(MatMulPrecisionSetting::kAuto), "auto");
  EXPECT_FALSE(ParseMatMulPrecisionSetting("Auto", &s));
  EXPECT_FALSE(ParseMatMulPrecisionSetting("", &s));
  EXPECT_EQ(s, MatMulPrecisionSetting::kFp32);
}

TEST(MatMulPlan, AFixedPlanGivesEveryTypeItsPrecision) {
  const MatMulPlan int8(MatMulPrecision::kInt8);
  const MatMulPlan fp32(MatMulPrecision::kFp32);
  for (GgmlType t : {GgmlType::kF32, GgmlType::kQ8_0, GgmlType::kQ6_K, GgmlType::kMXFP4}) {
    EXPECT_EQ(int8.For(t), MatMulPrecision::kInt8);
    EXPECT_EQ(fp32.For(t), MatMulPrecision::kFp32);
  }
  EXPECT_EQ(fp32.Describe(), "fp32 matmul");
  // int8 is only what runs where the CPU has the integer kernels.
  EXPECT_EQ(int8.Describe(), HasInt8Kernels() ? "int8 matmul" : "fp32 matmul");
  EXPECT_TRUE(int8.timings().empty());
}

TEST(MatMulPlan, ChoosesThePrecisionMeasuredFasterPerType) {
  std::vector<MatMulTypeTiming> timings = {
      // int8 faster at both sizes.
      {GgmlType::kQ8_0, 1, 10e-3, 5e-3},
      {GgmlType::kQ8_0, 16, 40e-3, 10e-3},
      // int8 slower at both.
      {GgmlType::kQ6_K, 1, 10e-3, 12e-3},
      {GgmlType::kQ6_K, 16, 20e-3, 22e-3},
      // Faster at one token (0.5x), much slower at 16 (3x): geometric mean 1.22x.
      {GgmlType::kQ4_K, 1, 10e-3, 5e-3},
      {GgmlType::kQ4_K, 16, 10e-3, 30e-3},
      // A tie within the margin goes to int8.
      {GgmlType::kQ5_0, 1, 10e-3, 10.1e-3},
  };
  EXPECT_DOUBLE_EQ(Int8TimeRatio(timings, GgmlType::kQ8_0), 0.5 * std::sqrt(0.5));
  EXPECT_NEAR(Int8TimeRatio(timings, GgmlType::kQ4_K), std::sqrt(1.5), 1e-12);
  EXPECT_EQ(Int8TimeRatio(timings, GgmlType::kQ4_0), 0.0);

  const MatMulPlan plan = ChooseMatMulPlan(timings);
  EXPECT_EQ(plan.For(GgmlType::kQ8_0), MatMulPrecision::kInt8);
  EXPECT_EQ(plan.For(GgmlType::kQ6_K), MatMulPrecision::kFp32);
  EXPECT_EQ(plan.For(GgmlType::kQ4_K), MatMulPrecision::kFp32);
  EXPECT_EQ(plan.For(GgmlType::kQ5_0), MatMulPrecision::kInt8);
  EXPECT_EQ(plan.For(GgmlType::kQ4_0), MatMulPrecision::kFp32);  // not timed
  EXPECT_EQ(plan.timings().size(), timings.size());
  EXPECT_EQ(plan.Describe(),
            "int8 matmul, measured (Q8_0 int8 0.35x, Q6_K fp32 1.15x, Q4_K fp32 1.22x, "
            "Q5_0 int8 1.01x)");

  const MatMulPlan slower = ChooseMatMulPlan({{GgmlType::kQ6_K, 1, 1e-3, 2e-3}});
  EXPECT_EQ(slower.For(GgmlType::kQ6_K), MatMulPrecision::kFp32);
  EXPECT_EQ(slower.Describe(), "fp32 matmul, measured (Q6_K fp32 2.00x)");
}

TEST(MeasureMatMulPrecisions, TimesEachIntegerTypeBothWaysWeightedByUses) {
  std::mt19937 rng(7);
  const std::vector<uint8_t> q8 = RandomWeights(GgmlType::kQ8_0, 64, 256, rng);
  const std::vector<uint8_t> q6 = RandomWeights(GgmlType::kQ6_K, 32, 512, rng);
  const std::vector<uint8_t> f32 = RandomWeights(GgmlType::kF32, 16, 64, rng);
  const WeightMatrix q8_matrix{GgmlType::kQ8_0, q8.data(), 64, 256};
  const WeightMatrix q6_matrix{GgmlType::kQ6_K, q6.data(), 32, 512};
  const std::vector<MatMulUse> uses = {
      {q8_matrix, 2},
      {q6_matrix, 1},
      {WeightMatrix{GgmlType::kF32, f32.data(), 16, 64}, 1},  // no integer kernels: not timed
  };
  MatMulMeasureOptions options;
  options.token_counts = {1, 4};
  ThreadPool pool(2);
  const std::vector<MatMulTypeTiming> timings = MeasureMatMulPrecisions(uses, &pool, options);
  if (!HasInt8Kernels()) {
    EXPECT_TRUE(timings.empty());
    return;
  }
  ASSERT_EQ(timings.size(), 4u);
  for (const MatMulTypeTiming& t : timings) {
    EXPECT_TRUE(t.type == GgmlType::kQ8_0 || t.type == GgmlType::kQ6_K);
    EXPECT_TRUE(t.tokens == 1 || t.tokens == 4);
    EXPECT_GT(t.fp32_seconds, 0);
    EXPECT_GT(t.int8_seconds, 0);
    EXPECT_LT(t.fp32_seconds, 1.0);
  }

  // The shapes are remembered: the same matrix alone gives exactly half the two uses' time.
  const std::vector<MatMulUse> once = {{q8_matrix, 1}};
  const std::vector<MatMulTypeTiming> again = MeasureMatMulPrecisions(once, &pool, options);
  ASSERT_EQ(again.size(), 2u);
  for (const MatMulTypeTiming& t : again) {
    for (const MatMulTypeTiming& u : timings) {
      if (u.type != t.type || u.tokens != t.tokens) continue;
      EXPECT_EQ(2 * t.fp32_seconds, u.fp32_seconds);
      EXPECT_EQ(2 * t.int8_seconds, u.int8_seconds);
    }
  }
}

class MatMulPlanBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    // Q4_K matrices, a Q6_K head and ffn_down.
    const model::SyntheticModelSpec spec = SmallSyntheticSpec(model::SyntheticFtype::kQ4_K, 5);
    // One file per test: ctest runs the tests of this fixture at once, and the file is mapped.
    path_ = ::testing::TempDir() + "matmul_plan_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".gguf";
    ASSERT_TRUE(model::WriteSyntheticModel(spec, path_, 2).ok());
    auto file = model::GgufFile::Open(path_);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    file_ = std::make_unique<model::GgufFile>(std::move(*file));
  }
  void TearDown() override { std::remove(path_.c_str()); }

  std::unique_ptr<CpuBackend> Make(MatMulPrecisionSetting setting,
                                   std::optional<MatMulPlan> plan = std::nullopt) {
    CpuBackendOptions options;
    options.num_threads = 2;
    options.kv_budget_bytes = 4 << 20;
    options.matmul_precision = setting;
    options.matmul_plan = std::move(plan);
    auto backend = CpuBackend::Create(*file_, options);
    EXPECT_TRUE(backend.ok()) << backend.status().ToString();
    return backend.ok() ? std::move(*backend) : nullptr;
  }

  static std::vector<float> Logits(CpuBackend* backend) {
    static const std::vector<int32_t> prompt = {1, 300, 17, 42, 259};
    static const std::vector<kv::BlockId> blocks = {0};
    Batch batch;
    batch.sequences.push_back({prompt, 0, blocks, LogitsWanted::kAll});
    std::vector<float> logits;
    EXPECT_TRUE(backend->Forward(batch, &logits).ok());
    return logits;
  }

  std::string path_;
  std::unique_ptr<model::GgufFile> file_;
};

TEST_F(MatMulPlanBackend, EachWeightTypeRunsAtItsPlansPrecision) {
  if (!HasInt8Kernels()) GTEST_SKIP() << "no int8 kernels on this CPU: every plan runs fp32";
  MatMulPlan mixed(MatMulPrecision::kFp32);
  mixed.Set(GgmlType::kQ4_K, MatMulPrecision::kInt8);
  std::unique_ptr<CpuBackend> fp32 = Make(MatMulPrecisionSetting::kFp32);
  std::unique_ptr<CpuBackend> int8 = Make(MatMulPrecisionSetting::kInt8);
  std::unique_ptr<CpuBackend> both = Make(MatMulPrecisionSetting::kFp32, mixed);
  std::unique_ptr<CpuBackend> both_again = Make(MatMulPrecisionSetting::kInt8, mixed);
  ASSERT_TRUE(fp32 && int8 && both && both_again);
  EXPECT_EQ(both->matmul_plan().For(GgmlType::kQ6_K), MatMulPrecision::kFp32);
  EXPECT_NE(both->Describe().find("int8 matmul for Q4_K, fp32 for the rest"), std::string::npos)
      << both->Describe();
  const std::vector<float> a = Logits(fp32.get());
  const std::vector<float> b = Logits(int8.get());
  const std::vector<float> c = Logits(both.get());
  ASSERT_EQ(a.size(), c.size());
  // The mixed plan is neither: Q4_K layers at int8, the Q6_K ones at fp32. A given plan wins
  // over the setting.
  EXPECT_NE(c, a);
  EXPECT_NE(c, b);
  EXPECT_EQ(Logits(both_again.get()), c);
}

TEST_F(MatMulPlanBackend, AutoMeasuresTheModelsTypesAndRunsItsChoice) {
  std::unique_ptr<CpuBackend> automatic = Make(MatMulPrecisionSetting::kAuto);
  ASSERT_TRUE(automatic);
  const MatMulPlan& plan = automatic->matmul_plan();
  if (!HasInt8Kernels()) {
    EXPECT_TRUE(plan.timings().empty());
    EXPECT_NE(automatic->Describe().find("fp32 matmul"), std::string::npos);
    return;
  }
  bool q4k = false;
  bool q6k = false;
  for (const MatMulTypeTiming& t : plan.timings()) {
    q4k = q4k || t.type == GgmlType::kQ4_K;
    q6k = q6k || t.type == GgmlType::kQ6_K;
  }
  EXPECT_TRUE(q4k && q6k);
  EXPECT_NE(automatic->Describe().find("matmul, measured (Q6_K "), std::string::npos)
      << automatic->Describe();
  // Its logits are those of the same plan given explicitly.
  std::unique_ptr<CpuBackend> given = Make(MatMulPrecisionSetting::kFp32, plan);
  ASSERT_TRUE(given);
  EXPECT_EQ(Logits(automatic.get()), Logits(given.get()));
}

}  // namespace
}  // namespace strata::backend::cpu
