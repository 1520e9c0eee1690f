// Generator: runs one request start to finish on the calling thread — prefill in chunks, then
// sample, detokenize and stream until a stop condition. The CLI and the fidelity tests use it;
// serving many requests at once is the continuous-batching engine's job.
//
// Thread rules: one Generate call at a time per Generator (it drives the backend); the
// callback runs on that same thread.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/backend/backend.h"
#include "strata/common/status.h"
#include "strata/sampling/finish_reason.h"
#include "strata/sampling/sampling_params.h"
#include "strata/tokenizer/tokenizer.h"

namespace strata::engine {

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;  // prompt forward passes up to the first sampled token
  double decode_seconds = 0;   // every later step
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids (a stop token included)
  std::string text;             // what was streamed, stop strings excluded
  sampling::FinishReason finish_reason = sampling::FinishReason::kStop;
  GenerationStats stats;
};

class Generator {
 public:
  // `backend` and `tokenizer` must outlive the Generator. Prompts are prefilled in chunks of
  // `prefill_chunk` tokens.
  Generator(backend::Backend* backend, const tokenizer::Tokenizer* tokenizer,
            int64_t prefill_chunk = 512);

  // INVALID_ARGUMENT for bad sampling parameters or an empty prompt, or when prompt +
  // max_tokens exceed the model's context; RESOURCE_EXHAUSTED when the KV cache cannot hold
  // them. `on_text` receives text deltas as they become safe to show (never a split UTF-8
  // sequence, never part of a stop string).
  StatusOr<GenerationResult> Generate(std::span<const int32_t> prompt,
                                      const sampling::SamplingParams& params,
                                      const std::function<void(std::string_view)>& on_text);

 private:
  backend::Backend* backend_;
  const tokenizer::Tokenizer* tokenizer_;
  int64_t prefill_chunk_;
};

}  // namespace strata::engine
