// A Backend test double: runs every call on a real backend, except the Forward calls it is told
// to fail (by their 0-based index), which return `error` without touching the KV cache. For
// tests of what the engine does when a step fails.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "strata/backend/backend.h"
#include "strata/common/status.h"

namespace strata::testing {

class FailingBackend final : public backend::Backend {
 public:
  // `inner` must outlive this double.
  FailingBackend(backend::Backend* inner, std::set<int64_t> failing_calls, Status error)
      : inner_(inner), failing_(std::move(failing_calls)), error_(std::move(error)) {}

  Status Forward(const backend::Batch& batch, std::vector<float>* logits) override {
    const int64_t call = calls_++;
    if (failing_.count(call) > 0) {
      failed_batch_sizes_.push_back(static_cast<int64_t>(batch.sequences.size()));
      return error_;
    }
    return inner_->Forward(batch, logits);
  }
  const model::ModelConfig& config() const override { return inner_->config(); }
  backend::KvGeometry kv_geometry() const override { return inner_->kv_geometry(); }
  std::string_view name() const override { return "failing-test-double"; }
  std::string Describe() const override { return "failing test double over " + inner_->Describe(); }

  int64_t calls() const { return calls_; }
  // Sequences in each failed call, in order.
  const std::vector<int64_t>& failed_batch_sizes() const { return failed_batch_sizes_; }

 private:
  backend::Backend* inner_;
  std::set<int64_t> failing_;
  Status error_;
  int64_t calls_ = 0;
  std::vector<int64_t> failed_batch_sizes_;
};

}  // namespace strata::testing
