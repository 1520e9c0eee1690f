#include "strata/engine/model_runner.h"

#include <algorithm>
#include <string>
#include <utility>

#include "strata/common/check.h"
#include "strata/sampling/token_mask.h"

namespace strata::engine {

Status ModelRunner::Run(const backend::Batch& batch, std::span<sampling::Sampler* const> samplers,
                        std::span<const std::span<const uint32_t>> masks,
                        std::vector<int32_t>* tokens) {
  if (!masks.empty() && masks.size() != samplers.size()) {
    return InternalError("token masks for " + std::to_string(masks.size()) + " of " +
                         std::to_string(samplers.size()) + " rows");
  }
  auto mask_of = [&](size_t r) { return masks.empty() ? std::span<const uint32_t>() : masks[r]; };
  const bool backend_samples = backend_->samples_on_backend();
  rows_.assign(samplers.size(), backend::RowSampling{});
  counts_.clear();
  count_ends_.assign(samplers.size(), 0);
  for (size_t r = 0; r < samplers.size(); ++r) {
    if (!backend_samples || samplers[r] == nullptr) continue;
    sampling::Sampler& s = *samplers[r];
    const sampling::SamplingParams& p = s.params();
    backend::RowSampling& row = rows_[r];
    row.on_backend = true;
    row.temperature = p.temperature;
    row.top_k = p.top_k;
    row.top_p = p.top_p;
    row.min_p = p.min_p;
    row.repetition_penalty = p.repetition_penalty;
    row.frequency_penalty = p.frequency_penalty;
    row.presence_penalty = p.presence_penalty;
    row.logprobs = p.logprobs;
    row.allowed = mask_of(r);
    row.u = s.DrawForBackend();
    s.penalty_window().AppendCounts(&counts_);
    count_ends_[r] = counts_.size();
  }
  // The spans only once counts_ has stopped growing.
  size_t begin = 0;
  for (size_t r = 0; r < samplers.size() && backend_samples; ++r) {
    rows_[r].penalties =
        std::span<const sampling::TokenCount>(counts_).subspan(begin, count_ends_[r] - begin);
    begin = count_ends_[r];
  }
  tokens->clear();
  STRATA_RETURN_IF_ERROR(backend_->ForwardSampled(batch, rows_, &step_));
  const int64_t vocab = backend_->config().vocab_size;
  if (step_.tokens.size() != samplers.size()) {
    return InternalError("the backend returned " + std::to_string(step_.tokens.size()) +
                         " sampled rows for " + std::to_string(samplers.size()));
  }
  tokens->resize(samplers.size());
  host_row_.assign(samplers.size(), -1);
  to_sample_.clear();
  size_t host_row = 0;
  for (size_t r = 0; r < samplers.size(); ++r) {
    if (step_.tokens[r] >= 0) {
      if (!rows_[r].on_backend) return InternalError("the backend sampled a row it was not given");
      (*tokens)[r] = step_.tokens[r];
      if (rows_[r].logprobs > 0) {
        if (step_.logprobs.size() != samplers.size() ||
            static_cast<int32_t>(step_.logprobs[r].top.size()) <
                std::min<int32_t>(rows_[r].logprobs, static_cast<int32_t>(vocab))) {
          return InternalError("the backend returned no log-probabilities for a row that asked");
        }
        samplers[r]->SetLogprobs(std::move(step_.logprobs[r]));
      }
      ++backend_rows_;
      continue;
    }
    if (rows_[r].on_backend) return InternalError("the backend left a row unsampled");
    if (static_cast<int64_t>(step_.logits.size()) < (static_cast<int64_t>(host_row) + 1) * vocab) {
      return InternalError("the backend returned too few logits rows");
    }
    if (samplers[r] == nullptr) {
      (*tokens)[r] = -1;
      host_row_[r] = static_cast<int64_t>(host_row++);
      continue;
    }
    to_sample_.push_back({r, host_row++});
  }
  SampleHostRows(samplers, masks, tokens);
  return OkStatus();
}

void ModelRunner::SampleHostRows(std::span<sampling::Sampler* const> samplers,
                                 std::span<const std::span<const uint32_t>> masks,
                                 std::vector<int32_t>* tokens) {
  const auto vocab = static_cast<size_t>(backend_->config().vocab_size);
  auto sample = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const auto [r, host_row] = to_sample_[static_cast<size_t>(i)];
      const std::span<float> logits(step_.logits.data() + host_row * vocab, vocab);
      if (!masks.empty() && !masks[r].empty()) sampling::ApplyTokenMask(masks[r], logits);
      (*tokens)[r] = samplers[r]->Sample(logits);
    }
  };
  const auto n = static_cast<int64_t>(to_sample_.size());
  host_rows_ += n;
  // Rows of distinct samplers touch disjoint state (each thread has its own scratch), so they
  // may be sampled at once; a sampler given two rows draws for them in row order.
  distinct_.clear();
  for (const auto& [r, host_row] : to_sample_) distinct_.push_back(samplers[r]);
  std::sort(distinct_.begin(), distinct_.end());
  if (std::adjacent_find(distinct_.begin(), distinct_.end()) != distinct_.end()) {
    sample(0, n);
  } else {
    backend_->ParallelForHost(n, sample);
  }
}

std::span<float> ModelRunner::row(size_t r) {
  STRATA_CHECK(r < host_row_.size() && host_row_[r] >= 0);
  const auto vocab = static_cast<size_t>(backend_->config().vocab_size);
  return std::span<float>(step_.logits).subspan(static_cast<size_t>(host_row_[r]) * vocab, vocab);
}

}  // namespace strata::engine
