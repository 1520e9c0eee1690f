// GenerationService: strata.v1.Generation over the gRPC callback API.
//
// Lifecycle: the service answers from the moment the gRPC server starts, following the
// ServingState it shares with the other transports: UNAVAILABLE while the model loads and
// while draining; Generate/GenerateStream calls accepted count in the state's in_flight().
//
// Generate and GenerateStream validate the request on the gRPC thread (RequestTranslator:
// INVALID_ARGUMENT naming the field), submit it to the engine (RESOURCE_EXHAUSTED when the
// queue is full) and complete from engine events without blocking (see generate_call.h).
// Tokenize, Detokenize and GetModelInfo answer inline.
//
// Thread rules: every method may be called from any thread; the state must outlive the service.
#pragma once

#include <cstddef>

#include "strata/metrics/server_metrics.h"
#include "strata/server/api_keys.h"
#include "strata/server/generate_call.h"
#include "strata/server/serving_model.h"
#include "strata/server/serving_state.h"
#include "strata/v1/generation.grpc.pb.h"

namespace strata::server {

struct ServiceOptions {
  size_t max_detokenize_ids = 1 << 20;
  ApiKeys* api_keys = nullptr;  // every call must present a key (api_keys.h); null: none needed
};

class GenerationService final : public v1::Generation::CallbackService {
 public:
  GenerationService(ServingState* state, const ServiceOptions& options);

  grpc::ServerUnaryReactor* Generate(grpc::CallbackServerContext* ctx,
                                     const v1::GenerateRequest* request,
                                     v1::GenerateResponse* response) override;
  grpc::ServerWriteReactor<v1::GenerateStreamResponse>* GenerateStream(
      grpc::CallbackServerContext* ctx, const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* ctx,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* ctx,
                                       const v1::DetokenizeRequest* request,
                                       v1::DetokenizeResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* ctx,
                                         const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;

 private:
  grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* ctx, const Status& status);

  ServingState* state_;
  metrics::ServerMetrics* metrics_;
  ServiceOptions options_;
};

}  // namespace strata::server
