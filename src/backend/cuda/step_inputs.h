// The per-step inputs of a forward pass (backend/cuda internal): what the host derives from a
// Batch — token ids, positions, KV slots, block tables, context lengths — laid out in one buffer
// so that a single host-to-device copy uploads them, and which rows' logits are wanted.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/backend/backend.h"

namespace strata::backend::cuda {

// Sizes of a batch.
struct StepShape {
  int64_t num_tokens = 0;
  int64_t num_seqs = 0;
  int64_t num_rows = 0;       // logits rows wanted
  int64_t table_len = 0;      // block-table entries the step needs (ceil(end / block_size) each)
  int32_t max_query_len = 0;  // the longest slice
  int64_t max_context = 0;    // the largest start_pos + tokens
  bool decode_only = false;   // every slice is one token
};

StepShape ShapeOfBatch(const Batch& batch, int32_t block_size);

// A run of consecutive token rows whose logits are wanted: rows [src, src + count) of the step
// become logits rows [dst, dst + count).
struct RowRun {
  int64_t src = 0;
  int64_t dst = 0;
  int64_t count = 0;
};

// The runs in batch order, adjacent ones merged.
std::vector<RowRun> LogitRowRuns(const Batch& batch);

// A mixed step in the order it runs: every one-token slice first (the decode attention kernel
// takes those), then the longer ones (the prefill kernel), each group in batch order. The
// logits still come back in batch order: `runs` maps the token rows of the run order to them.
struct DecodeFirstStep {
  Batch batch;               // the slices in run order (views of the caller's)
  int64_t num_decode = 0;    // leading one-token slices
  std::vector<RowRun> runs;  // token rows of `batch` -> logits rows of the original batch
};

DecodeFirstStep OrderDecodeFirst(const Batch& batch);

// Byte offsets of the input arrays in the staging buffers (host and device alike), each 256-byte
// aligned; the block table comes last so that a step copies only the entries it uses.
struct StepLayout {
  int64_t tokens = 0;         // int32 [max_tokens]
  int64_t positions = 0;      // int64 [max_tokens]
  int64_t slots = 0;          // int64 [max_tokens]: KV slot per token, -1 for padding
  int64_t context_lens = 0;   // int32 [max_seqs]: start_pos + tokens (0 for padding)
  int64_t table_offsets = 0;  // int32 [max_seqs]
  int64_t cu_seqlens = 0;     // int32 [max_seqs + 1]
  int64_t block_table = 0;    // int32 [max_table]
  int64_t total_bytes = 0;

  static StepLayout For(int64_t max_tokens, int64_t max_seqs, int64_t max_table);
};

// Device pointers into a staging buffer laid out by a StepLayout.
struct StepInputs {
  const int32_t* tokens = nullptr;
  const int64_t* positions = nullptr;
  const int64_t* slots = nullptr;
  const int32_t* context_lens = nullptr;
  const int32_t* table_offsets = nullptr;
  const int32_t* cu_seqlens = nullptr;
  const int32_t* block_table = nullptr;

  static StepInputs At(const void* base, const StepLayout& layout);
};

// Writes the batch's inputs into `host` (laid out by `layout`, large enough for the batch) and
// returns how many leading bytes of it the step uses (the copy to make). A validated batch is
// assumed. With padded_seqs > num_seqs (decode-only batches run in a CUDA-graph bucket), the
// extra sequences are one-token dummies: token 0 at position 0, KV slot -1 (the KV write skips
// it) and context length 0 (attention gives them zeros), so they touch no KV block.
int64_t FillStepInputs(const Batch& batch, int32_t block_size, int64_t padded_seqs,
                       const StepLayout& layout, uint8_t* host);

}  // namespace strata::backend::cuda
