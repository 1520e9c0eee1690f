// Launch API of the paged attention kernels (kernels/paged_attention_decode.cu,
// kernels/paged_attention_prefill.cu). Plain C++17 (nvcc compiles the kernels as C++17): callers
// need no CUDA headers. Pointers are device pointers unless said otherwise; `stream` is a
// cudaStream_t (nullptr: the default stream). Each Launch* returns the cudaError_t of the launch
// as an int (0 = success) and returns cudaErrorInvalidValue without launching for an invalid
// shape.
//
// Semantics are those of the CPU backend (backend/cpu/attention.h): for query head h of a token
// at absolute position P, out = softmax_p(scale * q·k_p) v_p over the cached positions p with
// P - sliding_window < p <= P (all p <= P when sliding_window is 0); query head h reads KV head
// h / (num_heads / num_kv_heads) (GQA). No soft-capping. Scores, softmax and accumulation are
// fp32 (online softmax, Milakov & Gimelshein 2018; FlashAttention-2, Dao 2023; split-K decode
// as in Flash-Decoding, Dao et al. 2023). The new tokens' K and V must already be written into
// the cache (the CPU backend writes a layer's K/V for the whole batch before its attention).
//
// KV layout, the CPU KvStorage's layout of one layer: K is
// [num_blocks, block_size, num_kv_heads, head_dim_k] and V is
// [num_blocks, block_size, num_kv_heads, head_dim_v], elements fp16 (IEEE binary16 bits) or
// fp32. Element offsets are computed in 64 bits, so a layer may exceed 2^31 elements.
//
// Block tables: one flat int32 array holding every sequence's block ids in position order;
// sequence s's entries start at block_table_offsets[s], and position p of s lives in block
// block_tables[block_table_offsets[s] + p / block_size], slot p % block_size. It must list at
// least ceil(context_lens[s] / block_size) blocks, each < the cache's num_blocks.
#pragma once

#include <cstdint>

namespace strata::kernels {

enum class KvElementType : int32_t { kF16 = 0, kF32 = 1 };

// One layer of a paged KV cache.
struct PagedKvLayer {
  const void* k = nullptr;  // [num_blocks, block_size, num_kv_heads, head_dim_k] of `dtype`
  const void* v = nullptr;  // [num_blocks, block_size, num_kv_heads, head_dim_v] of `dtype`
  KvElementType dtype = KvElementType::kF16;
  int32_t num_kv_heads = 0;
  int32_t head_dim_k = 0;  // 1..kPagedAttentionMaxHeadDim
  int32_t head_dim_v = 0;  // 1..kPagedAttentionMaxHeadDim
  int32_t block_size = 0;  // tokens per block, >= 1
};

// Largest head_dim_k / head_dim_v the kernels take.
inline constexpr int32_t kPagedAttentionMaxHeadDim = 256;

// ---- Decode: one query token per sequence, split-K over long contexts --------------------------
// Largest chunk (the granularity of a split, in keys); the generic kernel scores a chunk at a
// time in shared memory.
inline constexpr int32_t kPagedAttentionMaxChunkTokens = 512;
// The default chunk: small enough that a short context still spreads over many CTAs.
inline constexpr int32_t kPagedAttentionDefaultChunkTokens = 64;
// Largest number of split-K partitions (the merge kernel keeps one weight per partition).
inline constexpr int32_t kPagedAttentionMaxPartitions = 256;

struct PagedAttentionDecodeArgs {
  PagedKvLayer kv;
  const float* q = nullptr;  // [num_seqs, num_heads, head_dim_k] fp32, RoPE applied, unscaled
  const int32_t* block_tables = nullptr;         // [sum of the sequences' table lengths]
  const int32_t* block_table_offsets = nullptr;  // [num_seqs]
  // [num_seqs] tokens in the cache, >= 1, the query's own included: the query sits at position
  // context_lens[s] - 1. A sequence with context_lens[s] <= 0 gets an all-zero output.
  const int32_t* context_lens = nullptr;
  int32_t num_seqs = 0;        // >= 0 (0: nothing is launched)
  int32_t num_heads = 0;       // query heads, a positive multiple of kv.num_kv_heads
  float scale = 1.0f;          // multiplied into q·k
  int32_t sliding_window = 0;  // 0: full causal; else the last sliding_window positions
  float* out = nullptr;        // [num_seqs, num_heads, head_dim_v] fp32, written
};

// How a decode batch is split: computed on the host, once per batch shape, used for every layer
// (and safe to capture in a CUDA graph: the split adapts to the actual context on the device).
struct PagedAttentionDecodePlan {
  // CTAs per (sequence, query-head group). On the device each sequence cuts its visible keys
  // into chunks of chunk_tokens and gives each partition an equal run of whole chunks
  // (ceil(chunks / num_partitions) of them), so a context shorter than the plan assumed uses
  // fewer partitions (the others exit at once) and a longer one only gives each partition more
  // keys. A sequence whose keys fit one partition writes its output directly; otherwise the
  // partitions' (max, sum, partial output) are merged by a second kernel. 1: no workspace.
  int32_t num_partitions = 1;
  int32_t chunk_tokens = kPagedAttentionDefaultChunkTokens;  // 1..kPagedAttentionMaxChunkTokens
  int64_t workspace_bytes = 0;  // device scratch LaunchPagedAttentionDecode needs
};

// Pure host arithmetic (no device needed). Splits a sequence's visible keys (at most
// max_context_len, or sliding_window when that is smaller) into chunks of `chunk_tokens` (0: the
// default, kPagedAttentionDefaultChunkTokens) and gives each (sequence, head group) as many
// partitions as there are chunks, but no more than needed to fill a large GPU with CTAs (a big
// batch needs no split) and at most kPagedAttentionMaxPartitions. Invalid inputs (non-positive
// counts, chunk_tokens out of range) give the trivial plan {1, default chunk, 0}.
PagedAttentionDecodePlan PlanPagedAttentionDecode(int32_t num_seqs, int32_t num_heads,
                                                  int32_t num_kv_heads, int32_t head_dim_v,
                                                  int64_t max_context_len, int32_t sliding_window,
                                                  int32_t chunk_tokens = 0);

// Bytes of workspace a decode with `num_partitions` partitions needs (0 when it is 1): per
// (sequence, head, partition) a running max, a sum and head_dim_v partial outputs, fp32, each
// section 256-byte aligned. Pure host arithmetic; -1 for invalid (negative or zero) inputs.
int64_t PagedAttentionDecodeWorkspaceBytes(int32_t num_seqs, int32_t num_heads, int32_t head_dim_v,
                                           int32_t num_partitions);

// Decode attention. `workspace`: device memory of at least plan.workspace_bytes (given as
// `workspace_bytes`), 256-byte aligned (cudaMalloc's alignment); may be null when the plan needs
// none. Launches one kernel, plus a merge kernel when plan.num_partitions > 1. fp16 KV with
// head_dim_k == head_dim_v in {64, 128, 256} (and 16-byte aligned q, K and V) runs the
// vectorized kernel (16-byte loads, several keys in flight per thread, each K/V row loaded once
// for the whole GQA group, the block table staged in shared memory); other shapes run the
// generic kernel, with the same results up to rounding.
int LaunchPagedAttentionDecode(const PagedAttentionDecodeArgs& args,
                               const PagedAttentionDecodePlan& plan, void* workspace,
                               int64_t workspace_bytes, void* stream);

// ---- Prefill / chunked prefill: a ragged batch of query runs ------------------------------------

struct PagedAttentionPrefillArgs {
  PagedKvLayer kv;
  // [total_q, num_heads, head_dim_k] fp32, RoPE applied, unscaled; sequence s owns query rows
  // [cu_seqlens_q[s], cu_seqlens_q[s + 1]).
  const float* q = nullptr;
  const int32_t* cu_seqlens_q = nullptr;         // [num_seqs + 1], non-decreasing, [0] = 0
  const int32_t* block_tables = nullptr;         // [sum of the sequences' table lengths]
  const int32_t* block_table_offsets = nullptr;  // [num_seqs]
  // [num_seqs] tokens in the cache after this step's writes, >= the sequence's query count n:
  // its queries are the last n positions, query i at context_lens[s] - n + i (chunked prefill:
  // context_lens[s] - n > 0 cached tokens before the chunk).
  const int32_t* context_lens = nullptr;
  int32_t num_seqs = 0;  // >= 0 (0: nothing is launched)
  // Upper bound of any sequence's query count (host side), sizes the grid; a larger count is
  // still computed correctly (the CTAs loop), only with less parallelism.
  int32_t max_query_len = 0;
  int32_t num_heads = 0;       // query heads, a positive multiple of kv.num_kv_heads
  float scale = 1.0f;          // multiplied into q·k
  int32_t sliding_window = 0;  // 0: full causal; else the last sliding_window positions
  float* out = nullptr;        // [total_q, num_heads, head_dim_v] fp32, written
};

// Prefill attention, one kernel. context_lens[s] < n is a caller error; the rows it puts at
// negative positions see no keys and get all-zero outputs.
int LaunchPagedAttentionPrefill(const PagedAttentionPrefillArgs& args, void* stream);

}  // namespace strata::kernels
