// A small scheduler for the backend tests: sequences whose prompts are prefilled in chunks
// (staggered by one step per sequence) and then decoded, mixed in the same batches, with block
// ids of their own. Host code; drives any Backend.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "strata/backend/backend.h"

namespace strata::backend::cuda::testing {

inline constexpr int64_t kBlocksPerSequence = 40;  // 160 positions at block size 4

inline int32_t ArgMax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

struct Seq {
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int64_t prompt_len = 0;
  int64_t computed = 0;  // tokens whose KV is written
  int64_t chunk = 0;     // prompt tokens per prefill chunk
  int64_t first_step = 0;
  int generated = 0;
  std::vector<kv::BlockId> blocks;
};

inline std::vector<Seq> MakeSequences(const std::vector<int64_t>& prompt_lens,
                                      const std::vector<int64_t>& chunks, int64_t vocab) {
  std::vector<Seq> seqs(prompt_lens.size());
  for (size_t s = 0; s < seqs.size(); ++s) {
    Seq& q = seqs[s];
    q.prompt_len = prompt_lens[s];
    for (int64_t k = 0; k < q.prompt_len; ++k) {
      q.tokens.push_back(static_cast<int32_t>((s * 31 + k * 7 + 1) % vocab));
    }
    q.chunk = chunks[s % chunks.size()];
    q.first_step = static_cast<int64_t>(s);
    for (int64_t i = 0; i < kBlocksPerSequence; ++i) {
      q.blocks.push_back(static_cast<kv::BlockId>(s * kBlocksPerSequence + i));
    }
  }
  return seqs;
}

// The large-batch schedule: 20 sequences with prompts of 3 to 31 tokens, all prefilled in the
// first step (~300 tokens), then decoded together.
inline std::vector<Seq> WideSequences(int64_t vocab) {
  std::vector<int64_t> lens;
  for (int s = 0; s < 20; ++s) lens.push_back(3 + (s * 7) % 29);
  std::vector<Seq> seqs = MakeSequences(lens, {64}, vocab);
  for (Seq& q : seqs) q.first_step = 0;
  return seqs;
}

// The batch of step `step`: each sequence that has started and generated fewer than `steps`
// tokens contributes its next prompt chunk (logits only for the chunk that ends the prompt) or
// its last token. owners[i] is the sequence of slice i. The spans point into `seqs`, which must
// not change until the batch has run.
inline Batch NextBatch(const std::vector<Seq>& seqs, int64_t step, int steps,
                       std::vector<size_t>* owners) {
  Batch batch;
  owners->clear();
  for (size_t s = 0; s < seqs.size(); ++s) {
    const Seq& q = seqs[s];
    if (q.generated >= steps || step < q.first_step) continue;
    SequenceSlice slice;
    if (q.computed < q.prompt_len) {
      const int64_t n = std::min(q.chunk, q.prompt_len - q.computed);
      slice.tokens = std::span<const int32_t>(q.tokens.data() + q.computed, n);
      slice.logits = q.computed + n == q.prompt_len ? LogitsWanted::kLast : LogitsWanted::kNone;
    } else {
      slice.tokens = std::span<const int32_t>(q.tokens.data() + q.computed, 1);
      slice.logits = LogitsWanted::kLast;
    }
    slice.start_pos = q.computed;
    slice.block_ids = q.blocks;
    batch.sequences.push_back(slice);
    owners->push_back(s);
  }
  return batch;
}

// After a step: marks the slices' tokens computed and appends the greedy token of `logits`
// (the reference's rows, [rows, vocab]) to each sequence that asked for logits.
inline void Advance(const Batch& batch, const std::vector<size_t>& owners,
                    const std::vector<float>& logits, int64_t vocab, std::vector<Seq>* seqs) {
  int64_t row = 0;
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    Seq& q = (*seqs)[owners[i]];
    q.computed += static_cast<int64_t>(batch.sequences[i].tokens.size());
    if (batch.sequences[i].logits == LogitsWanted::kNone) continue;
    q.tokens.push_back(ArgMax(logits.data() + row * vocab, vocab));
    ++q.generated;
    ++row;
  }
}

}  // namespace strata::backend::cuda::testing
