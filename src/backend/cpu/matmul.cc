// MatMul's driver: picks the kernel family, cuts the product into tiles and spreads them over the
// pool. The kernels themselves live in matmul_{scalar,avx2,avx512}.cc.
//
// Two paths:
// - Few tokens (decode; n_tokens <= the family's max_fused_tokens): a fused kernel decodes each
//   weight block in registers and multiplies it with every token at once, so the weights stream
//   from memory exactly once and nothing is written back. Units of kFusedRows rows.
// - More tokens (prefill, batches): per tile of rows, slices of kSliceCols columns are
//   dequantized to fp32 into a thread-local buffer and an fp32 register-blocked micro-kernel
//   runs all the unit's tokens over it, so each weight byte is decoded once per call. F32
//   weights are used in place.
#include "strata/backend/cpu/matmul.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

#include "matmul_int8_internal.h"
#include "matmul_internal.h"
#include "strata/common/check.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace strata::backend::cpu {
namespace {

using internal::KernelFamily;
using model::GgmlType;

// Columns per dequantized slice: a multiple of every block size (256); a token group's slice of
// activations (6 x 1024 floats, 24 KiB) stays in L1 while weight rows stream past it.
constexpr int64_t kSliceCols = 1024;
// Rows per tile with many tokens: the dequantized slice (64 x 1024 floats, 256 KiB) stays in L2
// while every token group passes over it.
constexpr int64_t kTileRowsMany = 64;
// Rows per tile with few tokens (types without a fused kernel): the slice stays in L1.
constexpr int64_t kTileRowsFew = 8;
constexpr int64_t kFewTokens = 4;
// Rows per unit of work on the fused path.
constexpr int64_t kFusedRows = 16;
// Fewest tokens per unit when tokens are split across threads (each unit dequantizes its tile).
constexpr int64_t kMinTokensPerUnit = 24;

bool CpuHasAvx2() {
#if defined(__x86_64__)
  unsigned eax = 0;
  unsigned ebx = 0;
  unsigned ecx = 0;
  unsigned edx = 0;
  // __builtin_cpu_supports knows no "f16c" in every compiler; CPUID.1:ECX.F16C[bit 29].
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  // These also check that the OS saves the YMM state.
  return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

bool CpuHasAvx512() {
#if defined(__x86_64__)
  return CpuHasAvx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

const KernelFamily* FamilyByName(std::string_view name) {
  if (name == "scalar") return &internal::ScalarFamily();
  if (name == "avx2") return CpuHasAvx2() ? internal::Avx2Family() : nullptr;
  if (name == "avx512") return CpuHasAvx512() ? internal::Avx512Family() : nullptr;
  return nullptr;
}

const KernelFamily* BestFamily() {
  for (std::string_view name : {"avx512", "avx2"}) {
    if (const KernelFamily* family = FamilyByName(name)) return family;
  }
  return &internal::ScalarFamily();
}

std::atomic<const KernelFamily*> g_family{nullptr};

const KernelFamily& Family() {
  const KernelFamily* family = g_family.load(std::memory_order_acquire);
  if (family == nullptr) {
    family = BestFamily();
    g_family.store(family, std::memory_order_release);
  }
  return *family;
}

// Per-thread dequantization buffer: grown once, then reused by every call on that thread.
float* SliceBuffer(int64_t floats) {
  thread_local internal::AlignedBuffer<float> buffer;
  return buffer.Get(floats);
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

bool MatMulSupports(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

std::string_view MatMulIsa() { return Family().name; }

void SetMatMulForceScalar(bool force) {
  g_family.store(force ? &internal::ScalarFamily() : BestFamily(), std::memory_order_release);
}

bool SetMatMulIsa(std::string_view isa) {
  const KernelFamily* family = FamilyByName(isa);
  if (family == nullptr) return false;
  g_family.store(family, std::memory_order_release);
  return true;
}

bool MatMulInt8Supports(GgmlType type) {
  const internal::Int8Family* family = internal::Avx512VnniInt8Family();
  return family != nullptr && family->kernel_for(type) != nullptr;
}

std::string_view MatMulPrecisionName(MatMulPrecision precision) {
  return precision == MatMulPrecision::kInt8 ? "int8" : "fp32";
}

bool ParseMatMulPrecision(std::string_view name, MatMulPrecision* precision) {
  if (name == "fp32") {
    *precision = MatMulPrecision::kFp32;
  } else if (name == "int8") {
    *precision = MatMulPrecision::kInt8;
  } else {
    return false;
  }
  return true;
}

void QuantizeRowInt8(const float* x, int64_t cols, int8_t* q, float* scales, int32_t* sums16) {
  STRATA_CHECK(cols >= 0 && cols % 32 == 0);
  const internal::Int8Family* family = internal::Avx512VnniInt8Family();
  (family != nullptr ? family->quantize_row : &internal::QuantizeRowInt8Scalar)(x, cols, q, scales,
                                                                                sums16);
}

namespace {

// The fp32 path (also kInt8's for types or CPUs without int8 kernels), for a checked w with
// rows >= 1 and n_tokens >= 1.
void MatMulFp32(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y,
                ThreadPool* pool) {
  const model::GgmlTypeTraits traits = model::TraitsOf(w.type);
  const int64_t block_size = traits.block_size;
  const int64_t type_size = traits.type_size;
  const int64_t rows = w.rows;
  const int64_t cols = w.cols;
  const int64_t row_bytes = cols / block_size * type_size;

  const KernelFamily& family = Family();

  // The kernels want each token's row to start on a cache line (full-width loads that straddle
  // two lines cost a third of their speed): repack x, once per call, when the caller's are not.
  int64_t ldx = cols;
  if (reinterpret_cast<uintptr_t>(x) % 64 != 0 || cols % 16 != 0) {
    ldx = (cols + 15) / 16 * 16;
    thread_local internal::AlignedBuffer<float> packed_x;
    float* packed = packed_x.Get(n_tokens * ldx);
    internal::ForEach(pool, n_tokens, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        std::memcpy(packed + t * ldx, x + t * cols, cols * sizeof(float));
      }
    });
    x = packed;
  }

  if (n_tokens <= family.max_fused_tokens) {
    if (const internal::FusedFn fused = family.fused_for(w.type)) {
      internal::ForEach(pool, rows, kFusedRows, [&](int64_t begin, int64_t end) {
        fused(w.data + begin * row_bytes, row_bytes, end - begin, cols / block_size, x, ldx,
              n_tokens, y + begin, rows, /*accumulate=*/false);
      });
      return;
    }
  }

  const internal::DequantFn dequant =
      w.type == GgmlType::kF32 ? nullptr : family.dequant_for(w.type);
  const int64_t tile_rows = n_tokens <= kFewTokens ? kTileRowsFew : kTileRowsMany;
  const int64_t row_tiles = CeilDiv(rows, tile_rows);
  // With too few row tiles to keep every thread busy, split the tokens as well (each unit then
  // dequantizes its tile itself).
  const int64_t threads = pool != nullptr ? pool->num_threads() : 1;
  int64_t token_units = 1;
  if (row_tiles < 4 * threads) {
    token_units = std::max<int64_t>(
        1, std::min(CeilDiv(4 * threads, row_tiles), n_tokens / kMinTokensPerUnit));
  }
  const int64_t unit_tokens = CeilDiv(n_tokens, token_units);
  token_units = CeilDiv(n_tokens, unit_tokens);

  internal::ForEach(pool, row_tiles * token_units, 1, [&](int64_t begin, int64_t end) {
    float* buffer = dequant != nullptr ? SliceBuffer(tile_rows * kSliceCols) : nullptr;
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t r0 = unit / token_units * tile_rows;
      const int64_t r1 = std::min(rows, r0 + tile_rows);
      const int64_t t0 = unit % token_units * unit_tokens;
      const int64_t t1 = std::min(n_tokens, t0 + unit_tokens);
      for (int64_t c0 = 0; c0 < cols; c0 += kSliceCols) {
        const int64_t kc = std::min(kSliceCols, cols - c0);
        const float* slice;
        int64_t ld;
        if (dequant == nullptr) {
          slice = reinterpret_cast<const float*>(w.data) + r0 * cols + c0;
          ld = cols;
        } else {
          const uint8_t* src = w.data + r0 * row_bytes + c0 / block_size * type_size;
          ld = (kc + 15) / 16 * 16;  // rows start on cache lines
          for (int64_t r = 0; r < r1 - r0; ++r) {
            dequant(w.type, src + r * row_bytes, kc / block_size, buffer + r * ld);
          }
          slice = buffer;
        }
        family.gemm(slice, ld, r1 - r0, x + t0 * ldx + c0, ldx, t1 - t0, kc, y + t0 * rows + r0,
                    rows, /*accumulate=*/c0 > 0);
      }
    }
  });
}

}  // namespace

void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool,
            const MatMulOptions& options) {
  const MatMulTarget target{w, y, options};
  MatMulSameInput({&target, 1}, x, n_tokens, pool);
}

void MatMulSameInput(std::span<const MatMulTarget> targets, const float* x, int64_t n_tokens,
                     ThreadPool* pool) {
  static_assert(kMaxMatMulTargets <= internal::kMaxInt8Jobs);
  STRATA_CHECK(targets.size() <= kMaxMatMulTargets && n_tokens >= 0);
  if (targets.empty()) return;
  const int64_t cols = targets[0].w.cols;
  const internal::Int8Family* int8 = internal::Avx512VnniInt8Family();
  std::array<internal::Int8Job, kMaxMatMulTargets> jobs;
  size_t n_jobs = 0;
  for (const MatMulTarget& t : targets) {
    STRATA_CHECK(MatMulSupports(t.w.type) && t.w.cols == cols);
    const model::GgmlTypeTraits traits = model::TraitsOf(t.w.type);
    STRATA_CHECK(t.w.rows >= 0 && cols > 0 && cols % traits.block_size == 0);
    if (n_tokens == 0 || t.w.rows == 0) continue;
    const internal::Int8KernelFn kernel =
        int8 != nullptr && t.options.precision == MatMulPrecision::kInt8
            ? int8->kernel_for(t.w.type)
            : nullptr;
    if (kernel == nullptr) {
      MatMulFp32(t.w, x, n_tokens, t.y, pool);
    } else {
      jobs[n_jobs++] = {kernel, t.w.data, cols / traits.block_size * traits.type_size, t.w.rows,
                        t.y};
    }
  }
  if (n_jobs > 0) internal::MatMulInt8(*int8, {jobs.data(), n_jobs}, cols, x, n_tokens, pool);
}

}  // namespace strata::backend::cpu
