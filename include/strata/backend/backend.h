// Backend: runs the model's forward pass over one ragged batch. Model code above this line
// never sees CPU threads or CUDA; each backend executes the graph its own way against the
// same paged KV layout (kv::BlockPool ids → the backend's KV storage).
//
// Thread rules: a Backend is driven by one thread (the engine loop); Forward is not reentrant.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/common/status.h"
#include "strata/kv/block_pool.h"
#include "strata/model/model_config.h"
#include "strata/sampling/logprobs.h"
#include "strata/sampling/penalty_window.h"

namespace strata::backend {

// Which logits rows a sequence's slice asks for.
enum class LogitsWanted {
  kLast,  // the last token's (the next token is sampled from it)
  kAll,   // every token's (teacher forcing, perplexity, speculative verification)
  kNone,  // none (a prompt chunk that does not reach the end of the prompt)
};

// One sequence's part of a batch: `tokens` at positions [start_pos, start_pos + tokens.size()).
// Its KV for positions < start_pos is already in `block_ids`, which must also have room for
// the new tokens (ceil((start_pos + n) / block_size) blocks).
struct SequenceSlice {
  std::span<const int32_t> tokens;
  int64_t start_pos = 0;
  std::span<const kv::BlockId> block_ids;
  LogitsWanted logits = LogitsWanted::kLast;
};

struct Batch {
  std::vector<SequenceSlice> sequences;
};

// Logits rows `seq` asks for: tokens.size() for kAll, 1 for kLast, 0 for kNone.
int64_t LogitsRows(const SequenceSlice& seq);

// The checks every backend's Forward makes before running a batch, with the same messages:
// INVALID_ARGUMENT for an empty batch or slice, a negative start, positions beyond the model's
// context, too few blocks for the slice's positions, block ids outside [0, num_blocks), or
// token ids outside the vocabulary.
[[nodiscard]] Status ValidateBatch(const Batch& batch, const model::ModelConfig& config,
                                   int32_t block_size, int32_t num_blocks);

// How one logits row is sampled when the backend samples it (ForwardSampled): the semantics of
// strata::sampling::Sampler::SampleWithDraw (kernels/sampling.h for the device kernels), with
// the draw `u` and the penalty window's counts supplied by the caller, so that each request's
// seeded generator and window stay the only state.
struct RowSampling {
  bool on_backend = false;   // false: the caller samples this row from its logits
  float temperature = 0.0f;  // <= 0: greedy
  int32_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  double u = 0.0;            // the row's uniform draw in [0, 1)
  // Penalties applied before sampling to each token of `penalties` (distinct tokens; empty:
  // none), with these coefficients (sampling::ApplyPenalties).
  std::span<const sampling::TokenCount> penalties;
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  // > 0: also return the sampled token's log-probability and the `logprobs` most likely
  // tokens' (at most sampling::kMaxLogprobs), from the logits before penalties.
  int32_t logprobs = 0;
  // Non-empty: the tokens an on_backend row may be sampled from (sampling/token_mask.h, one
  // word per 32 ids of the vocabulary, at least one bit set), applied before everything above,
  // log-probabilities included; empty: any token. INVALID_ARGUMENT for a mask of another size.
  std::span<const uint32_t> allowed;
};

// What ForwardSampled returns.
struct SampledStep {
  // [rows]: the token of each row the backend sampled, -1 for each row it did not.
  std::vector<int32_t> tokens;
  // [rows with tokens[r] == -1, vocab] fp32: those rows' logits, in row order.
  std::vector<float> logits;
  // [rows]: for each row the backend sampled with logprobs > 0, its log-probabilities; empty
  // entries for the others (or no entries at all when no row asked).
  std::vector<sampling::SampleLogprobs> logprobs;
};

struct KvGeometry {
  int32_t block_size = 16;  // tokens per block
  int32_t num_blocks = 0;   // blocks the KV storage holds
  int64_t bytes_per_block = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Runs the batch: writes every new token's K/V into its sequence's blocks and returns the
  // logits rows in batch order — tokens.size() rows for a kAll sequence, one for kLast, none
  // for kNone — as [rows, vocab_size] fp32 in *logits (resized). INVALID_ARGUMENT for a
  // malformed batch (token ids outside the vocab, too few blocks, positions beyond the
  // context).
  virtual Status Forward(const Batch& batch, std::vector<float>* logits) = 0;

  virtual const model::ModelConfig& config() const = 0;
  virtual KvGeometry kv_geometry() const = 0;

  // Whether ForwardSampled samples the rows marked on_backend itself. When false it returns
  // every row's logits (tokens all -1) and the caller samples them all.
  virtual bool samples_on_backend() const { return false; }

  // Runs the batch as Forward does, then, when samples_on_backend(), samples every row marked
  // on_backend on the backend; only the other rows' logits come back. `rows` has one entry per
  // logits row, in batch order (INVALID_ARGUMENT otherwise). The default runs Forward and
  // returns every row's logits.
  virtual Status ForwardSampled(const Batch& batch, std::span<const RowSampling> rows,
                                SampledStep* out);

  // Calls fn(begin, end) on disjoint ranges that together cover [0, n) and returns when every
  // call has returned: host work between steps, such as sampling the rows the backend returned.
  // A backend whose host threads are idle between steps (the CPU backend's pool) spreads the
  // ranges over them, the calling thread included; the default calls fn(0, n) on the caller.
  // `fn` must not throw, nor call into the backend. The same thread rules as Forward.
  virtual void ParallelForHost(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    if (n > 0) fn(0, n);
  }

  // "cpu" or "cuda": the kind, as metrics labels and --backend name it.
  virtual std::string_view name() const = 0;
  // One line for logs and ModelInfo.backend: "cpu (avx512, 2 threads, int8 matmul)",
  // "cuda (NVIDIA H200, sm_90, 139 GiB, graphs on, device sampling)".
  virtual std::string Describe() const = 0;
};

}  // namespace strata::backend
