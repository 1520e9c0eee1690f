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

// The small-batch kernel for 16-byte aligned Q4_K (the common case): a CTA of 4 warps owns
// kGemvRows(N) rows and its warps split the row's super-blocks between them (split-K: even a
// 1024-row projection makes 512+ CTAs). A lane takes 16 bytes of one block's codes (32 weights:
// 16 low nibbles of sub-block 2c, 16 high nibbles of 2c + 1) from every row of the CTA with one
// load each, plus the block's 16-byte header, so a warp reads 4 consecutive blocks of each row
// per load and the x values it fetches (through L1) serve all the rows. Per sub-block it sums
// q * x and x separately and applies the scale and min once:
//   sum_j (ds q_j - dm) x_j = ds * sum_j q_j x_j - dm * sum_j x_j,
// each product rounded on its own (so a one-hot x still picks out exactly model::Dequantize's
// weight). A code q becomes a float exactly as 2^23 + q minus 2^23 (no int-to-float convert).
template <int N>
constexpr int kGemvRows = 2;
constexpr int kGemvWarps = 4;

__device__ __forceinline__ float Code(uint32_t word, int shift) {
  return __uint_as_float(((word >> shift) & 0x0fu) | 0x4b000000u) - 8388608.0f;
}

__device__ __forceinline__ uint32_t Byte(uint32_t word, int i) { return (word >> (8 * i)) & 0xffu; }

template <int N>
__global__ void __launch_bounds__(kGemvWarps * 32)
    Q4KGemvKernel(const uint8_t* __restrict__ w, int64_t rows, int64_t cols,
                  const float* __restrict__ x, int tokens, float* __restrict__ y, int64_t ldy) {
  constexpr int R = kGemvRows<N>;
  __shared__ float partial[kGemvWarps][R][N];
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * R;
  const int64_t blocks = cols / Q4_K::kBlockElements;
  const int64_t row_bytes = blocks * Q4_K::kBlockBytes;
  const int piece = lane % 8;
  const int c = piece / 2;  // code bytes 32c.. hold sub-blocks 2c (low) and 2c + 1 (high)
  const int h = piece % 2;  // which 16 of those 32 bytes
  const int j_lo = 2 * c;   // sub-block of the low nibbles (j_lo + 1: the high ones)
  const int col0 = 64 * c + 16 * h;

  float acc[R][N];
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int t = 0; t < N; ++t) acc[r][t] = 0.0f;
  }

  for (int64_t b = warp * 4 + lane / 8; b < blocks; b += kGemvWarps * 4) {
    uint4 head[R];
    uint4 codes[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      head[r] = make_uint4(0, 0, 0, 0);
      codes[r] = make_uint4(0, 0, 0, 0);
      if (row0 + r < rows) {
        const uint8_t* block = w + (row0 + r) * row_bytes + b * Q4_K::kBlockBytes;
        head[r] = __ldg(reinterpret_cast<const uint4*>(block));
        codes[r] = __ldg(reinterpret_cast<const uint4*>(block + 16 + 32 * c + 16 * h));
      }
    }
    const float* xb = x + b * Q4_K::kBlockElements + col0;
#pragma unroll
    for (int s = 0; s < 2; ++s) {  // s = 0: low nibbles (sub-block j_lo), 1: high (j_lo + 1)
      float qx[R][N];
      float sx[N];
#pragma unroll
      for (int t = 0; t < N; ++t) {
        sx[t] = 0.0f;
#pragma unroll
        for (int r = 0; r < R; ++r) qx[r][t] = 0.0f;
      }
      // Wide passes keep one code word's x in registers at a time (unrolled, the x loads of all
      // four would be hoisted: 16 N registers, few CTAs per SM and little in flight).
#pragma unroll(N >= 4 ? 1 : 4)
      for (int k = 0; k < 4; ++k) {  // code word k: weights 4k .. 4k + 3 of the 16
        float4 xv[N];
#pragma unroll
        for (int t = 0; t < N; ++t) {
          xv[t] = t < tokens ? __ldg(reinterpret_cast<const float4*>(
                                   xb + static_cast<int64_t>(t) * cols + 32 * s + 4 * k))
                             : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          sx[t] += xv[t].x;
          sx[t] += xv[t].y;
          sx[t] += xv[t].z;
          sx[t] += xv[t].w;
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const uint32_t word = k == 0   ? codes[r].x
                                : k == 1 ? codes[r].y
                                : k == 2 ? codes[r].z
                                         : codes[r].w;
          const float q0 = Code(word, 4 * s);
          const float q1 = Code(word, 8 + 4 * s);
          const float q2 = Code(word, 16 + 4 * s);
          const float q3 = Code(word, 24 + 4 * s);
#pragma unroll
          for (int t = 0; t < N; ++t) {
            float a = qx[r][t];
            a = fmaf(q0, xv[t].x, a);
            a = fmaf(q1, xv[t].y, a);
            a = fmaf(q2, xv[t].z, a);
            a = fmaf(q3, xv[t].w, a);
            qx[r][t] = a;
          }
        }
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        // Header: d, dmin (fp16) in .x; the 12 scale bytes in .y, .z, .w (ScaleMin's layout).
        __half_raw d_raw;
        __half_raw dmin_raw;
        d_raw.x = static_cast<unsigned short>(head[r].x & 0xffffu);
        dmin_raw.x = static_cast<unsigned short>(head[r].x >> 16);
        const int j = j_lo + s;
        const int i = j % 4;
        const uint32_t by = Byte(head[r].y, i);
        const uint32_t bz = Byte(head[r].z, i);
        uint32_t sc;
        uint32_t mn;
        if (j < 4) {
          sc = by & 63u;
          mn = bz & 63u;
        } else {
          const uint32_t bw = Byte(head[r].w, i);
          sc = (bw & 0x0fu) | ((by >> 6) << 4);
          mn = (bw >> 4) | ((bz >> 6) << 4);
        }
        const float ds = __fmul_rn(__half2float(__half(d_raw)), static_cast<float>(sc));
        const float dm = __fmul_rn(__half2float(__half(dmin_raw)), static_cast<float>(mn));
#pragma unroll
        for (int t = 0; t < N; ++t) {
          acc[r][t] =
              __fadd_rn(acc[r][t], __fsub_rn(__fmul_rn(ds, qx[r][t]), __fmul_rn(dm, sx[t])));
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int t = 0; t < N; ++t) {
      float v = acc[r][t];
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
      if (lane == 0) partial[warp][r][t] = v;
    }
  }
  __syncthreads();
  const int i = static_cast<int>(threadIdx.x);
  if (i < R * N) {
    const int r = i / N;
    const int t = i % N;
    if (row0 + r < rows && t < tokens) {
      float v = partial[0][r][t];
#pragma unroll
      for (int k = 1; k < kGemvWarps; ++k) v += partial[k][r][t];
      y[static_cast<int64_t>(t) * ldy + row0 + r] = v;
    }
  }
}

template <int N>
int LaunchGemvPass(const uint8_t* w, int64_t rows, int64_t cols, const float* x, int tokens,
                   float* y, int64_t ldy, cudaStream_t stream) {
  const int64_t grid = (rows + kGemvRows<N> - 1) / kGemvRows<N>;
  Q4KGemvKernel<N><<<static_cast<unsigned>(grid), kGemvWarps * 32, 0, stream>>>(w, rows, cols, x,
                                                                                tokens, y, ldy);
  return static_cast<int>(cudaGetLastError());
}

// The contract of Launch<Q4_K> (a token's result does not depend on its batch); needs w 16-byte
// aligned.
int LaunchGemv(const void* w, int64_t rows, int64_t cols, const float* x, int64_t tokens, float* y,
               int64_t ldy, void* stream) {
  constexpr int kInvalid = static_cast<int>(cudaErrorInvalidValue);
  if (rows < 0 || tokens < 0 || cols <= 0 || cols % Q4_K::kBlockElements != 0 || ldy < rows) {
    return kInvalid;
  }
  if (rows == 0 || tokens == 0) return 0;
  if (w == nullptr || x == nullptr || y == nullptr || reinterpret_cast<uintptr_t>(x) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(y) % 4 != 0 || rows > 0x7ffffffe) {
    return kInvalid;
  }
  const auto* wb = static_cast<const uint8_t*>(w);
  auto s = static_cast<cudaStream_t>(stream);
  for (int64_t t0 = 0; t0 < tokens;) {
    // Passes of at most 8 tokens (16 would spill); each token's arithmetic is the same in any.
    const int width = QuantMatMulTokensPerPass(tokens - t0 < 8 ? tokens - t0 : 8);
    const int count = static_cast<int>(tokens - t0 < width ? tokens - t0 : width);
    const float* xp = x + t0 * cols;
    float* yp = y + t0 * ldy;
    int err = kInvalid;
    switch (width) {
      case 1:
        err = LaunchGemvPass<1>(wb, rows, cols, xp, count, yp, ldy, s);
        break;
      case 2:
        err = LaunchGemvPass<2>(wb, rows, cols, xp, count, yp, ldy, s);
        break;
      case 4:
        err = LaunchGemvPass<4>(wb, rows, cols, xp, count, yp, ldy, s);
        break;
      case 8:
        err = LaunchGemvPass<8>(wb, rows, cols, xp, count, yp, ldy, s);
        break;
      default:
        break;
    }
    if (err != 0) return err;
    t0 += count;
  }
  return 0;
}

}  // namespace
}  // namespace quant_matmul

int LaunchQuantMatMulQ4_K(const void* w, int64_t rows, int64_t cols, const float* x, int64_t tokens,
                          float* y, int64_t ldy, void* stream) {
  if (reinterpret_cast<uintptr_t>(w) % 16 == 0) {
    return quant_matmul::LaunchGemv(w, rows, cols, x, tokens, y, ldy, stream);
  }
  return quant_matmul::Launch<quant_matmul::Q4_K>(w, rows, cols, x, tokens, y, ldy, stream);
}

}  // namespace strata::kernels
