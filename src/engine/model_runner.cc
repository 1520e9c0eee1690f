#include "strata/engine/model_runner.h"

#include <string>

namespace strata::engine {

Status ModelRunner::Run(const backend::Batch& batch, std::span<sampling::Sampler* const> samplers,
                        std::vector<int32_t>* tokens) {
  const bool backend_samples = backend_->samples_on_backend();
  rows_.assign(samplers.size(), backend::RowSampling{});
  for (size_t r = 0; r < samplers.size(); ++r) {
    sampling::Sampler& s = *samplers[r];
    if (!backend_samples || !s.BackendCanSample()) continue;
    const sampling::SamplingParams& p = s.params();
    backend::RowSampling& row = rows_[r];
    row.on_backend = true;
    row.temperature = p.temperature;
    row.top_k = p.top_k;
    row.top_p = p.top_p;
    row.min_p = p.min_p;
    row.u = s.DrawForBackend();
  }
  tokens->clear();
  STRATA_RETURN_IF_ERROR(backend_->ForwardSampled(batch, rows_, &step_));
  const int64_t vocab = backend_->config().vocab_size;
  if (step_.tokens.size() != samplers.size()) {
    return InternalError("the backend returned " + std::to_string(step_.tokens.size()) +
                         " sampled rows for " + std::to_string(samplers.size()));
  }
  tokens->resize(samplers.size());
  size_t host_row = 0;
  for (size_t r = 0; r < samplers.size(); ++r) {
    if (step_.tokens[r] >= 0) {
      if (!rows_[r].on_backend) return InternalError("the backend sampled a row it was not given");
      (*tokens)[r] = step_.tokens[r];
      ++backend_rows_;
      continue;
    }
    if (rows_[r].on_backend) return InternalError("the backend left a row unsampled");
    if (static_cast<int64_t>(step_.logits.size()) < (static_cast<int64_t>(host_row) + 1) * vocab) {
      return InternalError("the backend returned too few logits rows");
    }
    (*tokens)[r] = samplers[r]->Sample(
        std::span<float>(step_.logits.data() + host_row * vocab, static_cast<size_t>(vocab)));
    ++host_row;
    ++host_rows_;
  }
  return OkStatus();
}

}  // namespace strata::engine
