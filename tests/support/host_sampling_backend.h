// A Backend test double that "samples on the backend" on the host: it runs a real backend's
// Forward, then samples every on_backend row, after its token mask, with
// Sampler::SampleWithDraw (the reference the CUDA sampling kernels implement), penalties and
// log-probabilities included, and returns only the other rows' logits, as CudaBackend's
// ForwardSampled does. For tests of the ModelRunner's contract on machines without a device.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "strata/backend/backend.h"
#include "strata/sampling/sampler.h"
#include "strata/sampling/sampling_params.h"
#include "strata/sampling/token_mask.h"

namespace strata::testing {

// The SamplingParams a backend-sampled row stands for (its penalty counts come separately).
inline sampling::SamplingParams ParamsOf(const backend::RowSampling& row) {
  sampling::SamplingParams p;
  p.temperature = row.temperature;
  p.top_k = row.top_k;
  p.top_p = row.top_p;
  p.min_p = row.min_p;
  p.repetition_penalty = row.repetition_penalty;
  p.frequency_penalty = row.frequency_penalty;
  p.presence_penalty = row.presence_penalty;
  p.logprobs = row.logprobs;
  return p;
}

class HostSamplingBackend final : public backend::Backend {
 public:
  // `inner` must outlive this double.
  explicit HostSamplingBackend(backend::Backend* inner) : inner_(inner) {}

  Status Forward(const backend::Batch& batch, std::vector<float>* logits) override {
    return inner_->Forward(batch, logits);
  }
  bool samples_on_backend() const override { return true; }
  Status ForwardSampled(const backend::Batch& batch, std::span<const backend::RowSampling> rows,
                        backend::SampledStep* out) override {
    STRATA_RETURN_IF_ERROR(inner_->Forward(batch, &all_));
    const int64_t vocab = config().vocab_size;
    if (static_cast<int64_t>(all_.size()) != static_cast<int64_t>(rows.size()) * vocab) {
      return InvalidArgumentError("sampling rows do not match the batch's logits rows");
    }
    out->tokens.assign(rows.size(), -1);
    out->logits.clear();
    out->logprobs.assign(rows.size(), sampling::SampleLogprobs{});
    for (size_t r = 0; r < rows.size(); ++r) {
      std::span<float> row(all_.data() + r * vocab, static_cast<size_t>(vocab));
      if (!rows[r].on_backend) {
        out->logits.insert(out->logits.end(), row.begin(), row.end());
        continue;
      }
      if (!rows[r].allowed.empty()) {
        sampling::ApplyTokenMask(rows[r].allowed, row);
        ++masked_rows_;
      }
      out->tokens[r] = sampling::Sampler::SampleWithDraw(ParamsOf(rows[r]), rows[r].penalties, row,
                                                         rows[r].u, &out->logprobs[r]);
      ++sampled_rows_;
    }
    return OkStatus();
  }
  const model::ModelConfig& config() const override { return inner_->config(); }
  backend::KvGeometry kv_geometry() const override { return inner_->kv_geometry(); }
  std::string_view name() const override { return "host-sampling-test-double"; }
  std::string Describe() const override { return "host sampling over " + inner_->Describe(); }

  int64_t sampled_rows() const { return sampled_rows_; }
  int64_t masked_rows() const { return masked_rows_; }

 private:
  backend::Backend* inner_;
  std::vector<float> all_;
  int64_t sampled_rows_ = 0;
  int64_t masked_rows_ = 0;
};

}  // namespace strata::testing
