// RequestSubmitter: "submit -> stream of chunks, cancel", the one interface through which a
// transport gets a request generated. The Engine implements it; a response cache or a router
// can wrap another submitter later (issue 17) without any transport changing.
//
// Thread rules: both methods may be called from any thread.
#pragma once

#include <memory>

#include "strata/common/status.h"
#include "strata/engine/request.h"
#include "strata/engine/request_stream.h"

namespace strata::engine {

class RequestSubmitter {
 public:
  virtual ~RequestSubmitter() = default;

  // Accepts `request` (its chunks arrive on the returned stream, the last with a finish
  // reason) or refuses it: INVALID_ARGUMENT for a request that can never run,
  // RESOURCE_EXHAUSTED when the queue is full, UNAVAILABLE once stopped.
  virtual StatusOr<std::shared_ptr<RequestStream>> Submit(Request request) = 0;

  // Asks that request `id` end as cancelled; unknown and finished ids are ignored.
  virtual void Cancel(RequestId id) = 0;
};

}  // namespace strata::engine
