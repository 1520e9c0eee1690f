// Token-embedding gather: one thread per output element decodes its value straight from the
// table's block (a few byte loads, cached), over a [tokens, n] grid.
#include <cuda_runtime.h>

#include <cstdint>

#include "block_decode.cuh"
#include "launch_util.cuh"
#include "strata/kernels/embedding.h"

namespace strata::kernels {
namespace {

constexpr int kThreads = 256;

struct BlockShape {
  int64_t elements;
  int64_t bytes;
};

bool ShapeOf(uint32_t type, BlockShape* shape) {
  switch (static_cast<EmbeddingType>(type)) {
    case EmbeddingType::kF32:
      *shape = {1, 4};
      return true;
    case EmbeddingType::kF16:
      *shape = {1, 2};
      return true;
    case EmbeddingType::kQ8_0:
      *shape = {32, 34};
      return true;
    case EmbeddingType::kQ4_K:
      *shape = {256, 144};
      return true;
    case EmbeddingType::kQ6_K:
      *shape = {256, 210};
      return true;
  }
  return false;
}

__device__ __forceinline__ float DecodeF32(const uint8_t* row, int64_t c) {
  const uint8_t* p = row + 4 * c;
  const uint32_t bits = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
                        (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
  return __uint_as_float(bits);
}

__device__ __forceinline__ float DecodeF16(const uint8_t* row, int64_t c) {
  return detail::LoadFp16(row + 2 * c);
}

template <EmbeddingType kType>
__global__ void EmbeddingGatherKernel(const uint8_t* __restrict__ table, int64_t vocab_size,
                                      int64_t row_bytes, int64_t n,
                                      const int32_t* __restrict__ token_ids, int64_t num_tokens,
                                      float scale, float* __restrict__ out) {
  for (int64_t t = blockIdx.x; t < num_tokens; t += gridDim.x) {
    const int64_t id = token_ids[t];
    const bool valid = id >= 0 && id < vocab_size;
    const uint8_t* row = table + (valid ? id : 0) * row_bytes;
    float* o = out + t * n;
    for (int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; c < n;
         c += static_cast<int64_t>(gridDim.y) * blockDim.x) {
      if (!valid) {
        o[c] = 0.0f;
        continue;
      }
      float v = 0.0f;
      if constexpr (kType == EmbeddingType::kF32) v = DecodeF32(row, c);
      if constexpr (kType == EmbeddingType::kF16) v = DecodeF16(row, c);
      if constexpr (kType == EmbeddingType::kQ8_0) v = detail::DecodeQ8_0(row, c);
      if constexpr (kType == EmbeddingType::kQ4_K) v = detail::DecodeQ4_K(row, c);
      if constexpr (kType == EmbeddingType::kQ6_K) v = detail::DecodeQ6_K(row, c);
      // The CPU skips ScaleInPlace for a scale of 1; so do we (keeps NaN payloads alike).
      o[c] = scale != 1.0f ? __fmul_rn(v, scale) : v;
    }
  }
}

template <EmbeddingType kType>
void Launch(const void* table, int64_t vocab_size, int64_t row_bytes, int64_t n,
            const int32_t* token_ids, int64_t num_tokens, float scale, float* out,
            cudaStream_t stream) {
  const dim3 grid = detail::RowGrid(num_tokens, n, kThreads);
  EmbeddingGatherKernel<kType><<<grid, kThreads, 0, stream>>>(static_cast<const uint8_t*>(table),
                                                              vocab_size, row_bytes, n, token_ids,
                                                              num_tokens, scale, out);
}

}  // namespace

int64_t EmbeddingRowBytes(uint32_t type, int64_t n) {
  BlockShape shape{};
  if (!ShapeOf(type, &shape) || n < 1 || n % shape.elements != 0) return -1;
  return n / shape.elements * shape.bytes;
}

int LaunchEmbeddingGather(const void* table, EmbeddingType type, int64_t vocab_size, int64_t n,
                          const int32_t* token_ids, int64_t num_tokens, float scale, float* out,
                          void* stream) {
  const int64_t row_bytes = EmbeddingRowBytes(static_cast<uint32_t>(type), n);
  if (row_bytes < 0 || n > INT32_MAX || vocab_size < 1 || num_tokens < 0) {
    return detail::kInvalidValue;
  }
  // The byte offset id * row_bytes must fit in int64.
  if (vocab_size > INT64_MAX / row_bytes) return detail::kInvalidValue;
  if (num_tokens == 0) return 0;
  if (table == nullptr || token_ids == nullptr || out == nullptr) return detail::kInvalidValue;
  cudaStream_t s = detail::AsStream(stream);
  switch (type) {
    case EmbeddingType::kF32:
      Launch<EmbeddingType::kF32>(table, vocab_size, row_bytes, n, token_ids, num_tokens, scale,
                                  out, s);
      break;
    case EmbeddingType::kF16:
      Launch<EmbeddingType::kF16>(table, vocab_size, row_bytes, n, token_ids, num_tokens, scale,
                                  out, s);
      break;
    case EmbeddingType::kQ8_0:
      Launch<EmbeddingType::kQ8_0>(table, vocab_size, row_bytes, n, token_ids, num_tokens, scale,
                                   out, s);
      break;
    case EmbeddingType::kQ4_K:
      Launch<EmbeddingType::kQ4_K>(table, vocab_size, row_bytes, n, token_ids, num_tokens, scale,
                                   out, s);
      break;
    case EmbeddingType::kQ6_K:
      Launch<EmbeddingType::kQ6_K>(table, vocab_size, row_bytes, n, token_ids, num_tokens, scale,
                                   out, s);
      break;
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace strata::kernels
