// Prefill attention on tensor cores for an fp16 paged KV cache (the fast path of
// LaunchPagedAttentionPrefill; the contract is include/strata/kernels/paged_attention.h).
//
// FlashAttention-2 (Dao 2023) with WMMA 16x16x16 fp16 products accumulated in fp32. A CTA of 4
// warps owns a tile of kRows (query token, head) rows of one GQA group, like the generic kernel
// (paged_attention_prefill.cu), and walks the tile's keys kKeys at a time:
//   1. K and V rows of the step are copied from the cache (through the block table, 16-byte
//      loads) into shared memory as they are stored (fp16);
//   2. S = Q K^T on tensor cores, into shared memory (fp32);
//   3. each warp takes its rows' online softmax (Milakov & Gimelshein 2018) in registers: the
//      step's max and sum, the rescale of the row's output, the weights P;
//   4. O += P V on tensor cores, O kept in shared memory (fp32) between steps.
// Precision: K and V are exact in fp16 already; Q (fp32) and P (fp32 weights) are each split
// into fp16 hi + lo parts (x = hi + lo to about 2^-22 relative) and both parts multiplied, so the
// products carry fp32-level accuracy (twice the tensor work, which prefill affords), as the
// generic kernel and the CPU backend compute. q * scale must stay inside fp16's range (65504).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>

#include "paged_attention_common.cuh"
#include "paged_attention_prefill_tc.cuh"

namespace strata::kernels::paged_attention {
namespace {

using namespace nvcuda;

constexpr int kTcThreads = 128;
constexpr int kTcWarps = kTcThreads / 32;
constexpr int kKeys = 64;  // keys per step
constexpr int kPadHalf = 8;
constexpr int kPadFloat = 4;

template <int D>
constexpr int kTcRows = D <= 128 ? 64 : 32;

// Shared-memory layout (bytes from the start), each section 32-byte aligned for WMMA.
template <int D>
struct TcLayout {
  static constexpr int kRows = kTcRows<D>;
  static constexpr int kLdh = D + kPadHalf;       // Q, K, V rows (halves)
  static constexpr int kLdp = kKeys + kPadHalf;   // P rows (halves)
  static constexpr int kLds = kKeys + kPadFloat;  // S rows (floats)
  static constexpr int kLdo = D + kPadFloat;      // O rows (floats)
  static constexpr int kQHi = 0;
  static constexpr int kQLo = kQHi + kRows * kLdh * 2;
  static constexpr int kK = kQLo + kRows * kLdh * 2;
  static constexpr int kV = kK + kKeys * kLdh * 2;
  static constexpr int kPHi = kV + kKeys * kLdh * 2;
  static constexpr int kPLo = kPHi + kRows * kLdp * 2;
  static constexpr int kS = kPLo + kRows * kLdp * 2;
  static constexpr int kO = kS + kRows * kLds * 4;
  static constexpr int kStats = kO + kRows * kLdo * 4;  // m, l per row
  static constexpr int kBytes = kStats + 2 * kRows * 4;
  static_assert(kQLo % 32 == 0 && kK % 32 == 0 && kV % 32 == 0 && kPHi % 32 == 0 &&
                    kPLo % 32 == 0 && kS % 32 == 0 && kO % 32 == 0 && kStats % 32 == 0,
                "WMMA needs 32-byte aligned tiles");
};

__device__ __forceinline__ void SplitHalf(float x, __half* hi, __half* lo) {
  const __half h = __float2half_rn(x);
  *hi = h;
  *lo = __float2half_rn(x - __half2float(h));
}

template <int D>
__global__ void __launch_bounds__(kTcThreads)
    PrefillTcKernel(PagedAttentionPrefillArgs a, int32_t heads_per_cta, int32_t head_chunks,
                    int32_t tokens_per_cta) {
  using L = TcLayout<D>;
  constexpr int kRows = L::kRows;
  extern __shared__ __align__(128) unsigned char smem[];
  __half* q_hi = reinterpret_cast<__half*>(smem + L::kQHi);
  __half* q_lo = reinterpret_cast<__half*>(smem + L::kQLo);
  __half* k_s = reinterpret_cast<__half*>(smem + L::kK);
  __half* v_s = reinterpret_cast<__half*>(smem + L::kV);
  __half* p_hi = reinterpret_cast<__half*>(smem + L::kPHi);
  __half* p_lo = reinterpret_cast<__half*>(smem + L::kPLo);
  float* s_s = reinterpret_cast<float*>(smem + L::kS);
  float* o_s = reinterpret_cast<float*>(smem + L::kO);
  float* m_s = reinterpret_cast<float*>(smem + L::kStats);
  float* l_s = m_s + kRows;

  const int32_t seq = static_cast<int32_t>(blockIdx.x);
  const int32_t kv_head = static_cast<int32_t>(blockIdx.y) / head_chunks;
  const int32_t head_chunk = static_cast<int32_t>(blockIdx.y) % head_chunks;
  const int32_t num_kv_heads = a.kv.num_kv_heads;
  const int32_t group = a.num_heads / num_kv_heads;
  const int32_t h_begin = head_chunk * heads_per_cta;
  const int32_t hn = min(heads_per_cta, group - h_begin);
  const int32_t head0 = kv_head * group + h_begin;
  const int32_t block_size = a.kv.block_size;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;

  const int32_t q_begin = a.cu_seqlens_q[seq];
  const int32_t n_q = a.cu_seqlens_q[seq + 1] - q_begin;
  const int32_t ctx = a.context_lens[seq];
  const int64_t first_pos = static_cast<int64_t>(ctx) - n_q;
  const int32_t* table = a.block_tables + a.block_table_offsets[seq];
  const auto* k_cache = static_cast<const __half*>(a.kv.k);
  const auto* v_cache = static_cast<const __half*>(a.kv.v);
  const int64_t slot_stride = static_cast<int64_t>(num_kv_heads) * D;
  const int32_t n_tiles = (n_q + tokens_per_cta - 1) / tokens_per_cta;

  for (int32_t tile = static_cast<int32_t>(blockIdx.z); tile < n_tiles;
       tile += static_cast<int32_t>(gridDim.z)) {
    const int32_t t0 = tile * tokens_per_cta;
    const int32_t tn = min(tokens_per_cta, n_q - t0);
    const int32_t rows = tn * hn;

    // Q (scaled, split), O = 0, m = -inf, l = 0.
    for (int i = tid; i < kRows * D; i += kTcThreads) {
      const int r = i / D;
      const int d = i % D;
      float x = 0.0f;
      if (r < rows) {
        const int64_t token = static_cast<int64_t>(q_begin) + t0 + r / hn;
        x = a.q[(token * a.num_heads + head0 + r % hn) * D + d] * a.scale;
      }
      SplitHalf(x, &q_hi[r * L::kLdh + d], &q_lo[r * L::kLdh + d]);
      o_s[r * L::kLdo + d] = 0.0f;
    }
    for (int r = tid; r < kRows; r += kTcThreads) {
      m_s[r] = -INFINITY;
      l_s[r] = 0.0f;
    }

    const int64_t first_tile_pos = first_pos + t0;
    const int64_t key_lo =
        first_tile_pos >= 0 ? FirstVisible(static_cast<int32_t>(first_tile_pos), a.sliding_window)
                            : 0;
    const int64_t key_hi = first_tile_pos + tn - 1;

    for (int64_t k0 = key_lo; k0 <= key_hi; k0 += kKeys) {
      __syncthreads();  // the previous step (or the tile's setup) is done with K, V, P, O
      // 1. K and V rows, 16 bytes per thread per load; keys past key_hi are zeros.
      constexpr int kVecs = D / 8;
      for (int i = tid; i < kKeys * kVecs; i += kTcThreads) {
        const int j = i / kVecs;
        const int c = i % kVecs;
        uint4 kv = make_uint4(0, 0, 0, 0);
        uint4 vv = make_uint4(0, 0, 0, 0);
        if (k0 + j <= key_hi) {
          const int32_t pos = static_cast<int32_t>(k0 + j);
          const int64_t block = table[pos / block_size];
          const int64_t off =
              (block * block_size + pos % block_size) * slot_stride + kv_head * D + 8 * c;
          kv = __ldg(reinterpret_cast<const uint4*>(k_cache + off));
          vv = __ldg(reinterpret_cast<const uint4*>(v_cache + off));
        }
        *reinterpret_cast<uint4*>(&k_s[j * L::kLdh + 8 * c]) = kv;
        *reinterpret_cast<uint4*>(&v_s[j * L::kLdh + 8 * c]) = vv;
      }
      __syncthreads();

      // 2. S = Q K^T: warp w takes 16 x 16 tiles w, w + 4, ...
      constexpr int kSTilesN = kKeys / 16;
      constexpr int kSTiles = (kRows / 16) * kSTilesN;
      for (int t = warp; t < kSTiles; t += kTcWarps) {
        const int tm = t / kSTilesN;
        const int tn16 = t % kSTilesN;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::fill_fragment(acc, 0.0f);
#pragma unroll
        for (int kk = 0; kk < D; kk += 16) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> kb;
          wmma::load_matrix_sync(kb, k_s + tn16 * 16 * L::kLdh + kk, L::kLdh);
          wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> qa;
          wmma::load_matrix_sync(qa, q_hi + tm * 16 * L::kLdh + kk, L::kLdh);
          wmma::mma_sync(acc, qa, kb, acc);
          wmma::load_matrix_sync(qa, q_lo + tm * 16 * L::kLdh + kk, L::kLdh);
          wmma::mma_sync(acc, qa, kb, acc);
        }
        wmma::store_matrix_sync(s_s + tm * 16 * L::kLds + tn16 * 16, acc, L::kLds,
                                wmma::mem_row_major);
      }
      __syncthreads();

      // 3. Online softmax: warp w takes rows w, w + 4, ...; lane j the keys j and j + 32.
      for (int r = warp; r < kRows; r += kTcWarps) {
        int64_t row_lo = 1;
        int64_t row_hi = 0;
        if (r < rows) {
          const int64_t pos = first_pos + t0 + r / hn;
          if (pos >= 0) {
            row_hi = pos;
            row_lo = FirstVisible(static_cast<int32_t>(pos), a.sliding_window);
          }
        }
        float s[2];
        bool vis[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int j = lane + 32 * h;
          const int64_t kp = k0 + j;
          vis[h] = kp <= key_hi && kp >= row_lo && kp <= row_hi;
          s[h] = vis[h] ? s_s[r * L::kLds + j] : -INFINITY;
        }
        const float m_old = m_s[r];
        const float m_new = fmaxf(m_old, WarpMax(fmaxf(s[0], s[1])));
        const bool empty = m_new == -INFINITY;  // no visible key yet
        float p[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) p[h] = vis[h] && !empty ? expf(s[h] - m_new) : 0.0f;
        const float alpha = empty ? 1.0f : expf(m_old - m_new);
        const float sum = WarpSum(p[0] + p[1]);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int j = lane + 32 * h;
          SplitHalf(p[h], &p_hi[r * L::kLdp + j], &p_lo[r * L::kLdp + j]);
        }
        if (alpha != 1.0f) {
          for (int d = lane; d < D; d += 32) o_s[r * L::kLdo + d] *= alpha;
        }
        if (lane == 0) {
          m_s[r] = m_new;
          l_s[r] = l_s[r] * alpha + sum;
        }
      }
      __syncthreads();

      // 4. O += P V: warp w takes 16 x 16 tiles of O w, w + 4, ...
      constexpr int kOTilesN = D / 16;
      constexpr int kOTiles = (kRows / 16) * kOTilesN;
      for (int t = warp; t < kOTiles; t += kTcWarps) {
        const int tm = t / kOTilesN;
        const int tn16 = t % kOTilesN;
        float* o_tile = o_s + tm * 16 * L::kLdo + tn16 * 16;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::load_matrix_sync(acc, o_tile, L::kLdo, wmma::mem_row_major);
#pragma unroll
        for (int kk = 0; kk < kKeys; kk += 16) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> vb;
          wmma::load_matrix_sync(vb, v_s + kk * L::kLdh + tn16 * 16, L::kLdh);
          wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> pa;
          wmma::load_matrix_sync(pa, p_hi + tm * 16 * L::kLdp + kk, L::kLdp);
          wmma::mma_sync(acc, pa, vb, acc);
          wmma::load_matrix_sync(pa, p_lo + tm * 16 * L::kLdp + kk, L::kLdp);
          wmma::mma_sync(acc, pa, vb, acc);
        }
        wmma::store_matrix_sync(o_tile, acc, L::kLdo, wmma::mem_row_major);
      }
    }
    __syncthreads();  // O and l are final

    for (int i = tid; i < rows * D; i += kTcThreads) {
      const int r = i / D;
      const int d = i % D;
      const int64_t token = static_cast<int64_t>(q_begin) + t0 + r / hn;
      const float l = l_s[r];
      a.out[(token * a.num_heads + head0 + r % hn) * D + d] =
          l > 0.0f ? o_s[r * L::kLdo + d] / l : 0.0f;
    }
    __syncthreads();  // every thread is done with O, m, l before the next tile resets them
  }
}

template <int D>
cudaError_t Launch(const PagedAttentionPrefillArgs& args, cudaStream_t stream) {
  constexpr int kRows = kTcRows<D>;
  const int32_t group = args.num_heads / args.kv.num_kv_heads;
  const int32_t heads_per_cta = group < kRows ? group : kRows;
  const int32_t head_chunks = (group + heads_per_cta - 1) / heads_per_cta;
  const int32_t tokens_per_cta = kRows / heads_per_cta;
  const int64_t grid_y = static_cast<int64_t>(args.kv.num_kv_heads) * head_chunks;
  if (grid_y > 65535) return cudaErrorInvalidValue;
  const int64_t max_q = args.max_query_len > 1 ? args.max_query_len : 1;
  const int64_t tiles = (max_q + tokens_per_cta - 1) / tokens_per_cta;
  const dim3 grid(static_cast<unsigned>(args.num_seqs), static_cast<unsigned>(grid_y),
                  static_cast<unsigned>(tiles < 65535 ? tiles : 65535));
  constexpr int kSmem = TcLayout<D>::kBytes;
  cudaError_t err =
      cudaFuncSetAttribute(PrefillTcKernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (err != cudaSuccess) return err;
  PrefillTcKernel<D>
      <<<grid, kTcThreads, kSmem, stream>>>(args, heads_per_cta, head_chunks, tokens_per_cta);
  return cudaGetLastError();
}

}  // namespace

bool TcPrefillApplies(const PagedAttentionPrefillArgs& args) {
  const int32_t d = args.kv.head_dim_k;
  if (args.kv.dtype != KvElementType::kF16 || d != args.kv.head_dim_v ||
      (d != 64 && d != 128 && d != 256) || reinterpret_cast<uintptr_t>(args.kv.k) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(args.kv.v) % 16 != 0) {
    return false;
  }
  int device = 0;
  int major = 0;
  int optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess) {
    return false;
  }
  const int need = d == 64    ? TcLayout<64>::kBytes
                   : d == 128 ? TcLayout<128>::kBytes
                              : TcLayout<256>::kBytes;
  return major >= 8 && optin >= need;
}

cudaError_t LaunchTcPrefill(const PagedAttentionPrefillArgs& args, cudaStream_t stream) {
  switch (args.kv.head_dim_k) {
    case 64:
      return Launch<64>(args, stream);
    case 128:
      return Launch<128>(args, stream);
    case 256:
      return Launch<256>(args, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace strata::kernels::paged_attention
