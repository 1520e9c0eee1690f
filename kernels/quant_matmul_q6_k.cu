// Q6_K weights times fp32 activations (contract: include/strata/kernels/quant_matmul.h).
#include "quant_matmul.cuh"

namespace strata::kernels {
namespace quant_matmul {
namespace {

// Super-block (210 bytes): ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16],
// fp16 d. Element e = 128h + 32s + l (h < 2, s < 4, l < 32): the low bits are nibble s / 2 of
// ql[64h + 32 * (s % 2) + l], the high bits are bits 2s .. 2s + 1 of qh[32h + l]; the code is
// stored with an offset of 32 and w = (d * scales[e / 16]) * (q - 32), as model::Dequantize.
// Piece p (16 per block, h = p / 8, l0 = 4 * (p % 8)) decodes l = l0 .. l0 + 3 for all four s:
// 16 elements reading 4 bytes each of ql (twice) and qh, with one scale per s.
struct Q6_K {
  static constexpr int kBlockElements = 256;
  static constexpr int kBlockBytes = 210;
  static constexpr int kPieces = 16;
  static constexpr int kAlignment = 2;

  template <int N>
  static __device__ __forceinline__ void Dot(const uint8_t* block, int piece, const float* xs,
                                             float (&acc)[N]) {
    constexpr int kChunk = kChunkCols<N>;
    const int h = piece / 8;
    const int l0 = 4 * (piece % 8);
    const float d = LoadHalf(block + 208);
    const uint32_t ql[2] = {Load4Bytes2Aligned(block + 64 * h + l0),
                            Load4Bytes2Aligned(block + 64 * h + 32 + l0)};
    const uint32_t qh = Load4Bytes2Aligned(block + 128 + 32 * h + l0);
    const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int sub = 8 * h + 2 * s + l0 / 16;
      const float ds = __fmul_rn(d, static_cast<float>(__ldg(scales + sub)));
      float wv[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t low = (ByteOf(ql[s % 2], j) >> (4 * (s / 2))) & 0x0fu;
        const uint32_t high = (ByteOf(qh, j) >> (2 * s)) & 0x03u;
        const int q = static_cast<int>(low | (high << 4)) - 32;
        wv[j] = __fmul_rn(ds, static_cast<float>(q));
      }
      Fma4<N, kChunk>(wv, xs + 128 * h + 32 * s + l0, acc);
    }
  }
};

}  // namespace
}  // namespace quant_matmul

int LaunchQuantMatMulQ6_K(const void* w, int64_t rows, int64_t cols, const float* x, int64_t tokens,
                          float* y, int64_t ldy, void* stream) {
  return quant_matmul::Launch<quant_matmul::Q6_K>(w, rows, cols, x, tokens, y, ldy, stream);
}

}  // namespace strata::kernels
