// MaskHelper: constrained requests' token masks computed off the engine thread.
//
// A grammar position a request reaches for the first time costs milliseconds to hundreds of
// them to turn into a mask (every vocabulary token walked); on the engine thread that time is
// added to the step of every request in the batch. The engine hands such a mask to the helper
// instead and lets the request's step run; the row's logits wait for the mask (the request sits
// out the steps until it is ready: Scheduler::SetPaused), so a mask ready by the next step costs
// it no step. The helper's workers run at a lower CPU priority than the engine's threads.
//
// Thread rules: Start, TakeReady and Drop on the engine thread; `on_ready` runs on a worker.
// While a request's job is pending, only the worker touches its constraint.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "strata/common/background_pool.h"
#include "strata/engine/request.h"
#include "strata/engine/token_constraint.h"

namespace strata::engine {

class MaskHelper {
 public:
  // threads 0: no helper (Start always refuses). `on_ready` is called after each mask is done
  // (to wake the engine); it must not call into the helper.
  MaskHelper(int threads, int nice, std::function<void()> on_ready);
  ~MaskHelper();  // skips jobs not started and waits for the running ones

  // Starts computing the mask of `constraint` (`words` 32-bit words) for request `id`. False
  // when it cannot take the job (no workers, its queue full): the caller computes it itself.
  bool Start(RequestId id, std::shared_ptr<TokenConstraint> constraint, size_t words);

  // The masks finished since the last call, for requests not dropped.
  void TakeReady(std::vector<std::pair<RequestId, std::vector<uint32_t>>>* ready);

  // Request `id` ended: its job is skipped if not started, and its mask dropped.
  void Drop(RequestId id);

  // Masks computed so far (taken or dropped).
  int64_t computed() const;

 private:
  struct Job;

  std::function<void()> on_ready_;
  mutable std::mutex mutex_;  // guards the rest
  std::unordered_map<RequestId, std::shared_ptr<Job>> jobs_;
  std::vector<std::pair<RequestId, std::vector<uint32_t>>> ready_;
  int64_t computed_ = 0;
  std::unique_ptr<BackgroundPool> pool_;  // last: its workers are joined first
};

}  // namespace strata::engine
