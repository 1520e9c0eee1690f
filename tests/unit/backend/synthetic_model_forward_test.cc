// A synthetic model (strata-make-model's generator) runs through the CPU backend: the file
// carries every key and tensor the loader needs and its weights keep the logits finite and
// spread, in each weight type the generator writes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "small_synthetic_model.h"
#include "strata/backend/cpu/cpu_backend.h"
#include "strata/model/gguf_file.h"
#include "strata/model/synthetic_model.h"

namespace strata::backend::cpu {
namespace {

using model::SyntheticFtype;

class SyntheticModelForward : public ::testing::TestWithParam<SyntheticFtype> {};

TEST_P(SyntheticModelForward, GivesFiniteSpreadLogitsForAPromptAndADecodeStep) {
  const model::SyntheticModelSpec spec = SmallSyntheticSpec(GetParam(), 3);
  const std::string path = ::testing::TempDir() + "synthetic_forward_" +
                           std::string(model::SyntheticFtypeName(GetParam())) + ".gguf";
  ASSERT_TRUE(model::WriteSyntheticModel(spec, path, 2).ok());
  auto file = model::GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();

  CpuBackendOptions options;
  options.num_threads = 2;
  options.block_size = 16;
  options.kv_budget_bytes = 8 << 20;
  auto backend = CpuBackend::Create(*file, options);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  ASSERT_GE((*backend)->kv_geometry().num_blocks, 2);

  const std::vector<int32_t> prompt = {1, 300, 17, 42, 259, 5, 9};
  const std::vector<kv::BlockId> blocks = {0, 1};
  Batch batch;
  batch.sequences.push_back({prompt, 0, blocks, LogitsWanted::kAll});
  std::vector<float> logits;
  ASSERT_TRUE((*backend)->Forward(batch, &logits).ok());
  ASSERT_EQ(logits.size(), prompt.size() * 320);

  const std::vector<int32_t> next = {77};
  Batch step;
  step.sequences.push_back({next, static_cast<int64_t>(prompt.size()), blocks});
  std::vector<float> step_logits;
  ASSERT_TRUE((*backend)->Forward(step, &step_logits).ok());
  ASSERT_EQ(step_logits.size(), 320u);
  logits.insert(logits.end(), step_logits.begin(), step_logits.end());

  double sum = 0, sum_sq = 0;
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sum_sq += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(logits.size());
  const double stddev = std::sqrt(sum_sq / n - (sum / n) * (sum / n));
  // O(1) activations: logits neither collapse nor blow up.
  EXPECT_GT(stddev, 0.05);
  EXPECT_LT(stddev, 50.0);
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(AllTypes, SyntheticModelForward,
                         ::testing::Values(SyntheticFtype::kF16, SyntheticFtype::kBF16,
                                           SyntheticFtype::kQ4_K),
                         [](const auto& info) {
                           return std::string(model::SyntheticFtypeName(info.param));
                         });

}  // namespace
}  // namespace strata::backend::cpu
