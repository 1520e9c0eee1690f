// Sampler micro-benchmarks (part of strata-bench-kernels): one row of logits over Gemma 3's
// vocabulary (262,144 ids), sampled greedily and with the usual truncations. Every decode step
// samples one such row per sequence, so at 16 sequences a step reads 16 MiB of logits here.
//
//   strata-bench-kernels --benchmark_filter='Sample'
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "strata/sampling/sampler.h"

namespace strata::sampling {
namespace {

constexpr size_t kVocab = 262144;

// Normal logits (sigma 3). With `peaked`, 32 ids also get logits 15-30 above the rest, as a
// model's row has a few likely tokens: then a top_p floor drops nearly every id.
std::vector<float> Logits(bool peaked = false) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(kVocab);
  for (float& v : logits) v = normal(rng);
  if (peaked) {
    for (size_t k = 0; k < 32; ++k) logits[(k * 7919) % kVocab] = 30.0f - 0.5f * k;
  }
  return logits;
}

// With `fresh`, each call gets a new copy of the row (timed with it): sampling with a
// temperature turns the row into weights in place. Greedy sampling leaves finite logits without
// penalties as they are, so it runs on the same row every time.
void RunSample(benchmark::State& state, const SamplingParams& params, bool fresh,
               bool peaked = false) {
  const std::vector<float> logits = Logits(peaked);
  std::vector<float> row = logits;
  Sampler sampler(params, {});
  for (auto _ : state) {
    if (fresh) row = logits;
    benchmark::DoNotOptimize(sampler.Sample(row));
  }
  state.counters["logits_GB"] =
      benchmark::Counter(static_cast<double>(kVocab * sizeof(float)) * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate);
}

void BM_SampleGreedy(benchmark::State& state) {
  SamplingParams params;
  params.temperature = 0.0f;
  RunSample(state, params, false);
}

void BM_SampleTopKTopP(benchmark::State& state) {
  SamplingParams params;
  params.temperature = 0.8f;
  params.top_k = 40;
  params.top_p = 0.95f;
  params.seed = 1;
  RunSample(state, params, true);
}

// What an OpenAI client sends: a temperature and top_p, no top_k, so the whole row is weighed.
SamplingParams TopP() {
  SamplingParams params;
  params.temperature = 1.0f;
  params.top_p = 0.95f;
  params.seed = 1;
  return params;
}

void BM_SampleTopP(benchmark::State& state) { RunSample(state, TopP(), true); }

// The same on a model-like row: a few likely tokens, the rest dropped by the floor.
void BM_SampleTopPPeaked(benchmark::State& state) { RunSample(state, TopP(), true, true); }

void BM_SampleTemperature(benchmark::State& state) {
  SamplingParams params;
  params.temperature = 0.7f;
  params.seed = 1;
  RunSample(state, params, true);
}

}  // namespace
}  // namespace strata::sampling

BENCHMARK(strata::sampling::BM_SampleGreedy);
BENCHMARK(strata::sampling::BM_SampleTopKTopP);
BENCHMARK(strata::sampling::BM_SampleTopP);
BENCHMARK(strata::sampling::BM_SampleTopPPeaked);
BENCHMARK(strata::sampling::BM_SampleTemperature);
