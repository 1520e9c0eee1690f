// The Generate and GenerateStream calls as gRPC callback reactors over an engine request.
//
// A call's reactor exists before its request is translated (ServingState::TranslateThen encodes
// a large prompt on a background worker); the translation's result then starts it. It never
// blocks a thread: the engine pushes chunks into the request's RequestStream, whose listener
// (run on the engine thread) hands them to the reactor; the reactor starts a network write only
// when none is in flight, and the write's completion takes whatever arrived meanwhile in one
// message. So a slow client delays only its own messages, never the engine.
//
// Cancellation: a client cancel or an expired deadline (OnCancel) cancels the engine request,
// which ends at the next engine step with its KV blocks freed. A request the engine cancels on
// its own (shutdown) ends UNAVAILABLE.
//
// Lifetime: each reactor is owned by a shared_ptr to itself until gRPC calls OnDone; the
// stream's listener holds only a weak_ptr, so a chunk pushed while the call completes never
// touches a freed reactor.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <functional>

#include "strata/common/status.h"
#include "strata/engine/request_submitter.h"
#include "strata/metrics/server_metrics.h"
#include "strata/server/request_translator.h"
#include "strata/server/serving_state.h"
#include "strata/v1/generation.pb.h"

namespace strata::server {

grpc::Status ToGrpcStatus(const Status& status);

// Where a call's translated request goes: called once, from any thread.
using TranslatedFn = std::function<void(StatusOr<TranslatedRequest>)>;

// Returns the reactor of a unary call that completes into `response`. `translate` is handed the
// function its translated request (or the translation's error) must be passed to, now or later
// from another thread; the call then submits the request, or ends with the error (counted), or
// with CANCELLED / DEADLINE_EXCEEDED when the client left meanwhile.
grpc::ServerUnaryReactor* StartUnaryGenerate(const CallEnv& env, grpc::CallbackServerContext* ctx,
                                             v1::GenerateResponse* response,
                                             const std::function<void(TranslatedFn)>& translate);

// The same for a streamed call.
grpc::ServerWriteReactor<v1::GenerateStreamResponse>* StartStreamGenerate(
    const CallEnv& env, grpc::CallbackServerContext* ctx,
    const std::function<void(TranslatedFn)>& translate);

// A reactor that ends the call at once with `status` (a refused call), counting the error.
grpc::ServerUnaryReactor* RefuseUnary(grpc::CallbackServerContext* ctx,
                                      metrics::ServerMetrics* metrics, const Status& status);
grpc::ServerWriteReactor<v1::GenerateStreamResponse>* RefuseStream(metrics::ServerMetrics* metrics,
                                                                   const Status& status);

}  // namespace strata::server
