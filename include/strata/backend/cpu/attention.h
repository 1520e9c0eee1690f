// Paged attention on the CPU: softmax(scale * q k^T) v over the K/V of one sequence held in a
// KvStorage, with causal (and optionally sliding-window) masking.
//
// Algorithm: the online softmax (Milakov & Gimelshein 2018, "Online normalizer calculation for
// softmax"), as in FlashAttention (Dao et al. 2022): keys are visited in chunks; each (query, head)
// row keeps a running max m, a running sum l of exp(s - m) and an accumulator of exp(s - m) * v;
// when a chunk raises m, l and the accumulator are rescaled by exp(m_old - m_new). Scores,
// weights and accumulators are fp32; fp16 K/V are widened with F16C on the AVX2 path, q8_0 K/V
// are dequantized as they are loaded (the same values KvStorage::Read gives).
//
// Pure functions on caller-owned buffers; any thread (see the task split below).
#pragma once

#include <cstdint>
#include <span>

#include "strata/backend/cpu/kv_storage.h"
#include "strata/kv/block_pool.h"

namespace strata::backend::cpu {

struct PagedAttentionArgs {
  const KvStorage* kv = nullptr;
  int32_t layer = 0;
  std::span<const kv::BlockId> block_ids;  // the sequence's blocks, in position order
  const float* q = nullptr;                // [n_q, n_heads, head_dim_k]
  const int64_t* q_pos = nullptr;  // [n_q] absolute positions; K/V for positions <= q_pos[i]
                                   // are already written
  int64_t n_q = 0;
  int32_t n_heads = 0;         // query heads, a multiple of the cache's num_kv_heads (GQA)
  float scale = 1.0f;          // multiplied into q·k
  int32_t sliding_window = 0;  // 0: full causal; else key p is visible to the query at P iff
                               // P - window < p <= P
  float* out = nullptr;        // [n_q, n_heads, head_dim_v]
};

// Work is split in tasks of (query token, KV head): a task computes all query heads of one GQA
// group for one token, so K/V rows are loaded once per group. Task t covers KV head t / n_q and
// query token t % n_q (KV-head-major): a contiguous range holds runs of queries of one KV head,
// which the kernel blocks into tiles of up to 16 (query, head) rows that share each K/V load, so
// hand prefill ranges out in runs of at least 16 / group tasks. The caller runs tasks
// [begin, end) on any thread (a thread pool splits the range); tasks write disjoint outputs, and
// each call uses only its thread's own scratch.
//
// Batch invariance: on a given path (KvIsa), a (query, head) row's output is bit-identical
// however the task range is split or which other queries share the call (a decode step alone,
// the same position inside a prefill chunk, any thread count), because chunk boundaries are fixed
// at absolute positions and every per-row reduction keeps one order.
//
// Returns n_q * num_kv_heads.
int64_t PagedAttentionTasks(const PagedAttentionArgs& args);

// Runs tasks [task_begin, task_end) on the fastest path this CPU supports.
void PagedAttention(const PagedAttentionArgs& args, int64_t task_begin, int64_t task_end);

// The same on a chosen path (tests, benchmarks); `isa` must be supported (KvIsaSupported). kAvx2
// falls back to kScalar when a head dim is not a multiple of 8.
void PagedAttention(const PagedAttentionArgs& args, int64_t task_begin, int64_t task_end,
                    KvIsa isa);

}  // namespace strata::backend::cpu
