// ModelRunner: the one place a step's batch meets the backend and comes back as tokens. It runs
// Backend::ForwardSampled and samples, per logits row, with that row's Sampler: on the backend
// (the CUDA device kernels: penalties from the sampler's window, log-probabilities when asked)
// when the backend samples, on the host from the row's logits otherwise. Either way each row
// consumes its sampler's draws in the same order, so a seed gives the same tokens on every backend
// (up to the sums' rounding described in kernels/sampling.h) and in every mix of rows.
//
// Host rows are sampled on the backend's host threads (Backend::ParallelForHost: the CPU
// backend's pool, idle between steps), each row by its own sampler, so the tokens are the same
// as sampled one after another.
//
// Thread rules: used by one thread (the engine loop, or a Generator's caller). The runner keeps
// the step's buffers between calls.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "strata/backend/backend.h"
#include "strata/common/status.h"
#include "strata/sampling/sampler.h"

namespace strata::engine {

class ModelRunner {
 public:
  // `backend` must outlive the runner.
  explicit ModelRunner(backend::Backend* backend) : backend_(backend) {}

  // Runs `batch`; `samplers` has one entry per logits row of the batch, in batch order (the
  // row's sequence's Sampler, or null for a row whose logits the caller samples itself, as
  // speculative verification does). Writes one token per row into *tokens (resized; -1 for
  // the null rows, whose logits row() returns). The tokens are not Accept()ed: the caller does
  // that for the tokens it keeps. On an error no token is returned (the rows' draws are spent:
  // their requests fail with the step).
  //
  // `masks` is empty or has one entry per row: a non-empty one (sampling/token_mask.h, at least
  // one bit set) limits a sampled row to its tokens, on the backend (the CUDA device bitmask)
  // or on the host alike; the null rows' masks are ignored.
  [[nodiscard]] Status Run(const backend::Batch& batch,
                           std::span<sampling::Sampler* const> samplers,
                           std::span<const std::span<const uint32_t>> masks,
                           std::vector<int32_t>* tokens);
  [[nodiscard]] Status Run(const backend::Batch& batch,
                           std::span<sampling::Sampler* const> samplers,
                           std::vector<int32_t>* tokens) {
    return Run(batch, samplers, {}, tokens);
  }

  // The logits of row `r` of the last Run, a row whose sampler was null: [vocab] fp32 the
  // caller may overwrite; valid until the next Run.
  std::span<float> row(size_t r);

  // Rows sampled on the backend and on the host since the runner was made.
  int64_t backend_sampled_rows() const { return backend_rows_; }
  int64_t host_sampled_rows() const { return host_rows_; }

 private:
  struct HostRow {
    size_t row;       // in the batch
    size_t host_row;  // in step_.logits
  };

  // Samples to_sample_'s rows into *tokens, on the backend's host threads (ParallelForHost).
  void SampleHostRows(std::span<sampling::Sampler* const> samplers,
                      std::span<const std::span<const uint32_t>> masks,
                      std::vector<int32_t>* tokens);

  backend::Backend* backend_;
  std::vector<backend::RowSampling> rows_;
  std::vector<sampling::TokenCount> counts_;  // every row's penalty counts, back to back
  std::vector<size_t> count_ends_;            // end of each row's counts in counts_
  backend::SampledStep step_;
  std::vector<int64_t> host_row_;   // per row of the last Run: its index in step_.logits or -1
  std::vector<HostRow> to_sample_;  // the rows of the last Run sampled on the host
  std::vector<const sampling::Sampler*> distinct_;  // to_sample_'s samplers, sorted
  int64_t backend_rows_ = 0;
  int64_t host_rows_ = 0;
};

}  // namespace strata::engine
