// Decode attention over the paged KV cache: one query token per sequence, split-K over long
// contexts (Flash-Decoding, Dao et al. 2023).
//
// Grid: (sequence, KV head x head chunk, partition). A CTA takes up to kMaxGroup query heads of
// one GQA group, so each K/V row it loads serves all of them. The sequence's visible keys are cut
// into chunks of plan.chunk_tokens and each partition takes an equal run of whole chunks
// (KeysOfPartition, computed on the device from the actual context), so the plan holds for any
// context. This file holds the plan, the launcher, the merge kernel and the generic kernel (any
// head dims, fp16 or fp32 KV); paged_attention_decode_vec.cu holds the fast fp16 kernel.
//
// The generic kernel walks its chunks with an online softmax (Milakov & Gimelshein 2018): per
// chunk, (1) each warp scores keys, its lanes splitting the head dimension; (2) one warp per head
// takes the chunk's max, rescales its running sum and turns scores into weights; (3) the
// threads, split into dims x key slices, accumulate weights x V in registers. When the
// sequence's keys fit one partition the CTA writes the normalized output; otherwise it writes
// (max, sum, unnormalized output) to the workspace and a merge kernel combines the partitions:
// out = sum_p e^(m_p - M) acc_p / sum_p e^(m_p - M) l_p with M = max_p m_p.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "paged_attention_common.cuh"
#include "paged_attention_decode_vec.cuh"
#include "strata/kernels/paged_attention.h"

namespace strata::kernels {
namespace {

using paged_attention::KeysOfPartition;
using paged_attention::KvRowOffset;
using paged_attention::KvToFloat;
using paged_attention::PartitionKeys;
using paged_attention::WarpMax;
using paged_attention::WarpSum;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
using paged_attention::kMaxGroup;
// Output dims per thread in the V pass: kThreads * 2 covers head_dim_v up to 256.
constexpr int kDimsPerThread = 2;
static_assert(kThreads * kDimsPerThread >= kPagedAttentionMaxHeadDim, "V pass covers all dims");
// Enough CTAs to fill an H100/H200 (132 SMs) several times over; beyond that, no split.
constexpr int64_t kTargetCtas = 1024;
constexpr int64_t kWorkspaceAlign = 256;

int64_t AlignUp(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

using paged_attention::HeadChunks;

// Workspace sections, each [rows, num_partitions(, head_dim_v)] fp32 with rows = seqs * heads.
struct WorkspaceLayout {
  int64_t m_offset = 0;
  int64_t l_offset = 0;
  int64_t acc_offset = 0;
  int64_t total = 0;
};

WorkspaceLayout LayoutWorkspace(int64_t rows, int64_t num_partitions, int64_t head_dim_v) {
  WorkspaceLayout w;
  const int64_t stats = AlignUp(rows * num_partitions * 4, kWorkspaceAlign);
  w.m_offset = 0;
  w.l_offset = stats;
  w.acc_offset = 2 * stats;
  w.total = w.acc_offset + AlignUp(rows * num_partitions * head_dim_v * 4, kWorkspaceAlign);
  return w;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    DecodeKernel(PagedAttentionDecodeArgs a, int32_t head_chunks, int32_t num_partitions,
                 int32_t chunk_tokens, float* ws_m, float* ws_l, float* ws_acc) {
  __shared__ float q_s[kMaxGroup][kPagedAttentionMaxHeadDim];
  // Scores, then weights, of the current chunk; after the last chunk, the key-slice reduction.
  __shared__ float s_s[kMaxGroup][kPagedAttentionMaxChunkTokens];
  __shared__ float m_s[kMaxGroup];
  __shared__ float l_s[kMaxGroup];
  __shared__ float alpha_s[kMaxGroup];
  static_assert(kThreads * kDimsPerThread * kMaxGroup <= kMaxGroup * kPagedAttentionMaxChunkTokens,
                "the reduction fits in the score buffer");

  const int32_t seq = static_cast<int32_t>(blockIdx.x);
  const int32_t kv_head = static_cast<int32_t>(blockIdx.y) / head_chunks;
  const int32_t head_chunk = static_cast<int32_t>(blockIdx.y) % head_chunks;
  const int32_t part = static_cast<int32_t>(blockIdx.z);
  const int32_t num_kv_heads = a.kv.num_kv_heads;
  const int32_t group = a.num_heads / num_kv_heads;
  const int32_t g_begin = head_chunk * kMaxGroup;
  const int32_t gn = min(kMaxGroup, group - g_begin);
  const int32_t head0 = kv_head * group + g_begin;
  const int32_t dk = a.kv.head_dim_k;
  const int32_t dv = a.kv.head_dim_v;
  const int32_t block_size = a.kv.block_size;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;

  const int32_t ctx = a.context_lens[seq];
  const PartitionKeys keys =
      KeysOfPartition(ctx, a.sliding_window, chunk_tokens, num_partitions, part);
  // With at most one partition in use, partition 0 writes the output (zeros without keys).
  const bool direct = keys.used <= 1;
  if (direct ? part != 0 : part >= keys.used) return;  // uniform across the CTA
  const int32_t* table = a.block_tables + a.block_table_offsets[seq];
  const T* k_cache = static_cast<const T*>(a.kv.k);
  const T* v_cache = static_cast<const T*>(a.kv.v);

  for (int i = tid; i < gn * dk; i += kThreads) {
    const int g = i / dk;
    const int d = i % dk;
    q_s[g][d] = a.q[(static_cast<int64_t>(seq) * a.num_heads + head0 + g) * dk + d] * a.scale;
  }
  if (tid < kMaxGroup) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.0f;
    alpha_s[tid] = 1.0f;
  }

  // V pass: thread = (dim slot, key slice); a slice covers every key_slices-th key of a chunk.
  const int dim_threads = dv <= 32 ? 32 : (dv <= 64 ? 64 : kThreads);
  const int key_slices = kThreads / dim_threads;
  const int dslot = tid % dim_threads;
  const int kslice = tid / dim_threads;
  float acc[kMaxGroup][kDimsPerThread];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
#pragma unroll
    for (int i = 0; i < kDimsPerThread; ++i) acc[g][i] = 0.0f;
  }
  __syncthreads();

  for (int32_t c_lo = keys.begin; c_lo < keys.end; c_lo += chunk_tokens) {
    const int32_t n = min(chunk_tokens, keys.end - c_lo);

    // (1) Scores: a warp per key, lanes over the head dimension.
    for (int32_t j = warp; j < n; j += kWarps) {
      const T* krow = k_cache + KvRowOffset(table, c_lo + j, block_size, num_kv_heads, kv_head, dk);
      float dot[kMaxGroup];
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) dot[g] = 0.0f;
      for (int32_t d = lane; d < dk; d += 32) {
        const float kd = KvToFloat(krow, d);
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g) {
          if (g < gn) dot[g] += q_s[g][d] * kd;
        }
      }
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g < gn) {  // gn is uniform: every lane joins the reduction
          const float s = WarpSum(dot[g]);
          if (lane == 0) s_s[g][j] = s;
        }
      }
    }
    __syncthreads();

    // (2) Online softmax update: a warp per head.
    for (int g = warp; g < gn; g += kWarps) {
      const float m_old = m_s[g];
      float mx = -INFINITY;
      for (int32_t j = lane; j < n; j += 32) mx = fmaxf(mx, s_s[g][j]);
      const float m_new = fmaxf(m_old, WarpMax(mx));
      float sum = 0.0f;
      for (int32_t j = lane; j < n; j += 32) {
        const float e = expf(s_s[g][j] - m_new);
        s_s[g][j] = e;
        sum += e;
      }
      sum = WarpSum(sum);
      __syncwarp();
      if (lane == 0) {
        const float alpha = expf(m_old - m_new);  // 0 on the first chunk (m_old = -inf)
        alpha_s[g] = alpha;
        l_s[g] = l_s[g] * alpha + sum;
        m_s[g] = m_new;
      }
    }
    __syncthreads();

    // (3) acc = acc * alpha + weights x V.
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g < gn) {
        const float alpha = alpha_s[g];
#pragma unroll
        for (int i = 0; i < kDimsPerThread; ++i) acc[g][i] *= alpha;
      }
    }
    for (int32_t j = kslice; j < n; j += key_slices) {
      const T* vrow = v_cache + KvRowOffset(table, c_lo + j, block_size, num_kv_heads, kv_head, dv);
      float vd[kDimsPerThread];
#pragma unroll
      for (int i = 0; i < kDimsPerThread; ++i) {
        const int d = dslot + i * dim_threads;
        vd[i] = d < dv ? KvToFloat(vrow, d) : 0.0f;
      }
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g < gn) {
          const float w = s_s[g][j];
#pragma unroll
          for (int i = 0; i < kDimsPerThread; ++i) acc[g][i] += w * vd[i];
        }
      }
    }
    __syncthreads();  // before the next chunk overwrites s_s and alpha_s
  }

  // Sum the key slices' partial outputs (s_s is free: the loop ended on a barrier).
  if (key_slices > 1) {
    float* red = &s_s[0][0];
    auto red_index = [&](int slice, int g, int i) {
      return ((slice * kMaxGroup + g) * kDimsPerThread + i) * dim_threads + dslot;
    };
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
#pragma unroll
      for (int i = 0; i < kDimsPerThread; ++i) red[red_index(kslice, g, i)] = acc[g][i];
    }
    __syncthreads();
    if (kslice == 0) {
      for (int slice = 1; slice < key_slices; ++slice) {
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g) {
#pragma unroll
          for (int i = 0; i < kDimsPerThread; ++i) acc[g][i] += red[red_index(slice, g, i)];
        }
      }
    }
  }

  if (kslice == 0) {
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g >= gn) continue;
      const int64_t row = static_cast<int64_t>(seq) * a.num_heads + head0 + g;
      const float l = l_s[g];
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
      for (int i = 0; i < kDimsPerThread; ++i) {
        const int d = dslot + i * dim_threads;
        if (d >= dv) continue;
        if (direct) {
          a.out[row * dv + d] = acc[g][i] * inv;
        } else {
          ws_acc[(row * num_partitions + part) * dv + d] = acc[g][i];
        }
      }
    }
  }
  if (!direct && tid < gn) {
    const int64_t row = static_cast<int64_t>(seq) * a.num_heads + head0 + tid;
    ws_m[row * num_partitions + part] = m_s[tid];
    ws_l[row * num_partitions + part] = l_s[tid];
  }
}

// One CTA per (sequence, head) row: combines the partitions' (max, sum, partial output) of a
// sequence whose keys took more than one partition (the others were written directly).
__global__ void __launch_bounds__(kThreads)
    MergeKernel(int32_t num_partitions, int32_t chunk_tokens, int32_t num_heads, int32_t dv,
                const int32_t* __restrict__ context_lens, int32_t sliding_window,
                const float* __restrict__ ws_m, const float* __restrict__ ws_l,
                const float* __restrict__ ws_acc, float* __restrict__ out) {
  __shared__ float w_s[kPagedAttentionMaxPartitions];
  const int64_t row = blockIdx.x;
  const int32_t ctx = context_lens[row / num_heads];
  const int32_t used = KeysOfPartition(ctx, sliding_window, chunk_tokens, num_partitions, 0).used;
  if (used <= 1) return;
  const float* m = ws_m + row * num_partitions;
  const float* l = ws_l + row * num_partitions;
  float mx = -INFINITY;
  for (int32_t p = 0; p < used; ++p) mx = fmaxf(mx, m[p]);
  for (int32_t p = static_cast<int32_t>(threadIdx.x); p < used; p += kThreads) {
    w_s[p] = expf(m[p] - mx);  // every used partition has keys: m[p] is finite
  }
  __syncthreads();
  float sum = 0.0f;
  for (int32_t p = 0; p < used; ++p) sum += w_s[p] * l[p];
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  const float* acc = ws_acc + row * num_partitions * dv;
  for (int32_t d = static_cast<int32_t>(threadIdx.x); d < dv; d += kThreads) {
    float o = 0.0f;
    for (int32_t p = 0; p < used; ++p) o += w_s[p] * acc[static_cast<int64_t>(p) * dv + d];
    out[row * dv + d] = o * inv;
  }
}

bool ValidLayer(const PagedKvLayer& kv) {
  return kv.k != nullptr && kv.v != nullptr &&
         (kv.dtype == KvElementType::kF16 || kv.dtype == KvElementType::kF32) &&
         kv.num_kv_heads >= 1 && kv.head_dim_k >= 1 && kv.head_dim_k <= kPagedAttentionMaxHeadDim &&
         kv.head_dim_v >= 1 && kv.head_dim_v <= kPagedAttentionMaxHeadDim && kv.block_size >= 1;
}

template <typename T>
cudaError_t LaunchDecode(const PagedAttentionDecodeArgs& args, const PagedAttentionDecodePlan& plan,
                         float* ws_m, float* ws_l, float* ws_acc, cudaStream_t stream) {
  const int32_t head_chunks = HeadChunks(args.num_heads, args.kv.num_kv_heads);
  cudaError_t err = cudaSuccess;
  if (paged_attention::VecDecodeApplies(args)) {
    err = paged_attention::LaunchVecDecode(args, plan.num_partitions, plan.chunk_tokens, ws_m, ws_l,
                                           ws_acc, stream);
  } else {
    const dim3 grid(static_cast<unsigned>(args.num_seqs),
                    static_cast<unsigned>(args.kv.num_kv_heads * head_chunks),
                    static_cast<unsigned>(plan.num_partitions));
    DecodeKernel<T><<<grid, kThreads, 0, stream>>>(args, head_chunks, plan.num_partitions,
                                                   plan.chunk_tokens, ws_m, ws_l, ws_acc);
    err = cudaGetLastError();
  }
  if (err != cudaSuccess || plan.num_partitions == 1) return err;
  const int64_t rows = static_cast<int64_t>(args.num_seqs) * args.num_heads;
  MergeKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      plan.num_partitions, plan.chunk_tokens, args.num_heads, args.kv.head_dim_v, args.context_lens,
      args.sliding_window, ws_m, ws_l, ws_acc, args.out);
  return cudaGetLastError();
}

}  // namespace

int64_t PagedAttentionDecodeWorkspaceBytes(int32_t num_seqs, int32_t num_heads, int32_t head_dim_v,
                                           int32_t num_partitions) {
  if (num_seqs <= 0 || num_heads <= 0 || head_dim_v <= 0 || num_partitions <= 0) return -1;
  if (num_partitions == 1) return 0;
  // Each factor is < 2^31; keep the product (+ alignment) well inside int64.
  const double approx = static_cast<double>(num_seqs) * num_heads * num_partitions *
                        (static_cast<double>(head_dim_v) + 2.0) * 4.0;
  if (approx > 4.0e18) return -1;
  return LayoutWorkspace(static_cast<int64_t>(num_seqs) * num_heads, num_partitions, head_dim_v)
      .total;
}

PagedAttentionDecodePlan PlanPagedAttentionDecode(int32_t num_seqs, int32_t num_heads,
                                                  int32_t num_kv_heads, int32_t head_dim_v,
                                                  int64_t max_context_len, int32_t sliding_window,
                                                  int32_t chunk_tokens) {
  PagedAttentionDecodePlan plan;
  if (chunk_tokens == 0) chunk_tokens = kPagedAttentionDefaultChunkTokens;
  if (num_seqs <= 0 || num_heads <= 0 || num_kv_heads <= 0 || num_heads % num_kv_heads != 0 ||
      head_dim_v <= 0 || sliding_window < 0 || chunk_tokens < 1 ||
      chunk_tokens > kPagedAttentionMaxChunkTokens) {
    return plan;
  }
  plan.chunk_tokens = chunk_tokens;
  int64_t visible = std::max<int64_t>(max_context_len, 0);
  if (sliding_window > 0) visible = std::min<int64_t>(visible, sliding_window);
  const int64_t chunks = (visible + chunk_tokens - 1) / chunk_tokens;
  const int64_t ctas =
      static_cast<int64_t>(num_seqs) * num_kv_heads * HeadChunks(num_heads, num_kv_heads);
  const int64_t wanted = (kTargetCtas + ctas - 1) / ctas;
  const int64_t partitions =
      std::clamp<int64_t>(std::min(chunks, wanted), 1, kPagedAttentionMaxPartitions);
  const int64_t bytes = PagedAttentionDecodeWorkspaceBytes(num_seqs, num_heads, head_dim_v,
                                                           static_cast<int32_t>(partitions));
  if (bytes < 0) return PagedAttentionDecodePlan{1, chunk_tokens, 0};
  plan.num_partitions = static_cast<int32_t>(partitions);
  plan.workspace_bytes = bytes;
  return plan;
}

int LaunchPagedAttentionDecode(const PagedAttentionDecodeArgs& args,
                               const PagedAttentionDecodePlan& plan, void* workspace,
                               int64_t workspace_bytes, void* stream) {
  constexpr int kInvalid = static_cast<int>(cudaErrorInvalidValue);
  if (args.num_seqs < 0) return kInvalid;
  if (args.num_seqs == 0) return 0;
  if (!ValidLayer(args.kv) || args.q == nullptr || args.out == nullptr ||
      args.block_tables == nullptr || args.block_table_offsets == nullptr ||
      args.context_lens == nullptr || args.num_heads < 1 ||
      args.num_heads % args.kv.num_kv_heads != 0 || args.sliding_window < 0) {
    return kInvalid;
  }
  if (plan.num_partitions < 1 || plan.num_partitions > kPagedAttentionMaxPartitions ||
      plan.chunk_tokens < 1 || plan.chunk_tokens > kPagedAttentionMaxChunkTokens) {
    return kInvalid;
  }
  const int64_t grid_y =
      static_cast<int64_t>(args.kv.num_kv_heads) * HeadChunks(args.num_heads, args.kv.num_kv_heads);
  const int64_t rows = static_cast<int64_t>(args.num_seqs) * args.num_heads;
  if (grid_y > 65535 || rows > 0x7fffffff) return kInvalid;

  float* ws_m = nullptr;
  float* ws_l = nullptr;
  float* ws_acc = nullptr;
  if (plan.num_partitions > 1) {
    const int64_t needed = PagedAttentionDecodeWorkspaceBytes(
        args.num_seqs, args.num_heads, args.kv.head_dim_v, plan.num_partitions);
    if (needed < 0 || workspace == nullptr || workspace_bytes < needed ||
        reinterpret_cast<uintptr_t>(workspace) % kWorkspaceAlign != 0) {
      return kInvalid;
    }
    const WorkspaceLayout layout = LayoutWorkspace(rows, plan.num_partitions, args.kv.head_dim_v);
    auto* base = static_cast<char*>(workspace);
    ws_m = reinterpret_cast<float*>(base + layout.m_offset);
    ws_l = reinterpret_cast<float*>(base + layout.l_offset);
    ws_acc = reinterpret_cast<float*>(base + layout.acc_offset);
  }
  auto* s = static_cast<cudaStream_t>(stream);
  const cudaError_t err = args.kv.dtype == KvElementType::kF16
                              ? LaunchDecode<__half>(args, plan, ws_m, ws_l, ws_acc, s)
                              : LaunchDecode<float>(args, plan, ws_m, ws_l, ws_acc, s);
  return static_cast<int>(err);
}

}  // namespace strata::kernels
