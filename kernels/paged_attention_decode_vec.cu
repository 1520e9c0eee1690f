// Decode attention over an fp16 paged KV cache, vectorized for bandwidth (the fast path of
// LaunchPagedAttentionDecode; the contract is include/strata/kernels/paged_attention.h).
//
// A CTA (128 threads) serves one (sequence, KV head, up to 8 query heads of its GQA group,
// partition) like the generic kernel, but its threads are cut into subgroups of D / 8 lanes, each
// lane holding 8 of the D dimensions: a subgroup takes one key at a time with one 16-byte load
// of K and one of V per lane, so a warp has 32 / (D / 8) keys in flight per load, and each thread
// issues the next kUnroll keys' loads before it uses the current ones (2 x kUnroll x 32 bytes in
// flight per thread). Each
// K/V row is loaded once for every query head of the group. Scores are reduced across the
// subgroup with shuffles; every subgroup keeps its own online softmax (Milakov & Gimelshein
// 2018) in base-2 units (q is pre-scaled by log2 e) and the subgroups are combined through shared
// memory at the end. The partition's block ids are staged in shared memory kTableIds at a time,
// so a key costs no dependent global load for its address.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "paged_attention_common.cuh"
#include "paged_attention_decode_vec.cuh"

namespace strata::kernels::paged_attention {
namespace {

constexpr int kVecThreads = 128;
constexpr int kVecWarps = kVecThreads / 32;
constexpr int kTableIds = 512;  // block ids staged per round
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Eight fp16 values (one 16-byte load) widened to fp32.
__device__ __forceinline__ void Widen(const uint4& v, float (&f)[8]) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __half2 h;
    *reinterpret_cast<uint32_t*>(&h) = words[i];
    const float2 p = __half22float2(h);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

// K and V of the keys t0 + u * kSub + sub (u < kUnroll) that are below t_end (zeros and
// valid[u] = false for the others), 16 bytes each at the thread's dims; table_s holds the block
// ids from block b0 on.
template <int D, int kUnroll, int kSub>
__device__ __forceinline__ void LoadKeys(int32_t t0, int32_t t_end, int32_t b0, int sub, int dim0,
                                         int32_t block_size, int64_t row_stride, int32_t kv_head,
                                         const int32_t* table_s, const __half* k_cache,
                                         const __half* v_cache, uint4 (&k)[kUnroll],
                                         uint4 (&v)[kUnroll], bool (&valid)[kUnroll]) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int32_t t = t0 + u * kSub + sub;
    valid[u] = t < t_end;
    k[u] = make_uint4(0, 0, 0, 0);
    v[u] = make_uint4(0, 0, 0, 0);
    if (valid[u]) {
      const int64_t block = table_s[t / block_size - b0];
      const int64_t off = (block * block_size + t % block_size) * row_stride + kv_head * D + dim0;
      k[u] = __ldg(reinterpret_cast<const uint4*>(k_cache + off));
      v[u] = __ldg(reinterpret_cast<const uint4*>(v_cache + off));
    }
  }
}

// D: head dim (64, 128 or 256); G: query heads per CTA rounded up to 1, 2, 4 or 8.
template <int D, int G>
__global__ void __launch_bounds__(kVecThreads)
    VecDecodeKernel(PagedAttentionDecodeArgs a, int32_t head_chunks, int32_t num_partitions,
                    int32_t chunk_tokens, float* ws_m, float* ws_l, float* ws_acc) {
  constexpr int kLanes = D / 8;               // lanes per key
  constexpr int kPerWarp = 32 / kLanes;       // keys per warp per load
  constexpr int kSub = kVecWarps * kPerWarp;  // subgroups per CTA
  constexpr int kUnroll = G <= 4 ? 4 : 2;     // keys per subgroup per iteration
  constexpr int kStep = kSub * kUnroll;       // keys per CTA per iteration
  __shared__ int32_t table_s[kTableIds];
  __shared__ float red_m[kSub][G];
  __shared__ float red_l[kSub][G];
  __shared__ __align__(16) float red_acc[kSub][G][D];

  const int32_t seq = static_cast<int32_t>(blockIdx.x);
  const int32_t kv_head = static_cast<int32_t>(blockIdx.y) / head_chunks;
  const int32_t head_chunk = static_cast<int32_t>(blockIdx.y) % head_chunks;
  const int32_t part = static_cast<int32_t>(blockIdx.z);
  const int32_t num_kv_heads = a.kv.num_kv_heads;
  const int32_t group = a.num_heads / num_kv_heads;
  const int32_t g_begin = head_chunk * kMaxGroup;
  const int32_t gn = min(G, group - g_begin);
  const int32_t head0 = kv_head * group + g_begin;
  const int32_t block_size = a.kv.block_size;

  const int32_t ctx = a.context_lens[seq];
  const PartitionKeys keys =
      KeysOfPartition(ctx, a.sliding_window, chunk_tokens, num_partitions, part);
  const bool direct = keys.used <= 1;
  if (direct ? part != 0 : part >= keys.used) return;  // uniform across the CTA

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % 32;
  const int sub = (tid / 32) * kPerWarp + lane / kLanes;  // this thread's subgroup
  const int dim0 = (lane % kLanes) * 8;                   // its 8 dimensions

  // q, scaled by scale * log2(e): the softmax runs in base 2.
  float q[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (g < gn) {
      const float4* qp = reinterpret_cast<const float4*>(
          a.q + (static_cast<int64_t>(seq) * a.num_heads + head0 + g) * D + dim0);
      const float4 q0 = __ldg(qp);
      const float4 q1 = __ldg(qp + 1);
      const float s = a.scale * kLog2e;
      q[g][0] = q0.x * s;
      q[g][1] = q0.y * s;
      q[g][2] = q0.z * s;
      q[g][3] = q0.w * s;
      q[g][4] = q1.x * s;
      q[g][5] = q1.y * s;
      q[g][6] = q1.z * s;
      q[g][7] = q1.w * s;
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) q[g][i] = 0.0f;
    }
  }
  float m[G];
  float l[G];
  float acc[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[g][i] = 0.0f;
  }

  const int32_t* table = a.block_tables + a.block_table_offsets[seq];
  const auto* k_cache = static_cast<const __half*>(a.kv.k);
  const auto* v_cache = static_cast<const __half*>(a.kv.v);
  const int64_t row_stride = static_cast<int64_t>(num_kv_heads) * D;  // elements per slot

  if (keys.end > keys.begin) {
    const int32_t first_block = keys.begin / block_size;
    const int32_t last_block = (keys.end - 1) / block_size;
    for (int32_t b0 = first_block; b0 <= last_block; b0 += kTableIds) {
      const int32_t nb = min(kTableIds, last_block - b0 + 1);
      __syncthreads();  // the previous round's readers are done
      for (int i = tid; i < nb; i += kVecThreads) table_s[i] = table[b0 + i];
      __syncthreads();
      const int64_t round_lo = static_cast<int64_t>(b0) * block_size;
      const int64_t round_hi = round_lo + static_cast<int64_t>(nb) * block_size;
      const int32_t t_begin = static_cast<int32_t>(keys.begin > round_lo ? keys.begin : round_lo);
      const int32_t t_end = static_cast<int32_t>(keys.end < round_hi ? keys.end : round_hi);
      // Software pipeline: the loads of the next kStep keys are issued before the current ones
      // are used, so a thread has 2 x kUnroll keys' K and V in flight.
      uint4 kraw[kUnroll];
      uint4 vraw[kUnroll];
      bool valid[kUnroll];
      LoadKeys<D, kUnroll, kSub>(t_begin, t_end, b0, sub, dim0, block_size, row_stride, kv_head,
                                 table_s, k_cache, v_cache, kraw, vraw, valid);
      for (int32_t t0 = t_begin; t0 < t_end; t0 += kStep) {
        uint4 knext[kUnroll];
        uint4 vnext[kUnroll];
        bool vnext_valid[kUnroll];
        LoadKeys<D, kUnroll, kSub>(t_end - t0 > kStep ? t0 + kStep : t_end, t_end, b0, sub, dim0,
                                   block_size, row_stride, kv_head, table_s, k_cache, v_cache,
                                   knext, vnext, vnext_valid);
        // Scores of the kUnroll keys for every head, reduced across the subgroup.
        float s[kUnroll][G];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          float kf[8];
          Widen(kraw[u], kf);
#pragma unroll
          for (int g = 0; g < G; ++g) {
            float dot = 0.0f;
#pragma unroll
            for (int i = 0; i < 8; ++i) dot = fmaf(q[g][i], kf[i], dot);
#pragma unroll
            for (int off = kLanes / 2; off > 0; off /= 2) {
              dot += __shfl_xor_sync(kFullMask, dot, off);
            }
            s[u][g] = valid[u] ? dot : -INFINITY;
          }
        }
        // Online softmax update, once per iteration.
#pragma unroll
        for (int g = 0; g < G; ++g) {
          float mx = s[0][g];
#pragma unroll
          for (int u = 1; u < kUnroll; ++u) mx = fmaxf(mx, s[u][g]);
          const float m_new = fmaxf(m[g], mx);
          if (m_new == -INFINITY) continue;         // no key yet (uniform across the subgroup)
          const float alpha = exp2f(m[g] - m_new);  // 0 while m[g] is -inf
          l[g] *= alpha;
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[g][i] *= alpha;
          m[g] = m_new;
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          float vf[8];
          Widen(vraw[u], vf);
#pragma unroll
          for (int g = 0; g < G; ++g) {
            const float p = valid[u] ? exp2f(s[u][g] - m[g]) : 0.0f;
            l[g] += p;
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[g][i] = fmaf(p, vf[i], acc[g][i]);
          }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          kraw[u] = knext[u];
          vraw[u] = vnext[u];
          valid[u] = vnext_valid[u];
        }
      }
    }
  }

  // Combine the subgroups: M = max m_s, L = sum 2^(m_s - M) l_s, o = sum 2^(m_s - M) acc_s.
  const bool leader = lane % kLanes == 0;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (leader) {
      red_m[sub][g] = m[g];
      red_l[sub][g] = l[g];
    }
    float4* dst = reinterpret_cast<float4*>(&red_acc[sub][g][dim0]);
    dst[0] = make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
    dst[1] = make_float4(acc[g][4], acc[g][5], acc[g][6], acc[g][7]);
  }
  __syncthreads();
  for (int i = tid; i < gn * D; i += kVecThreads) {
    const int g = i / D;
    const int d = i % D;
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < kSub; ++j) mx = fmaxf(mx, red_m[j][g]);
    float sum = 0.0f;
    float o = 0.0f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int j = 0; j < kSub; ++j) {
        const float w = red_m[j][g] == -INFINITY ? 0.0f : exp2f(red_m[j][g] - mx);
        sum = fmaf(w, red_l[j][g], sum);
        o = fmaf(w, red_acc[j][g][d], o);
      }
    }
    const int64_t row = static_cast<int64_t>(seq) * a.num_heads + head0 + g;
    if (direct) {
      a.out[row * D + d] = sum > 0.0f ? o / sum : 0.0f;
    } else {
      ws_acc[(row * num_partitions + part) * D + d] = o;
      if (d == 0) {
        ws_m[row * num_partitions + part] = mx * kLn2;  // natural-log units for the merge
        ws_l[row * num_partitions + part] = sum;
      }
    }
  }
}

template <int D, int G>
cudaError_t Launch(const PagedAttentionDecodeArgs& args, int32_t num_partitions,
                   int32_t chunk_tokens, float* ws_m, float* ws_l, float* ws_acc,
                   cudaStream_t stream) {
  const int32_t head_chunks = HeadChunks(args.num_heads, args.kv.num_kv_heads);
  const dim3 grid(static_cast<unsigned>(args.num_seqs),
                  static_cast<unsigned>(args.kv.num_kv_heads * head_chunks),
                  static_cast<unsigned>(num_partitions));
  VecDecodeKernel<D, G><<<grid, kVecThreads, 0, stream>>>(args, head_chunks, num_partitions,
                                                          chunk_tokens, ws_m, ws_l, ws_acc);
  return cudaGetLastError();
}

template <int D>
cudaError_t LaunchForDim(const PagedAttentionDecodeArgs& args, int32_t num_partitions,
                         int32_t chunk_tokens, float* ws_m, float* ws_l, float* ws_acc,
                         cudaStream_t stream) {
  const int32_t group = args.num_heads / args.kv.num_kv_heads;
  if (group == 1)
    return Launch<D, 1>(args, num_partitions, chunk_tokens, ws_m, ws_l, ws_acc, stream);
  if (group == 2)
    return Launch<D, 2>(args, num_partitions, chunk_tokens, ws_m, ws_l, ws_acc, stream);
  if (group <= 4)
    return Launch<D, 4>(args, num_partitions, chunk_tokens, ws_m, ws_l, ws_acc, stream);
  return Launch<D, 8>(args, num_partitions, chunk_tokens, ws_m, ws_l, ws_acc, stream);
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool VecDecodeApplies(const PagedAttentionDecodeArgs& args) {
  const int32_t d = args.kv.head_dim_k;
  return args.kv.dtype == KvElementType::kF16 && d == args.kv.head_dim_v &&
         (d == 64 || d == 128 || d == 256) && Aligned16(args.q) && Aligned16(args.kv.k) &&
         Aligned16(args.kv.v);
}

cudaError_t LaunchVecDecode(const PagedAttentionDecodeArgs& args, int32_t num_partitions,
                            int32_t chunk_tokens, float* ws_m, float* ws_l, float* ws_acc,
                            cudaStream_t stream) {
  switch (args.kv.head_dim_k) {
    case 64:
      return LaunchForDim<64>(args, num_partitions, chunk_tokens, ws_m, ws_l, ws_acc, stream);
    case 128:
      return LaunchForDim<128>(args, num_partitions, chunk_tokens, ws_m, ws_l, ws_acc, stream);
    case 256:
      return LaunchForDim<256>(args, num_partitions, chunk_tokens, ws_m, ws_l, ws_acc, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace strata::kernels::paged_attention
