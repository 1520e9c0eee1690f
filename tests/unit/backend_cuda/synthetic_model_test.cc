// The synthetic models the device tests compare on, checked on the CPU backend (no device
// needed): they load, their logits are finite, and the greedy choices of the device tests'
// schedules are far from ties — so that "greedy tokens identical" on the device is a test of
// the CUDA backend, not of rounding luck. Runs on every machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "strata/backend/cpu/cpu_backend.h"
#include "strata/common/mapped_file.h"
#include "strata/model/gguf_file.h"
#include "unit/backend_cuda/greedy_driver.h"
#include "unit/backend_cuda/model_cases.h"

namespace strata::backend::cuda {
namespace {

// Smallest top-1 minus top-2 logit gap allowed, relative to max(1, max |logit|) of the step: 20
// times the CPU/GPU differences expected of the exact paths (~1e-5: fp32 summation order, and
// now and then an fp16 KV element rounded the other way).
constexpr double kMinGreedyMargin = 2e-4;

class SyntheticModelOnCpu : public ::testing::TestWithParam<testing::ModelCase> {};

// Smallest relative top-1/top-2 gap of the greedy rows over the schedule, or -1 on an error or
// a non-finite logit (reported through gtest).
double MinGreedyMargin(cpu::CpuBackend& cpu, std::vector<testing::Seq> seqs, int steps) {
  const int64_t vocab = cpu.config().vocab_size;
  double min_margin = std::numeric_limits<double>::infinity();
  for (int64_t step = 0;; ++step) {
    std::vector<size_t> owners;
    const Batch batch = testing::NextBatch(seqs, step, steps, &owners);
    if (batch.sequences.empty()) break;
    std::vector<float> logits;
    const Status s = cpu.Forward(batch, &logits);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return -1;
    double scale = 1.0;
    for (float v : logits) {
      EXPECT_TRUE(std::isfinite(v)) << "step " << step;
      if (!std::isfinite(v)) return -1;
      scale = std::max(scale, static_cast<double>(std::fabs(v)));
    }
    for (size_t row = 0; row * vocab < logits.size(); ++row) {
      std::vector<float> r(logits.begin() + row * vocab, logits.begin() + (row + 1) * vocab);
      std::partial_sort(r.begin(), r.begin() + 2, r.end(), std::greater<float>());
      min_margin = std::min(min_margin, (static_cast<double>(r[0]) - r[1]) / scale);
    }
    testing::Advance(batch, owners, logits, vocab, &seqs);
  }
  return min_margin;
}

TEST_P(SyntheticModelOnCpu, HasFiniteLogitsAndClearGreedyChoices) {
  const std::vector<uint8_t> bytes = testing::BuildSyntheticModel(GetParam().spec);
  auto file = model::GgufFile::Parse(MappedFile::FromBytes(bytes));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  cpu::CpuBackendOptions options;
  options.num_threads = 2;
  options.block_size = 4;
  options.kv_budget_bytes = int64_t{8} << 20;
  auto cpu = cpu::CpuBackend::Create(*file, options);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  const int64_t vocab = (*cpu)->config().vocab_size;
  // The schedules of the device tests that require identical greedy tokens.
  const double mixed =
      MinGreedyMargin(**cpu, testing::MakeSequences({5, 9, 12}, {5, 6, 8}, vocab), 64);
  EXPECT_GE(mixed, kMinGreedyMargin) << "mixed-batch schedule";
  RecordProperty("min_greedy_margin_mixed", std::to_string(mixed));
  if (!testing::IsQuantized(GetParam().spec.weight_type)) {
    const double wide = MinGreedyMargin(**cpu, testing::WideSequences(vocab), 8);
    EXPECT_GE(wide, kMinGreedyMargin) << "large-batch schedule";
    RecordProperty("min_greedy_margin_wide", std::to_string(wide));
  }
}

// One CPU run per model (the graph flag does not matter here).
std::vector<testing::ModelCase> EagerCases() {
  std::vector<testing::ModelCase> cases;
  for (const testing::ModelCase& c : testing::Cases()) {
    if (!c.graphs) cases.push_back(c);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Models, SyntheticModelOnCpu, ::testing::ValuesIn(EagerCases()),
                         testing::CaseName);

}  // namespace
}  // namespace strata::backend::cuda
