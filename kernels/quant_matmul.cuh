// The shared body of the quantized matrix products (quant_matmul_q8_0.cu, _q4_k.cu, _q6_k.cu):
// the kernel template, the launcher and the decode helpers the formats share. The contract is
// in include/strata/kernels/quant_matmul.h.
//
// A format is a struct with
//   kBlockElements, kBlockBytes: the GGUF block;
//   kPieces: lanes per block (a divisor of 32), each decoding kBlockElements / kPieces codes;
//   kAlignment: the alignment w must have for the format's loads;
//   template <int N> static __device__ void Dot(block, piece, xs, float (&acc)[N]):
//     adds the piece's decoded weights times x to acc[t] for t < N, where xs points at the
//     block's first column in the staged x chunk and token t's columns start kChunk floats
//     further per token (kChunkCols<N>).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "strata/kernels/quant_matmul.h"

namespace strata::kernels::quant_matmul {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = 2;
constexpr int kRowsPerCta = kWarps * kRowsPerWarp;
constexpr int kMaxTokensPerPass = 16;
constexpr int kSharedFloats = 8192;  // 32 KiB of staged x per CTA, whatever the pass width

// Columns of x staged per chunk for a pass of N tokens: a multiple of 256 (whole blocks).
template <int N>
constexpr int kChunkCols = kSharedFloats / N;

// An fp16 stored at a 2-byte aligned address, widened exactly.
__device__ __forceinline__ float LoadHalf(const uint8_t* p) {
  __half_raw raw;
  raw.x = __ldg(reinterpret_cast<const unsigned short*>(p));
  return __half2float(__half(raw));
}

// Four bytes at a 2-byte aligned address, little-endian.
__device__ __forceinline__ uint32_t Load4Bytes2Aligned(const uint8_t* p) {
  const auto* p16 = reinterpret_cast<const unsigned short*>(p);
  return static_cast<uint32_t>(__ldg(p16)) | (static_cast<uint32_t>(__ldg(p16 + 1)) << 16);
}

__device__ __forceinline__ uint32_t ByteOf(uint32_t word, int i) {
  return (word >> (8 * i)) & 0xffu;
}

// acc[t] += sum_j w[j] * xs[t * kChunk + j] for j < 4 (xs 16-byte aligned).
template <int N, int kChunk>
__device__ __forceinline__ void Fma4(const float (&w)[4], const float* xs, float (&acc)[N]) {
#pragma unroll
  for (int t = 0; t < N; ++t) {
    const float4 v = *reinterpret_cast<const float4*>(xs + t * kChunk);
    float a = acc[t];
    a = fmaf(w[0], v.x, a);
    a = fmaf(w[1], v.y, a);
    a = fmaf(w[2], v.z, a);
    a = fmaf(w[3], v.w, a);
    acc[t] = a;
  }
}

// One CTA: rows [blockIdx.x * kRowsPerCta, +kRowsPerCta), tokens [0, tokens) of this pass
// (tokens <= N; the rest of the pass is zero in shared memory and never written).
template <class Format, int N>
__global__ void __launch_bounds__(kThreads)
    QuantMatMulKernel(const uint8_t* __restrict__ w, int64_t rows, int64_t cols,
                      const float* __restrict__ x, int tokens, float* __restrict__ y, int64_t ldy) {
  static_assert(N >= 1 && N <= kMaxTokensPerPass && kSharedFloats % (N * 256) == 0);
  constexpr int kChunk = kChunkCols<N>;
  __shared__ __align__(16) float xs[N * kChunk];
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int64_t row0 =
      static_cast<int64_t>(blockIdx.x) * kRowsPerCta + static_cast<int64_t>(warp) * kRowsPerWarp;
  const int64_t row_bytes = cols / Format::kBlockElements * Format::kBlockBytes;

  float acc[kRowsPerWarp][N];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
    for (int t = 0; t < N; ++t) acc[r][t] = 0.0f;
  }

  for (int64_t c0 = 0; c0 < cols; c0 += kChunk) {
    const int chunk_cols = static_cast<int>(cols - c0 < kChunk ? cols - c0 : kChunk);
    __syncthreads();  // every warp is done with the previous chunk
    const int vectors_per_token = chunk_cols / 4;
    for (int i = static_cast<int>(threadIdx.x); i < N * vectors_per_token; i += kThreads) {
      const int t = i / vectors_per_token;
      const int v = i % vectors_per_token;
      float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (t < tokens) {
        value =
            __ldg(reinterpret_cast<const float4*>(x + static_cast<int64_t>(t) * cols + c0 + 4 * v));
      }
      *reinterpret_cast<float4*>(xs + t * kChunk + 4 * v) = value;
    }
    __syncthreads();

    const int pieces = chunk_cols / Format::kBlockElements * Format::kPieces;
    const int64_t first_block = c0 / Format::kBlockElements;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t row = row0 + r;
      if (row < rows) {  // uniform across the warp
        const uint8_t* blocks = w + row * row_bytes + first_block * Format::kBlockBytes;
        for (int item = lane; item < pieces; item += 32) {
          const int b = item / Format::kPieces;
          const int piece = item % Format::kPieces;
          Format::template Dot<N>(blocks + static_cast<int64_t>(b) * Format::kBlockBytes, piece,
                                  xs + b * Format::kBlockElements, acc[r]);
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t row = row0 + r;
    if (row >= rows) continue;  // uniform across the warp
#pragma unroll
    for (int t = 0; t < N; ++t) {
      float v = acc[r][t];
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
      if (lane == 0 && t < tokens) y[static_cast<int64_t>(t) * ldy + row] = v;
    }
  }
}

template <class Format, int N>
int LaunchPass(const uint8_t* w, int64_t rows, int64_t cols, const float* x, int tokens, float* y,
               int64_t ldy, unsigned grid, cudaStream_t stream) {
  QuantMatMulKernel<Format, N><<<grid, kThreads, 0, stream>>>(w, rows, cols, x, tokens, y, ldy);
  return static_cast<int>(cudaGetLastError());
}

template <class Format>
int Launch(const void* w, int64_t rows, int64_t cols, const float* x, int64_t tokens, float* y,
           int64_t ldy, void* stream) {
  constexpr int kInvalid = static_cast<int>(cudaErrorInvalidValue);
  if (rows < 0 || tokens < 0 || cols <= 0 || cols % Format::kBlockElements != 0 || ldy < rows) {
    return kInvalid;
  }
  if (rows == 0 || tokens == 0) return 0;
  if (w == nullptr || x == nullptr || y == nullptr) return kInvalid;
  if (reinterpret_cast<uintptr_t>(w) % Format::kAlignment != 0 ||
      reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(y) % 4 != 0) {
    return kInvalid;
  }
  const int64_t grid = (rows + kRowsPerCta - 1) / kRowsPerCta;
  if (grid > 0x7fffffff) return kInvalid;
  const auto* wb = static_cast<const uint8_t*>(w);
  auto s = static_cast<cudaStream_t>(stream);
  for (int64_t t0 = 0; t0 < tokens;) {
    const int width = QuantMatMulTokensPerPass(tokens - t0);
    const int count = static_cast<int>(tokens - t0 < width ? tokens - t0 : width);
    const float* xp = x + t0 * cols;
    float* yp = y + t0 * ldy;
    const auto g = static_cast<unsigned>(grid);
    int err = kInvalid;
    switch (width) {
      case 1:
        err = LaunchPass<Format, 1>(wb, rows, cols, xp, count, yp, ldy, g, s);
        break;
      case 2:
        err = LaunchPass<Format, 2>(wb, rows, cols, xp, count, yp, ldy, g, s);
        break;
      case 4:
        err = LaunchPass<Format, 4>(wb, rows, cols, xp, count, yp, ldy, g, s);
        break;
      case 8:
        err = LaunchPass<Format, 8>(wb, rows, cols, xp, count, yp, ldy, g, s);
        break;
      case 16:
        err = LaunchPass<Format, 16>(wb, rows, cols, xp, count, yp, ldy, g, s);
        break;
      default:
        break;
    }
    if (err != 0) return err;
    t0 += count;
  }
  return 0;
}

}  // namespace strata::kernels::quant_matmul
