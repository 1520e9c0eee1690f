// Prefill / chunked-prefill attention over the paged KV cache, FlashAttention-2 style (Dao 2023)
// on CUDA cores in fp32: the generic kernel (any head dims, fp16 or fp32 KV) and the launcher,
// which sends fp16 KV with equal head dims of 64, 128 or 256 to the tensor-core kernel
// (paged_attention_prefill_tc.cu).
//
// Grid: (sequence, KV head x head chunk, query tile). A CTA holds a tile of kRows (query token,
// head) rows, all of one GQA group (row r = token r / heads + head r % heads), so every K/V row
// it loads serves the whole group. It walks the tile's key range [first visible key of its first
// token, position of its last token] in steps of kKeys keys: the step's K (and V) rows are read
// through the block table into shared memory as fp32, then each warp updates its kRowsPerWarp
// rows: lane j scores key j for every row, the row's max and sum come from warp reductions
// (online softmax, Milakov & Gimelshein 2018), and the weights reach the lanes that own output
// dims by shuffles. Accumulators stay in registers. A key outside a row's own window
// (P - window < p <= P) gets weight 0.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "paged_attention_common.cuh"
#include "paged_attention_prefill_tc.cuh"
#include "strata/kernels/paged_attention.h"

namespace strata::kernels {
namespace {

using paged_attention::FirstVisible;
using paged_attention::kFullMask;
using paged_attention::KvRowOffset;
using paged_attention::KvToFloat;
using paged_attention::WarpMax;
using paged_attention::WarpSum;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kKeys = 32;  // keys per step: one per lane
static_assert(kKeys == 32, "lane j scores key j");

// Rows per CTA: fewer for the widest heads so that the accumulators (kRowsPerWarp x kMaxD / 32
// floats per thread) stay at 64 registers.
template <int kMaxD>
constexpr int kRowsPerCta = kMaxD > 128 ? 32 : 64;

// Shared memory: Q [rows, dk], K [kKeys, dk + 1] (padded: lane j reads row j without bank
// conflicts), V [kKeys, dv].
int64_t SharedBytes(int rows, int32_t dk, int32_t dv) {
  return (static_cast<int64_t>(rows) * dk + static_cast<int64_t>(kKeys) * (dk + 1) +
          static_cast<int64_t>(kKeys) * dv) *
         static_cast<int64_t>(sizeof(float));
}

struct Tiling {
  int32_t heads_per_cta;   // query heads of one group per CTA
  int32_t head_chunks;     // CTAs per KV head
  int32_t tokens_per_cta;  // query tokens per CTA
};

template <typename T, int kMaxD>
__global__ void __launch_bounds__(kThreads)
    PrefillKernel(PagedAttentionPrefillArgs a, Tiling tiling) {
  constexpr int kRows = kRowsPerCta<kMaxD>;
  constexpr int kRowsPerWarp = kRows / kWarps;
  constexpr int kDimChunks = kMaxD / 32;
  extern __shared__ float smem[];

  const int32_t dk = a.kv.head_dim_k;
  const int32_t dv = a.kv.head_dim_v;
  float* q_s = smem;                    // [kRows, dk]
  float* k_s = q_s + kRows * dk;        // [kKeys, dk + 1]
  float* v_s = k_s + kKeys * (dk + 1);  // [kKeys, dv]

  const int32_t seq = static_cast<int32_t>(blockIdx.x);
  const int32_t kv_head = static_cast<int32_t>(blockIdx.y) / tiling.head_chunks;
  const int32_t head_chunk = static_cast<int32_t>(blockIdx.y) % tiling.head_chunks;
  const int32_t num_kv_heads = a.kv.num_kv_heads;
  const int32_t group = a.num_heads / num_kv_heads;
  const int32_t h_begin = head_chunk * tiling.heads_per_cta;
  const int32_t hn = min(tiling.heads_per_cta, group - h_begin);
  const int32_t head0 = kv_head * group + h_begin;
  const int32_t block_size = a.kv.block_size;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;

  const int32_t q_begin = a.cu_seqlens_q[seq];
  const int32_t n_q = a.cu_seqlens_q[seq + 1] - q_begin;
  const int32_t ctx = a.context_lens[seq];
  // Position of the sequence's first query (negative only for a caller error).
  const int64_t first_pos = static_cast<int64_t>(ctx) - n_q;
  const int32_t* table = a.block_tables + a.block_table_offsets[seq];
  const T* k_cache = static_cast<const T*>(a.kv.k);
  const T* v_cache = static_cast<const T*>(a.kv.v);
  const int32_t tpc = tiling.tokens_per_cta;
  const int32_t n_tiles = n_q / tpc + (n_q % tpc != 0 ? 1 : 0);

  for (int32_t tile = static_cast<int32_t>(blockIdx.z); tile < n_tiles;
       tile += static_cast<int32_t>(gridDim.z)) {
    const int32_t t0 = tile * tpc;
    const int32_t tn = min(tpc, n_q - t0);
    const int32_t rows = tn * hn;

    for (int i = tid; i < kRows * dk; i += kThreads) {
      const int r = i / dk;
      const int d = i % dk;
      float x = 0.0f;
      if (r < rows) {
        const int64_t token = static_cast<int64_t>(q_begin) + t0 + r / hn;
        const int32_t head = head0 + r % hn;
        x = a.q[(token * a.num_heads + head) * dk + d] * a.scale;
      }
      q_s[i] = x;
    }

    // This warp's rows and the keys each sees: [row_lo, row_hi] (empty for padding rows and
    // rows at negative positions).
    int32_t row_lo[kRowsPerWarp];
    int32_t row_hi[kRowsPerWarp];
    float m[kRowsPerWarp];
    float l[kRowsPerWarp];
    float acc[kRowsPerWarp][kDimChunks];
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = warp * kRowsPerWarp + i;
      row_lo[i] = 1;
      row_hi[i] = 0;
      if (r < rows) {
        const int64_t pos = first_pos + t0 + r / hn;  // <= ctx - 1, fits int32 when >= 0
        if (pos >= 0) {
          row_hi[i] = static_cast<int32_t>(pos);
          row_lo[i] = FirstVisible(row_hi[i], a.sliding_window);
        }
      }
      m[i] = -INFINITY;
      l[i] = 0.0f;
#pragma unroll
      for (int c = 0; c < kDimChunks; ++c) acc[i][c] = 0.0f;
    }

    // The tile's keys: from the first token's first visible key to the last token's position.
    const int64_t first_tile_pos = first_pos + t0;
    const int64_t key_lo =
        first_tile_pos >= 0 ? FirstVisible(static_cast<int32_t>(first_tile_pos), a.sliding_window)
                            : 0;
    const int64_t key_hi = first_tile_pos + tn - 1;

    for (int64_t k0 = key_lo; k0 <= key_hi; k0 += kKeys) {
      __syncthreads();  // the previous step's readers of k_s / v_s are done
      for (int j = warp; j < kKeys; j += kWarps) {
        const bool in_range = k0 + j <= key_hi;
        int64_t k_off = 0;
        int64_t v_off = 0;
        if (in_range) {
          const int32_t pos = static_cast<int32_t>(k0 + j);
          k_off = KvRowOffset(table, pos, block_size, num_kv_heads, kv_head, dk);
          v_off = KvRowOffset(table, pos, block_size, num_kv_heads, kv_head, dv);
        }
        // Out-of-range keys are zeros, not whatever the cache holds: weight 0 x NaN is NaN.
        for (int32_t d = lane; d < dk; d += 32) {
          k_s[j * (dk + 1) + d] = in_range ? KvToFloat(k_cache + k_off, d) : 0.0f;
        }
        for (int32_t d = lane; d < dv; d += 32) {
          v_s[j * dv + d] = in_range ? KvToFloat(v_cache + v_off, d) : 0.0f;
        }
      }
      __syncthreads();

      // Scores: lane j takes key k0 + j for each of the warp's rows.
      float s[kRowsPerWarp];
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) s[i] = 0.0f;
      const float* krow = k_s + lane * (dk + 1);
      const float* qrows = q_s + warp * kRowsPerWarp * dk;
      for (int32_t d = 0; d < dk; ++d) {
        const float kd = krow[d];
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i) s[i] += qrows[i * dk + d] * kd;
      }

      // Online softmax per row; p[i] is this lane's key's weight for row i.
      const int64_t key_pos = k0 + lane;
      float p[kRowsPerWarp];
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const bool visible = key_pos <= key_hi && key_pos >= row_lo[i] && key_pos <= row_hi[i];
        const float step_max = WarpMax(visible ? s[i] : -INFINITY);
        const float m_new = fmaxf(m[i], step_max);
        // m_new = -inf: the row has seen no key yet; keep it empty (and avoid -inf - -inf).
        const bool empty = m_new == -INFINITY;
        p[i] = visible && !empty ? expf(s[i] - m_new) : 0.0f;
        const float alpha = empty ? 1.0f : expf(m[i] - m_new);
        l[i] = l[i] * alpha + WarpSum(p[i]);
        m[i] = m_new;
#pragma unroll
        for (int c = 0; c < kDimChunks; ++c) acc[i][c] *= alpha;
      }

      // acc += weights x V: lane owns dims lane + 32c.
#pragma unroll 4
      for (int j = 0; j < kKeys; ++j) {
        float vd[kDimChunks];
#pragma unroll
        for (int c = 0; c < kDimChunks; ++c) {
          const int d = lane + 32 * c;
          vd[c] = d < dv ? v_s[j * dv + d] : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i) {
          const float pj = __shfl_sync(kFullMask, p[i], j);
#pragma unroll
          for (int c = 0; c < kDimChunks; ++c) acc[i][c] += pj * vd[c];
        }
      }
    }

#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = warp * kRowsPerWarp + i;
      if (r >= rows) continue;
      const int64_t token = static_cast<int64_t>(q_begin) + t0 + r / hn;
      const int32_t head = head0 + r % hn;
      const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
      float* out = a.out + (token * a.num_heads + head) * dv;
#pragma unroll
      for (int c = 0; c < kDimChunks; ++c) {
        const int d = lane + 32 * c;
        if (d < dv) out[d] = acc[i][c] * inv;
      }
    }
    __syncthreads();  // every warp is done with q_s before the next tile rewrites it
  }
}

template <typename T, int kMaxD>
cudaError_t LaunchPrefill(const PagedAttentionPrefillArgs& args, cudaStream_t stream) {
  constexpr int kRows = kRowsPerCta<kMaxD>;
  const int32_t group = args.num_heads / args.kv.num_kv_heads;
  Tiling tiling;
  tiling.heads_per_cta = std::min(group, kRows);
  tiling.head_chunks = (group + tiling.heads_per_cta - 1) / tiling.heads_per_cta;
  tiling.tokens_per_cta = kRows / tiling.heads_per_cta;
  const int64_t grid_y = static_cast<int64_t>(args.kv.num_kv_heads) * tiling.head_chunks;
  if (grid_y > 65535) return cudaErrorInvalidValue;
  const int64_t tiles =
      (static_cast<int64_t>(std::max(args.max_query_len, 1)) + tiling.tokens_per_cta - 1) /
      tiling.tokens_per_cta;
  const dim3 grid(static_cast<unsigned>(args.num_seqs), static_cast<unsigned>(grid_y),
                  static_cast<unsigned>(std::min<int64_t>(tiles, 65535)));
  const int64_t smem = SharedBytes(kRows, args.kv.head_dim_k, args.kv.head_dim_v);
  auto kernel = PrefillKernel<T, kMaxD>;
  // Above 48 KiB a kernel must opt in to dynamic shared memory (sm_80: up to 163 KiB).
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  kernel<<<grid, kThreads, static_cast<size_t>(smem), stream>>>(args, tiling);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchPrefillForDims(const PagedAttentionPrefillArgs& args, cudaStream_t stream) {
  const int32_t max_dim = std::max(args.kv.head_dim_k, args.kv.head_dim_v);
  if (max_dim <= 64) return LaunchPrefill<T, 64>(args, stream);
  if (max_dim <= 128) return LaunchPrefill<T, 128>(args, stream);
  return LaunchPrefill<T, 256>(args, stream);
}

}  // namespace

int LaunchPagedAttentionPrefill(const PagedAttentionPrefillArgs& args, void* stream) {
  constexpr int kInvalid = static_cast<int>(cudaErrorInvalidValue);
  if (args.num_seqs < 0) return kInvalid;
  if (args.num_seqs == 0) return 0;
  const PagedKvLayer& kv = args.kv;
  if (kv.k == nullptr || kv.v == nullptr ||
      (kv.dtype != KvElementType::kF16 && kv.dtype != KvElementType::kF32) || kv.num_kv_heads < 1 ||
      kv.head_dim_k < 1 || kv.head_dim_k > kPagedAttentionMaxHeadDim || kv.head_dim_v < 1 ||
      kv.head_dim_v > kPagedAttentionMaxHeadDim || kv.block_size < 1) {
    return kInvalid;
  }
  if (args.q == nullptr || args.out == nullptr || args.cu_seqlens_q == nullptr ||
      args.block_tables == nullptr || args.block_table_offsets == nullptr ||
      args.context_lens == nullptr || args.num_heads < 1 || args.num_heads % kv.num_kv_heads != 0 ||
      args.sliding_window < 0 || args.max_query_len < 0) {
    return kInvalid;
  }
  auto* s = static_cast<cudaStream_t>(stream);
  if (paged_attention::TcPrefillApplies(args)) {
    return static_cast<int>(paged_attention::LaunchTcPrefill(args, s));
  }
  const cudaError_t err = kv.dtype == KvElementType::kF16 ? LaunchPrefillForDims<__half>(args, s)
                                                          : LaunchPrefillForDims<float>(args, s);
  return static_cast<int>(err);
}

}  // namespace strata::kernels
