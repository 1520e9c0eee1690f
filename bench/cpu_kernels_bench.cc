// CPU kernel micro-benchmarks: MatMul on Gemma 3 270M's weight shapes, the thread pool's
// dispatch cost, and the machine's memory read bandwidth (the roofline for decode).
//
//   strata-bench-kernels [--benchmark_filter=...] [--benchmark_repetitions=5]
//
// Weights come from the real model when it is present (STRATA_MODEL, else the repo's
// models/gemma-3-270m-q4_k_m.gguf), else from random blocks of the same types and shapes.
// STRATA_BENCH_THREADS sets the pool size (default: the hardware's threads). Counters:
// weight_GB/s (weight bytes streamed per second, once per call) and GFLOP/s (2 * rows * cols *
// tokens per call). Each benchmark also reports min and max over repetitions: on a shared
// machine the best run (min time, max rate) is the one to read.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "strata/backend/cpu/matmul.h"
#include "strata/backend/cpu/thread_pool.h"
#include "strata/model/fp16.h"
#include "strata/model/gguf_file.h"

namespace strata::backend::cpu {
namespace {

using model::GgmlType;

ThreadPool& Pool() {
  static ThreadPool* pool = [] {
    const char* env = std::getenv("STRATA_BENCH_THREADS");
    return new ThreadPool(env != nullptr ? std::atoi(env) : 0);
  }();
  return *pool;
}

const model::GgufFile* Model() {
  static const std::optional<model::GgufFile> file = []() -> std::optional<model::GgufFile> {
    const char* env = std::getenv("STRATA_MODEL");
    StatusOr<model::GgufFile> f =
        model::GgufFile::Open(env != nullptr ? env : STRATA_DEFAULT_MODEL);
    if (!f.ok()) return std::nullopt;
    return std::move(f).value();
  }();
  return file ? &*file : nullptr;
}

// A matrix to benchmark: a tensor of the real model (the first whose name ends with `suffix`
// and has `type`), or random blocks of that type and shape.
struct Shape {
  std::string label;
  std::string suffix;
  GgmlType type;
  int64_t rows;
  int64_t cols;
};

struct Matrix {
  WeightMatrix w;
  std::vector<uint8_t> owned;  // random weights when the model is absent
  bool real = false;
};

Matrix RandomMatrix(const Shape& s) {
  const model::GgmlTypeTraits traits = model::TraitsOf(s.type);
  const int64_t blocks = s.rows * s.cols / traits.block_size;
  Matrix m;
  m.owned.resize(blocks * traits.type_size);
  std::mt19937 rng(1);
  for (uint8_t& b : m.owned) b = static_cast<uint8_t>(rng());
  // Sane fp16 scales at the offsets each format keeps them (d, and dmin where there is one).
  std::vector<int> scale_offsets;
  switch (s.type) {
    case GgmlType::kQ8_0:
    case GgmlType::kQ5_0:
      scale_offsets = {0};
      break;
    case GgmlType::kQ4_K:
      scale_offsets = {0, 2};
      break;
    case GgmlType::kQ6_K:
      scale_offsets = {208};
      break;
    default:
      break;
  }
  const uint16_t scale = model::FloatToFp16(0.01f);
  for (int64_t i = 0; i < blocks; ++i) {
    for (int off : scale_offsets) std::memcpy(&m.owned[i * traits.type_size + off], &scale, 2);
  }
  m.w = {s.type, m.owned.data(), s.rows, s.cols};
  return m;
}

const Matrix& GetMatrix(const Shape& s) {
  static std::vector<std::unique_ptr<std::pair<std::string, Matrix>>> cache;
  for (const auto& entry : cache) {
    if (entry->first == s.label) return entry->second;
  }
  Matrix m;
  bool found = false;
  if (const model::GgufFile* file = Model()) {
    for (const model::GgufTensorInfo& t : file->tensors()) {
      if (t.type != s.type || t.dims.size() != 2 || t.name.size() < s.suffix.size() ||
          t.name.compare(t.name.size() - s.suffix.size(), s.suffix.size(), s.suffix) != 0) {
        continue;
      }
      if (static_cast<int64_t>(t.dims[0]) != s.cols || static_cast<int64_t>(t.dims[1]) != s.rows) {
        continue;
      }
      m.w = {s.type, file->TensorData(t).data(), s.rows, s.cols};
      m.real = true;
      found = true;
      break;
    }
  }
  if (!found) m = RandomMatrix(s);
  cache.push_back(std::make_unique<std::pair<std::string, Matrix>>(s.label, std::move(m)));
  return cache.back()->second;
}

void BM_MatMul(benchmark::State& state, const Shape& shape, std::string isa,
               MatMulPrecision precision) {
  if (!SetMatMulIsa(isa)) {
    state.SkipWithError(("this CPU has no " + isa).c_str());
    return;
  }
  const Matrix& m = GetMatrix(shape);
  const int64_t tokens = state.range(0);
  std::vector<float> x(tokens * shape.cols);
  std::mt19937 rng(2);
  std::normal_distribution<float> normal;
  for (float& v : x) v = normal(rng);
  std::vector<float> y(tokens * shape.rows);
  ThreadPool& pool = Pool();
  const MatMulOptions options{precision};
  // warm: page in the weights, grow buffers
  MatMul(m.w, x.data(), tokens, y.data(), &pool, options);
  for (auto _ : state) {
    MatMul(m.w, x.data(), tokens, y.data(), &pool, options);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const model::GgmlTypeTraits traits = model::TraitsOf(shape.type);
  const double weight_bytes =
      static_cast<double>(shape.rows) * shape.cols / traits.block_size * traits.type_size;
  const double flops = 2.0 * shape.rows * shape.cols * tokens;
  state.counters["weight_GB/s"] =
      benchmark::Counter(weight_bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  const bool int8 = precision == MatMulPrecision::kInt8 && MatMulInt8Supports(shape.type);
  state.SetLabel(std::string(m.real ? "model" : "random") + " " +
                 (int8 ? std::string("int8 avx512_vnni") : std::string(MatMulIsa())) + " " +
                 std::to_string(pool.num_threads()) + " threads");
  SetMatMulForceScalar(false);
}

// Sums [p, p + n) 64 bytes at a time with four independent AVX2 accumulators: cheap enough
// that memory, not the core, sets the pace.
__attribute__((target("avx2"))) uint64_t ReadAvx2(const uint64_t* p, int64_t n) {
  __m256i a0 = _mm256_setzero_si256();
  __m256i a1 = a0;
  __m256i a2 = a0;
  __m256i a3 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const auto* v = reinterpret_cast<const __m256i*>(p + i);
    a0 = _mm256_add_epi64(a0, _mm256_loadu_si256(v));
    a1 = _mm256_add_epi64(a1, _mm256_loadu_si256(v + 1));
    a2 = _mm256_add_epi64(a2, _mm256_loadu_si256(v + 2));
    a3 = _mm256_add_epi64(a3, _mm256_loadu_si256(v + 3));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes),
                     _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  uint64_t s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; ++i) s += p[i];
  return s;
}

uint64_t ReadPortable(const uint64_t* p, int64_t n) {
  uint64_t acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += p[i + j];
  }
  uint64_t s = 0;
  for (uint64_t a : acc) s += a;
  for (; i < n; ++i) s += p[i];
  return s;
}

// Streams a buffer much larger than the caches with the pool's threads, each over contiguous
// chunks: the read bandwidth a memory-bound GEMV can at best reach.
void BM_MemoryRead(benchmark::State& state) {
  const int64_t bytes = state.range(0) << 20;
  const int64_t words = bytes / 8;
  static std::vector<uint64_t> buffer;
  if (static_cast<int64_t>(buffer.size()) < words) buffer.assign(words, 1);
  const bool avx2 = __builtin_cpu_supports("avx2");
  ThreadPool& pool = Pool();
  for (auto _ : state) {
    std::atomic<uint64_t> total{0};
    pool.ParallelFor(words, 4096, [&](int64_t begin, int64_t end) {
      const uint64_t* p = buffer.data() + begin;
      total += avx2 ? ReadAvx2(p, end - begin) : ReadPortable(p, end - begin);
    });
    benchmark::DoNotOptimize(total.load());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(bytes) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::to_string(pool.num_threads()) + " threads" + (avx2 ? "" : ", no AVX2"));
}

// One empty parallel region: what a decode step pays per matmul/op for the fork and join.
void BM_ThreadPoolDispatch(benchmark::State& state) {
  ThreadPool& pool = Pool();
  std::atomic<int64_t> sink{0};
  for (auto _ : state) {
    pool.ParallelFor(pool.num_threads(), [&](int64_t begin, int64_t end) {
      sink.fetch_add(end - begin, std::memory_order_relaxed);
    });
  }
  benchmark::DoNotOptimize(sink.load());
  state.SetLabel(std::to_string(pool.num_threads()) + " threads");
}

double MinOf(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double MaxOf(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

void RegisterAll() {
  // Gemma 3 270M: ggml dims [cols, rows]; rows are the output features.
  const std::vector<Shape> shapes = {
      {"output_262144x640_Q8_0", "token_embd.weight", GgmlType::kQ8_0, 262144, 640},
      {"attn_q_640to1024_Q5_0", "attn_q.weight", GgmlType::kQ5_0, 1024, 640},
      {"attn_output_1024to640_Q4_K", "attn_output.weight", GgmlType::kQ4_K, 640, 1024},
      {"ffn_down_2048to640_Q6_K", "ffn_down.weight", GgmlType::kQ6_K, 640, 2048},
      {"ffn_up_640to2048_Q5_0", "ffn_up.weight", GgmlType::kQ5_0, 2048, 640},
  };
  for (const Shape& shape : shapes) {
    const bool huge = shape.rows * shape.cols > (int64_t{1} << 26);
    // "int8": MatMulPrecision::kInt8 (the AVX-512 VNNI kernels; fp32 avx512 where absent).
    for (const char* isa : {"avx512", "int8", "avx2", "scalar"}) {
      const bool scalar = std::strcmp(isa, "scalar") == 0;
      const bool int8 = std::strcmp(isa, "int8") == 0;
      auto* b =
          benchmark::RegisterBenchmark(("MatMul/" + shape.label + "/" + isa).c_str(), BM_MatMul,
                                       shape, std::string(int8 ? "avx512" : isa),
                                       int8 ? MatMulPrecision::kInt8 : MatMulPrecision::kFp32);
      // The output projection runs for up to a batch's worth of tokens per step (logits), never
      // 512.
      for (int64_t tokens : {1, 4, 8, 16, 32, 64, 512}) {
        if (huge && (tokens > 64 || (scalar && tokens > 1))) continue;
        b->Arg(tokens);
      }
      b->ArgName("tokens")->UseRealTime()->Unit(benchmark::kMicrosecond);
      b->ComputeStatistics("min", MinOf)->ComputeStatistics("max", MaxOf);
    }
  }
  // 170 MiB is the output projection's size (it may partly stay in a large L3); 1 GiB is not.
  benchmark::RegisterBenchmark("MemoryRead", BM_MemoryRead)
      ->Arg(170)
      ->Arg(1024)
      ->ArgName("MiB")
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond)
      ->ComputeStatistics("min", MinOf)
      ->ComputeStatistics("max", MaxOf);
  benchmark::RegisterBenchmark("ThreadPoolDispatch", BM_ThreadPoolDispatch)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond)
      ->ComputeStatistics("min", MinOf)
      ->ComputeStatistics("max", MaxOf);
}

}  // namespace
}  // namespace strata::backend::cpu

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  strata::backend::cpu::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
