// HttpFrontend: the OpenAI-compatible HTTP API, a second transport over the serving core that
// the gRPC service also uses (ServingState: lifecycle, translation, in-flight count; the
// RequestSubmitter; CallRecorder). HTTP and JSON come from cpp-httplib and nlohmann-json.
//
//   POST /v1/completions, POST /v1/chat/completions   (JSON, or SSE with "stream": true)
//   GET  /v1/models, GET /v1/models/{id}
//   GET  /health    200 {"status": "serving"}; 503 while loading or draining
//   GET  /metrics   the Prometheus text the metrics port serves
//   POST /admin/cache/invalidate, POST /admin/cache/epoch   with an admin token (admin_routes.h)
//   POST /v1/embeddings   the embedding model's vectors (openai_embeddings.h); 404 without one
// Errors are OpenAI's {"error": {"message", "type", "param", "code"}}: 400 naming the field,
// 401 without a valid API key (when keys are on), 404 for another model, 429 with Retry-After
// when the queue is full or a key's limit is reached, 503 while loading or draining (see
// openai_request.h and docs/http-api.md).
//
// Threads: cpp-httplib serves each connection on a pool thread (`threads` of them); a call
// blocks its thread while it waits for tokens, never the engine. Connections beyond the
// threads wait for one, up to the gate's limit; past it they wait in the kernel's backlog. A
// streaming client that goes away is noticed at the next write (the next token) and its request is
// cancelled, so its KV blocks are freed at the following engine step.
//
// Thread rules: Start once, then Stop (also from the destructor) from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "strata/common/status.h"
#include "strata/embedding/text_embedder.h"
#include "strata/server/api_keys.h"
#include "strata/server/cache_admin.h"
#include "strata/server/connection_gate.h"
#include "strata/server/http/batch_runner.h"
#include "strata/server/serving_state.h"
#include "strata/server/tls_identity.h"

namespace strata::server::http {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (port() says which)
  int threads = 256;
  // Every connection holds a place here while it is open (queued for a thread or served); null:
  // no limit.
  ConnectionGate* connections = nullptr;
  std::string model_id;  // the name requests give as "model" (the GGUF's general.name also does)
  size_t max_body_bytes = 4 << 20;      // larger bodies get 413
  int32_t completions_max_tokens = 16;  // /v1/completions without max_tokens (OpenAI's default)
  std::function<std::string()> metrics_text;  // GET /metrics; null: 404
  CacheAdmin* cache_admin = nullptr;          // POST /admin/cache/* (admin_routes.h); null: 404
  // POST /v1/embeddings (openai_embeddings.h); null: 404 (the server has no embedding model).
  embedding::TextEmbedder* embeddings = nullptr;
  // Every route but /health needs an API key (api_keys.h): 401 without a valid one, 429 with
  // Retry-After over its limits. Null: no keys needed.
  ApiKeys* api_keys = nullptr;
  // HTTPS (and mTLS with a client CA) with this identity, reloaded as its files change; null:
  // plain HTTP.
  std::shared_ptr<TlsIdentity> tls;
  // The Files and Batches APIs (batch_routes.h) over this store, whose lines `batch_runner`
  // runs; null: 404.
  jobs::JobStore* jobs = nullptr;
  BatchRunner* batch_runner = nullptr;
};

class HttpFrontend {
 public:
  // `state` must outlive the frontend.
  HttpFrontend(ServingState* state, HttpOptions options);
  ~HttpFrontend();
  HttpFrontend(const HttpFrontend&) = delete;
  HttpFrontend& operator=(const HttpFrontend&) = delete;

  // Binds the port and starts serving on a thread of its own; UNAVAILABLE when the port cannot
  // be bound.
  Status Start();
  int port() const;
  // Stops accepting and waits for the serving thread; calls in flight are cut off.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::server::http
