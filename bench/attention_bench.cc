// Paged-attention micro-benchmarks (part of strata-bench-kernels): one decode query against a
// sequence's cached K/V at growing context lengths, on Gemma 3 270M's shape (4 query heads
// sharing 1 KV head of dim 256, KV in 16-token blocks), and a 64-token prefill chunk; the second
// argument is the KV type (0: f16, 1: q8_0).
//
//   strata-bench-kernels --benchmark_filter='Attention'
//
// Counters (per second): kv_GB (K and V bytes read per call: decode attention streams the whole
// context once, so its rate is the number to hold against the machine's read bandwidth, which
// BM_MemoryRead in cpu_kernels_bench.cc measures) and GFLOP (2 x (dk + dv) per score and head).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "strata/backend/cpu/attention.h"
#include "strata/backend/cpu/kv_storage.h"

namespace strata::backend::cpu {
namespace {

constexpr int32_t kHeads = 4;
constexpr int32_t kKvHeads = 1;
constexpr int32_t kHeadDim = 256;
constexpr int32_t kBlockSize = 16;

struct Cache {
  std::unique_ptr<KvStorage> storage;
  std::vector<kv::BlockId> blocks;
};

// A one-layer cache holding `tokens` positions of random K/V (written straight into memory:
// what is measured is the read).
Cache MakeCache(int64_t tokens, KvDtype dtype) {
  KvCacheConfig config;
  config.num_layers = 1;
  config.num_kv_heads = kKvHeads;
  config.head_dim_k = kHeadDim;
  config.head_dim_v = kHeadDim;
  config.block_size = kBlockSize;
  config.num_blocks = static_cast<int32_t>((tokens + kBlockSize - 1) / kBlockSize);
  config.dtype = dtype;
  Cache cache;
  cache.storage = std::move(KvStorage::Create(config)).value();
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(kKvHeads * kHeadDim);
  for (int32_t b = 0; b < config.num_blocks; ++b) cache.blocks.push_back(b);
  for (int64_t p = 0; p < tokens; ++p) {
    for (float& v : row) v = normal(rng);
    cache.storage->Write(0, cache.blocks, p, row.data(), row.data());
  }
  return cache;
}

void RunAttention(benchmark::State& state, int64_t n_q) {
  const int64_t context = state.range(0);
  const KvDtype dtype = state.range(1) == 0 ? KvDtype::kF16 : KvDtype::kQ8_0;
  state.SetLabel(KvDtypeName(dtype));
  Cache cache = MakeCache(context, dtype);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> q(n_q * kHeads * kHeadDim);
  for (float& v : q) v = normal(rng);
  std::vector<int64_t> pos(n_q);
  for (int64_t i = 0; i < n_q; ++i) pos[i] = context - n_q + i;
  std::vector<float> out(n_q * kHeads * kHeadDim);
  PagedAttentionArgs args;
  args.kv = cache.storage.get();
  args.layer = 0;
  args.block_ids = cache.blocks;
  args.q = q.data();
  args.q_pos = pos.data();
  args.n_q = n_q;
  args.n_heads = kHeads;
  args.scale = 1.0f / 16.0f;
  args.out = out.data();
  const int64_t tasks = PagedAttentionTasks(args);
  for (auto _ : state) {
    PagedAttention(args, 0, tasks);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  // K and V rows read: each query sees its causal prefix; the GQA group shares each load.
  double rows = 0;
  for (int64_t i = 0; i < n_q; ++i) rows += static_cast<double>(pos[i] + 1);
  const double bytes = (n_q == 1 ? rows : static_cast<double>(context)) * kKvHeads * 2 /*K,V*/ *
                       static_cast<double>(KvRowBytes(dtype, kHeadDim));
  const double flops = rows * kHeads * 2.0 * (2 * kHeadDim);
  state.counters["kv_GB"] =
      benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_AttentionDecode(benchmark::State& state) { RunAttention(state, 1); }
void BM_AttentionPrefillChunk64(benchmark::State& state) { RunAttention(state, 64); }

BENCHMARK(BM_AttentionDecode)->ArgsProduct({{128, 512, 2048, 8192, 32768}, {0, 1}});
BENCHMARK(BM_AttentionPrefillChunk64)->ArgsProduct({{128, 512, 2048}, {0, 1}});

}  // namespace
}  // namespace strata::backend::cpu
