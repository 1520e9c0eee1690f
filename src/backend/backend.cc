// The checks and helpers every Backend shares (see backend.h).
#include "strata/backend/backend.h"

#include <string>

namespace strata::backend {

int64_t LogitsRows(const SequenceSlice& seq) {
  switch (seq.logits) {
    case LogitsWanted::kAll:
      return static_cast<int64_t>(seq.tokens.size());
    case LogitsWanted::kLast:
      return 1;
    case LogitsWanted::kNone:
      return 0;
  }
  return 1;
}

Status Backend::ForwardSampled(const Batch& batch, std::span<const RowSampling> rows,
                               SampledStep* out) {
  int64_t expected = 0;
  for (const SequenceSlice& seq : batch.sequences) expected += LogitsRows(seq);
  if (static_cast<int64_t>(rows.size()) != expected) {
    return InvalidArgumentError("the batch has " + std::to_string(expected) + " logits rows but " +
                                std::to_string(rows.size()) + " sampling rows were given");
  }
  STRATA_RETURN_IF_ERROR(Forward(batch, &out->logits));
  out->tokens.assign(rows.size(), -1);
  return OkStatus();
}

Status ValidateBatch(const Batch& batch, const model::ModelConfig& config, int32_t block_size,
                     int32_t num_blocks) {
  if (batch.sequences.empty()) return InvalidArgumentError("the batch has no sequence");
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const SequenceSlice& seq = batch.sequences[s];
    const std::string where = "sequence " + std::to_string(s) + ": ";
    if (seq.tokens.empty()) return InvalidArgumentError(where + "no tokens");
    if (seq.start_pos < 0) return InvalidArgumentError(where + "negative start position");
    const int64_t end = seq.start_pos + static_cast<int64_t>(seq.tokens.size());
    if (end > config.context_length) {
      return InvalidArgumentError(where + "positions up to " + std::to_string(end) +
                                  " exceed the model's context of " +
                                  std::to_string(config.context_length));
    }
    if (static_cast<int64_t>(seq.block_ids.size()) * block_size < end) {
      return InvalidArgumentError(where + std::to_string(seq.block_ids.size()) +
                                  " KV blocks cannot hold " + std::to_string(end) + " tokens");
    }
    for (kv::BlockId id : seq.block_ids) {
      if (id < 0 || id >= num_blocks) {
        return InvalidArgumentError(where + "KV block id " + std::to_string(id) +
                                    " is outside the pool of " + std::to_string(num_blocks));
      }
    }
    for (int32_t t : seq.tokens) {
      if (t < 0 || t >= config.vocab_size) {
        return InvalidArgumentError(where + "token id " + std::to_string(t) +
                                    " is outside the vocabulary of " +
                                    std::to_string(config.vocab_size));
      }
    }
  }
  return OkStatus();
}

}  // namespace strata::backend
