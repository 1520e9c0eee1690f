// A synthetic model (strata-make-model's generator) runs through the CPU backend: the file
// carries every key and tensor the loader needs and its weights keep the logits finite and
// spread, in each weight type the generator writes.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <thread>
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

// Host work between steps (sampling) runs on the pool: every index once, on several threads.
TEST(CpuBackendHostWork, ParallelForHostCoversEachIndexOnceOnSeveralThreads) {
  const model::SyntheticModelSpec spec = SmallSyntheticSpec(SyntheticFtype::kF16, 1);
  const std::string path = ::testing::TempDir() + "synthetic_host_work.gguf";
  ASSERT_TRUE(model::WriteSyntheticModel(spec, path, 2).ok());
  auto file = model::GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  CpuBackendOptions options;
  options.num_threads = 2;
  options.kv_budget_bytes = 1 << 20;
  auto backend = CpuBackend::Create(*file, options);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();

  constexpr int64_t kRows = 16;
  std::vector<std::atomic<int>> calls(kRows);
  std::mutex mutex;
  std::set<std::thread::id> threads;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  (*backend)->ParallelForHost(kRows, [&](int64_t begin, int64_t end) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      threads.insert(std::this_thread::get_id());
    }
    for (int64_t i = begin; i < end; ++i) calls[static_cast<size_t>(i)].fetch_add(1);
    // Hold this range until a second thread has taken one (10 s at most in all: then the check
    // below fails).
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (threads.size() >= 2) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  for (int64_t i = 0; i < kRows; ++i) EXPECT_EQ(calls[static_cast<size_t>(i)].load(), 1) << i;
  EXPECT_EQ(threads.size(), 2u);
  (*backend)->ParallelForHost(0, [&](int64_t, int64_t) { ADD_FAILURE() << "called for n = 0"; });
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
