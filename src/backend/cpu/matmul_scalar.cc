// The portable "scalar" kernel family: plain C++ for any CPU, and the reference the SIMD
// families are tested against. Weights are dequantized through model::Dequantize.
#include <span>

#include "matmul_internal.h"
#include "strata/common/check.h"
#include "strata/model/dequantize.h"

namespace strata::backend::cpu::internal {
namespace {

// A GemmFn. Eight partial sums per dot product keep the dependency chains short (and are what
// a compiler may map onto SSE lanes).
void GemmScalar(const float* w, int64_t ldw, int64_t rows, const float* x, int64_t ldx,
                int64_t n_tokens, int64_t k, float* y, int64_t ldy, bool accumulate) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* wr = w + r * ldw;
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* xt = x + t * ldx;
      float acc[8] = {};
      int64_t c = 0;
      for (; c + 8 <= k; c += 8) {
        for (int j = 0; j < 8; ++j) acc[j] += wr[c + j] * xt[c + j];
      }
      float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
      for (; c < k; ++c) s += wr[c] * xt[c];
      float& out = y[t * ldy + r];
      out = accumulate ? out + s : s;
    }
  }
}

DequantFn DequantForScalar(model::GgmlType) { return &DequantGeneric; }

FusedFn FusedForScalar(model::GgmlType) { return nullptr; }

}  // namespace

void DequantGeneric(model::GgmlType type, const uint8_t* src, int64_t num_blocks, float* dst) {
  const model::GgmlTypeTraits traits = model::TraitsOf(type);
  const auto bytes = static_cast<size_t>(num_blocks) * traits.type_size;
  const Status status =
      model::Dequantize(type, std::span<const uint8_t>(src, bytes),
                        static_cast<uint64_t>(num_blocks) * traits.block_size, dst);
  STRATA_CHECK(status.ok());
}

const KernelFamily& ScalarFamily() {
  static const KernelFamily family{"scalar", &GemmScalar, &DequantForScalar, &FusedForScalar,
                                   /*max_fused_tokens=*/0};
  return family;
}

}  // namespace strata::backend::cpu::internal
