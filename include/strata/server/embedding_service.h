// EmbeddingService: strata.v1.Embedding (proto/strata/v1/embedding.proto) over a TextEmbedder,
// the server's embedding model (--embedding-model; an EmbeddingBatcher, which gathers
// concurrent calls into shared encoder passes).
//
// Embed answers, in order: UNAVAILABLE while the server loads or drains (the ServingState, as
// the Generation service does); UNIMPLEMENTED when there is no embedder; INVALID_ARGUMENT for no
// texts, more than max_texts, more than max_total_bytes of text in all, a request_id over 128
// bytes, or a text that is not UTF-8 ("texts[3]: ..."); RESOURCE_EXHAUSTED when the embedder's
// queue is full; else one vector per text. Every call is counted in
// strata_embedding_requests_total{transport="grpc"}; OK ones also in the texts, tokens and
// latency metrics.
//
// The service is synchronous: a call holds a gRPC sync-server thread while its texts wait for
// and go through an encoder pass (milliseconds), never an engine or callback-API thread.
//
// Thread rules: gRPC calls Embed from its threads; the state and the embedder must outlive the
// server.
#pragma once

#include <cstddef>

#include "strata/embedding/text_embedder.h"
#include "strata/server/api_keys.h"
#include "strata/server/serving_state.h"
#include "strata/v1/embedding.grpc.pb.h"

namespace strata::server {

struct EmbeddingServiceOptions {
  size_t max_texts = 2048;           // texts per call at most (OpenAI's limit)
  size_t max_total_bytes = 4 << 20;  // bytes of all texts of a call at most
  size_t max_request_id_bytes = 128;
  ApiKeys* api_keys = nullptr;  // every call must present a key (api_keys.h); null: none needed
};

class EmbeddingService final : public v1::Embedding::Service {
 public:
  // `embedder` may be null: every call is then UNIMPLEMENTED.
  EmbeddingService(ServingState* state, embedding::TextEmbedder* embedder,
                   const EmbeddingServiceOptions& options);

  grpc::Status Embed(grpc::ServerContext* context, const v1::EmbedRequest* request,
                     v1::EmbedResponse* response) override;

 private:
  Status EmbedInto(const v1::EmbedRequest& request, v1::EmbedResponse* response, int64_t* texts,
                   int64_t* tokens);

  ServingState* state_;
  embedding::TextEmbedder* embedder_;
  EmbeddingServiceOptions options_;
};

}  // namespace strata::server
