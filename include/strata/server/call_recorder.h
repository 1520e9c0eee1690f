// CallRecorder: the accounting of one generation call, the same for every transport: metrics
// per chunk (generated tokens, inter-token gaps) and at the end (the request's record, an
// error counted by its code), the closing log line, and the Status the call ends with. A
// transport maps that Status onto its own (gRPC codes one to one; HTTP statuses later).
//
// Thread rules: not thread-safe; the call that owns it serializes its use. `metrics` must
// outlive it.
#pragma once

#include <chrono>
#include <string>

#include "strata/common/status.h"
#include "strata/engine/request_stream.h"
#include "strata/metrics/server_metrics.h"

namespace strata::server {

class CallRecorder {
 public:
  CallRecorder(metrics::ServerMetrics* metrics, std::string request_id);

  const std::string& request_id() const { return request_id_; }

  // A chunk with tokens: counts them and observes the gap since the previous one.
  void OnChunk(const engine::StreamChunk& chunk);

  // Why the transport cancelled the engine request, if it did.
  enum class Cancel {
    kNone,      // it did not (a cancelled request then means the engine shut down)
    kClient,    // the client cancelled or went away
    kDeadline,  // the client's deadline expired
  };

  // The last chunk (finish_reason set): records the request, logs it, and returns how the call
  // ends: OK for stop and length; CANCELLED when the client cancelled; DEADLINE_EXCEEDED when
  // its deadline expired; UNAVAILABLE when the engine cancelled it (shutdown); the engine's
  // error (INTERNAL when it gave none) for a failed request. A non-OK status is counted by its
  // code.
  Status OnLast(const engine::StreamChunk& last, Cancel cancel);

 private:
  metrics::ServerMetrics* metrics_;
  std::string request_id_;
  std::chrono::steady_clock::time_point last_token_time_{};
};

}  // namespace strata::server
