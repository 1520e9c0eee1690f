// Internal interface between the MatMul driver (matmul.cc) and its kernel families
// (matmul_scalar.cc, matmul_avx2.cc, matmul_avx512.cc). Not part of the public API.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <string_view>

#include "strata/backend/cpu/thread_pool.h"
#include "strata/model/ggml_type.h"

namespace strata::backend::cpu::internal {

// Dequantizes `num_blocks` consecutive blocks of `type` from `src` (no alignment needed) into
// `dst` (num_blocks * block_size floats), bit for bit as model::Dequantize does.
using DequantFn = void (*)(model::GgmlType type, const uint8_t* src, int64_t num_blocks,
                           float* dst);

// The fp32 tile product on dequantized (or F32) weights:
//   y[t * ldy + r] = sum_{c < k} w[r * ldw + c] * x[t * ldx + c]      (accumulate == false)
//   y[t * ldy + r] += ...                                             (accumulate == true)
// for r < rows, t < n_tokens. w: [rows, k] with row stride ldw floats; x: [n_tokens, k] with
// row stride ldx; y: [n_tokens, ldy]. No alignment needed; k >= 1.
using GemmFn = void (*)(const float* w, int64_t ldw, int64_t rows, const float* x, int64_t ldx,
                        int64_t n_tokens, int64_t k, float* y, int64_t ldy, bool accumulate);

// A fused dequantize-and-multiply for few tokens: as GemmFn with w given as `rows` quantized
// rows of `num_blocks` blocks each, row stride `row_bytes`, and k = num_blocks * block_size.
using FusedFn = void (*)(const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t num_blocks,
                         const float* x, int64_t ldx, int64_t n_tokens, float* y, int64_t ldy,
                         bool accumulate);

struct KernelFamily {
  std::string_view name;
  GemmFn gemm;
  // The fastest dequantizer this family has for `type` (every type MatMul supports has one).
  DequantFn (*dequant_for)(model::GgmlType type);
  // The fused kernel for `type`, or nullptr where the family has none; used for
  // n_tokens <= max_fused_tokens.
  FusedFn (*fused_for)(model::GgmlType type);
  int max_fused_tokens;
};

// The portable family (plain C++; every type model::CanDequantize handles).
const KernelFamily& ScalarFamily();
// SIMD families; nullptr when not built for this architecture. Callers check the CPU first.
const KernelFamily* Avx2Family();
const KernelFamily* Avx512Family();

// Every fp16 bit pattern's float value (model::Fp16ToFloat), for kernels that convert one scale
// at a time. 256 KiB; the few thousand entries a model's scales use stay cached.
struct Fp16ToFloatTable {
  float values[65536];
};
extern const Fp16ToFloatTable kFp16ToFloat;

// Dequantizes through model::Dequantize (any type it supports).
void DequantGeneric(model::GgmlType type, const uint8_t* src, int64_t num_blocks, float* dst);

// A 64-byte aligned buffer of T that only grows (per-thread scratch of the kernels: full-width
// loads that straddle two cache lines cost a third of their speed, so operands start on lines).
template <typename T>
class AlignedBuffer {
 public:
  T* Get(int64_t count) {
    if (count > size_) {
      data_.reset(static_cast<T*>(::operator new[](count * sizeof(T), kAlign)));
      size_ = count;
    }
    return data_.get();
  }

 private:
  static constexpr std::align_val_t kAlign{64};
  struct Free {
    void operator()(T* p) const { ::operator delete[](p, kAlign); }
  };
  std::unique_ptr<T[], Free> data_;
  int64_t size_ = 0;
};

// fn(begin, end) over [0, n) in pieces of at least `grain`, on `pool` (nullptr: this thread).
template <typename Fn>
void ForEach(ThreadPool* pool, int64_t n, int64_t grain, const Fn& fn) {
  if (pool != nullptr) {
    pool->ParallelFor(n, grain, fn);
  } else {
    fn(int64_t{0}, n);
  }
}

}  // namespace strata::backend::cpu::internal
