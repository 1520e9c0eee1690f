#include "strata/server/embedding_service.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "strata/server/generate_call.h"
#include "strata/server/grpc_auth.h"

namespace strata::server {

EmbeddingService::EmbeddingService(ServingState* state, embedding::TextEmbedder* embedder,
                                   const EmbeddingServiceOptions& options)
    : state_(state), embedder_(embedder), options_(options) {}

grpc::Status EmbeddingService::Embed(grpc::ServerContext* context, const v1::EmbedRequest* request,
                                     v1::EmbedResponse* response) {
  if (KeyAdmission a = AdmitGrpcCall(options_.api_keys, context, false); !a.status.ok()) {
    state_->metrics()->CountError(StatusCodeName(a.status.code()));
    return ToGrpcStatus(a.status);
  }
  const auto start = std::chrono::steady_clock::now();
  int64_t texts = 0;
  int64_t tokens = 0;
  const Status status = EmbedInto(*request, response, &texts, &tokens);
  state_->metrics()->ObserveEmbeddingCall(
      "grpc", StatusCodeName(status.code()), texts, tokens,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return ToGrpcStatus(status);
}

Status EmbeddingService::EmbedInto(const v1::EmbedRequest& request, v1::EmbedResponse* response,
                                   int64_t* texts, int64_t* tokens) {
  if (StatusOr<ServingModel*> serving = state_->Serving(); !serving.ok()) {
    return serving.status();
  }
  if (embedder_ == nullptr) {
    return UnimplementedError(
        "this server has no embedding model (start it with --embedding-model DIR)");
  }
  const auto count = static_cast<size_t>(request.texts_size());
  if (count == 0 || count > options_.max_texts) {
    return InvalidArgumentError("texts must hold 1 to " + std::to_string(options_.max_texts) +
                                " texts, got " + std::to_string(count));
  }
  if (request.request_id().size() > options_.max_request_id_bytes) {
    return InvalidArgumentError("request_id must be at most " +
                                std::to_string(options_.max_request_id_bytes) + " bytes, got " +
                                std::to_string(request.request_id().size()));
  }
  size_t bytes = 0;
  for (const std::string& text : request.texts()) bytes += text.size();
  if (bytes > options_.max_total_bytes) {
    return InvalidArgumentError("texts must hold at most " +
                                std::to_string(options_.max_total_bytes) + " bytes in all, got " +
                                std::to_string(bytes));
  }
  const std::vector<std::string> input(request.texts().begin(), request.texts().end());
  StatusOr<embedding::Embeddings> embedded = embedder_->Embed(input);
  if (!embedded.ok()) return embedded.status();

  response->set_request_id(request.request_id());
  response->set_model(std::string(embedder_->model_name()));
  response->set_dimension(embedder_->dimension());
  response->set_prompt_tokens(static_cast<int32_t>(
      std::min<int64_t>(embedded->tokens, std::numeric_limits<int32_t>::max())));
  for (const std::vector<float>& vector : embedded->vectors) {
    response->add_embeddings()->mutable_values()->Add(vector.begin(), vector.end());
  }
  *texts = static_cast<int64_t>(count);
  *tokens = embedded->tokens;
  return OkStatus();
}

}  // namespace strata::server
