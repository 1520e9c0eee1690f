// The Generate and GenerateStream calls as gRPC callback reactors over an engine request.
//
// A call validates and submits its request on the gRPC thread that received it, then never
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

#include "strata/common/status.h"
#include "strata/engine/request_submitter.h"
#include "strata/metrics/server_metrics.h"
#include "strata/server/request_translator.h"
#include "strata/server/serving_state.h"
#include "strata/v1/generation.pb.h"

namespace strata::server {

grpc::Status ToGrpcStatus(const Status& status);

// Submits `request` and returns the reactor that completes the unary call into `response`.
grpc::ServerUnaryReactor* StartUnaryGenerate(const CallEnv& env, grpc::CallbackServerContext* ctx,
                                             TranslatedRequest request,
                                             v1::GenerateResponse* response);

// Submits `request` and returns the reactor that streams it.
grpc::ServerWriteReactor<v1::GenerateStreamResponse>* StartStreamGenerate(
    const CallEnv& env, grpc::CallbackServerContext* ctx, TranslatedRequest request);

// A reactor that ends the call at once with `status` (a refused call), counting the error.
grpc::ServerUnaryReactor* RefuseUnary(grpc::CallbackServerContext* ctx,
                                      metrics::ServerMetrics* metrics, const Status& status);
grpc::ServerWriteReactor<v1::GenerateStreamResponse>* RefuseStream(metrics::ServerMetrics* metrics,
                                                                   const Status& status);

}  // namespace strata::server
