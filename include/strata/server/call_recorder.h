// CallRecorder: the accounting of one generation call, the same for every transport: metrics
// per chunk (generated tokens, inter-token gaps) and at the end (the request's record, an
// error counted by its code), the closing log line, the end of the call's trace, and the
// Status the call ends with. A transport maps that Status onto its own (gRPC codes one to one,
// HTTP statuses by ApiErrorFromStatus).
//
// Thread rules: not thread-safe; the call that owns it serializes its use. `metrics` must
// outlive it.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "strata/common/status.h"
#include "strata/engine/request_stream.h"
#include "strata/metrics/server_metrics.h"
#include "strata/server/api_keys.h"
#include "strata/server/call_trace.h"

namespace strata::server {

class CallRecorder {
 public:
  // `key`: the caller's API key lease, charged the call's tokens and freed of its stream slot
  // at the end, before the client hears of it (null: keys off). `trace`: the call's trace,
  // owned by the call, told of the first output and ended by OnLast (null: none).
  CallRecorder(metrics::ServerMetrics* metrics, std::string request_id,
               std::shared_ptr<ApiKeyLease> key = nullptr, CallTrace* trace = nullptr);

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
  std::shared_ptr<ApiKeyLease> key_;
  CallTrace* trace_;
  std::chrono::steady_clock::time_point last_token_time_{};
};

}  // namespace strata::server
