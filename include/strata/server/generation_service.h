// GenerationService: strata.v1.Generation over the gRPC callback API.
//
// Lifecycle: the service answers from the moment the gRPC server starts. While the model
// loads every call gets UNAVAILABLE ("loading"); Activate() makes it serve; BeginDrain()
// (SIGTERM) makes new calls UNAVAILABLE again while the calls in flight go on (in_flight()
// counts Generate/GenerateStream calls accepted and not yet done).
//
// Generate and GenerateStream validate the request on the gRPC thread (RequestTranslator:
// INVALID_ARGUMENT naming the field), submit it to the engine (RESOURCE_EXHAUSTED when the
// queue is full) and complete from engine events without blocking (see generate_call.h).
// Tokenize, Detokenize and GetModelInfo answer inline.
//
// Thread rules: every method may be called from any thread; the ServingModel passed to
// Activate and the metrics must outlive the service.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <random>

#include "strata/metrics/server_metrics.h"
#include "strata/server/generate_call.h"
#include "strata/server/serving_model.h"
#include "strata/v1/generation.grpc.pb.h"

namespace strata::server {

struct ServiceOptions {
  bool log_prompts = false;  // prompt text in debug logs
  size_t max_detokenize_ids = 1 << 20;
  size_t max_tokenize_bytes = 4 << 20;
};

class GenerationService final : public v1::Generation::CallbackService {
 public:
  GenerationService(metrics::ServerMetrics* metrics, const ServiceOptions& options);

  // Loading -> serving. Call once.
  void Activate(ServingModel* model);
  // Serving -> draining: new calls get UNAVAILABLE.
  void BeginDrain();
  int64_t in_flight() const { return in_flight_.load(); }

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
  // The model when serving; otherwise the UNAVAILABLE status to answer with.
  StatusOr<ServingModel*> Serving() const;
  // Validates `request` into an engine request (drawing a seed where none is given).
  StatusOr<TranslatedRequest> Translate(const ServingModel& model,
                                        const v1::GenerateRequest& request);
  grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* ctx, const Status& status);

  metrics::ServerMetrics* metrics_;
  ServiceOptions options_;
  std::atomic<ServingModel*> model_{nullptr};
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> in_flight_{0};
  std::mutex seed_mutex_;
  std::mt19937_64 seed_source_;
};

}  // namespace strata::server
