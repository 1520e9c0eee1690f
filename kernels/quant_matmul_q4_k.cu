// Q4_K weights times fp32 activations (contract: include/strata/kernels/quant_matmul.h).
#include "quant_matmul.cuh"

namespace strata::kernels {
namespace quant_matmul {
namespace {

// Super-block (144 bytes): fp16 d, dmin; scales[12] (8 six-bit scales and 8 six-bit mins);
// qs[128]. Sub-block 2c + s (32 elements, c < 4) holds nibble s of qs[32c .. 32c + 31], and
// w = (d * sc) * q - dmin * m, each product rounded on its own, as model::Dequantize.
// Piece p (16 per block, c = p / 4, l0 = 8 * (p % 4)) decodes qs[32c + l0 .. + 7]: elements
// 64c + l0 + j (low nibbles, sub-block 2c) and 64c + 32 + l0 + j (high nibbles, 2c + 1).
struct Q4_K {
  static constexpr int kBlockElements = 256;
  static constexpr int kBlockBytes = 144;
  static constexpr int kPieces = 16;
  static constexpr int kAlignment = 8;

  // Scale and min of sub-block j from the 12 packed bytes (ggml's get_scale_min_k4): bytes
  // 0-3 hold scales 0-3 in their low 6 bits, bytes 4-7 mins 0-3; byte 8 + i holds the low
  // 4 bits of scale 4 + i (low nibble) and min 4 + i (high nibble), whose top 2 bits sit in
  // bits 6-7 of bytes i and 4 + i.
  static __device__ __forceinline__ void ScaleMin(const uint8_t* s, int j, uint32_t* sc,
                                                  uint32_t* mn) {
    if (j < 4) {
      *sc = __ldg(s + j) & 63u;
      *mn = __ldg(s + j + 4) & 63u;
    } else {
      const uint32_t packed = __ldg(s + j + 4);
      *sc = (packed & 0x0fu) | ((static_cast<uint32_t>(__ldg(s + j - 4)) >> 6) << 4);
      *mn = (packed >> 4) | ((static_cast<uint32_t>(__ldg(s + j)) >> 6) << 4);
    }
  }

  template <int N>
  static __device__ __forceinline__ void Dot(const uint8_t* block, int piece, const float* xs,
                                             float (&acc)[N]) {
    constexpr int kChunk = kChunkCols<N>;
    const int c = piece / 4;
    const int l0 = 8 * (piece % 4);
    const float d = LoadHalf(block);
    const float dmin = LoadHalf(block + 2);
    uint32_t sc[2];
    uint32_t mn[2];
    ScaleMin(block + 4, 2 * c, &sc[0], &mn[0]);
    ScaleMin(block + 4, 2 * c + 1, &sc[1], &mn[1]);
    const uint2 codes = __ldg(reinterpret_cast<const uint2*>(block + 16 + 32 * c + l0));
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const float ds = __fmul_rn(d, static_cast<float>(sc[s]));
      const float dm = __fmul_rn(dmin, static_cast<float>(mn[s]));
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const uint32_t word = half == 0 ? codes.x : codes.y;
        float wv[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t q = (ByteOf(word, j) >> (4 * s)) & 0x0fu;
          wv[j] = __fsub_rn(__fmul_rn(ds, static_cast<float>(q)), dm);
        }
        Fma4<N, kChunk>(wv, xs + 64 * c + 32 * s + l0 + 4 * half, acc);
      }
    }
  }
};

}  // namespace
}  // namespace quant_matmul

int LaunchQuantMatMulQ4_K(const void* w, int64_t rows, int64_t cols, const float* x, int64_t tokens,
                          float* y, int64_t ldy, void* stream) {
  return quant_matmul::Launch<quant_matmul::Q4_K>(w, rows, cols, x, tokens, y, ldy, stream);
}

}  // namespace strata::kernels
