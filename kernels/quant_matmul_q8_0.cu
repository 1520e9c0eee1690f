// Q8_0 weights times fp32 activations (contract: include/strata/kernels/quant_matmul.h).
#include "quant_matmul.cuh"

namespace strata::kernels {
namespace quant_matmul {
namespace {

// Block (34 bytes): fp16 d; int8 q[32]; w[j] = d * q[j] (as model::Dequantize). Piece p
// (4 per block) decodes codes 8p .. 8p + 7.
struct Q8_0 {
  static constexpr int kBlockElements = 32;
  static constexpr int kBlockBytes = 34;
  static constexpr int kPieces = 4;
  static constexpr int kAlignment = 2;

  template <int N>
  static __device__ __forceinline__ void Dot(const uint8_t* block, int piece, const float* xs,
                                             float (&acc)[N]) {
    constexpr int kChunk = kChunkCols<N>;
    const float d = LoadHalf(block);
    const uint8_t* q = block + 2 + 8 * piece;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const uint32_t word = Load4Bytes2Aligned(q + 4 * half);
      float wv[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const auto code = static_cast<int8_t>(ByteOf(word, j));
        wv[j] = __fmul_rn(d, static_cast<float>(code));
      }
      Fma4<N, kChunk>(wv, xs + 8 * piece + 4 * half, acc);
    }
  }
};

}  // namespace
}  // namespace quant_matmul

int LaunchQuantMatMulQ8_0(const void* w, int64_t rows, int64_t cols, const float* x, int64_t tokens,
                          float* y, int64_t ldy, void* stream) {
  return quant_matmul::Launch<quant_matmul::Q8_0>(w, rows, cols, x, tokens, y, ldy, stream);
}

}  // namespace strata::kernels
