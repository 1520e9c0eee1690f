#include "strata/server/generation_service.h"

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "strata/common/utf8.h"
#include "strata/server/proto_input.h"
#include "strata/tokenizer/incremental_detokenizer.h"

namespace strata::server {

GenerationService::GenerationService(ServingState* state, const ServiceOptions& options)
    : state_(state), metrics_(state->metrics()), options_(options) {}

grpc::ServerUnaryReactor* GenerationService::Answer(grpc::CallbackServerContext* ctx,
                                                    const Status& status) {
  if (!status.ok()) return RefuseUnary(ctx, metrics_, status);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* GenerationService::Generate(grpc::CallbackServerContext* ctx,
                                                      const v1::GenerateRequest* request,
                                                      v1::GenerateResponse* response) {
  StatusOr<ServingModel*> model = state_->Serving();
  if (!model.ok()) return RefuseUnary(ctx, metrics_, model.status());
  StatusOr<TranslatedRequest> translated = state_->Translate(**model, InputFromProto(*request));
  if (!translated.ok()) return RefuseUnary(ctx, metrics_, translated.status());
  return StartUnaryGenerate(state_->EnvFor(**model), ctx, std::move(*translated), response);
}

grpc::ServerWriteReactor<v1::GenerateStreamResponse>* GenerationService::GenerateStream(
    grpc::CallbackServerContext* ctx, const v1::GenerateRequest* request) {
  StatusOr<ServingModel*> model = state_->Serving();
  if (!model.ok()) return RefuseStream(metrics_, model.status());
  StatusOr<TranslatedRequest> translated = state_->Translate(**model, InputFromProto(*request));
  if (!translated.ok()) return RefuseStream(metrics_, translated.status());
  return StartStreamGenerate(state_->EnvFor(**model), ctx, std::move(*translated));
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* ctx,
                                                      const v1::TokenizeRequest* request,
                                                      v1::TokenizeResponse* response) {
  StatusOr<ServingModel*> serving = state_->Serving();
  if (!serving.ok()) return Answer(ctx, serving.status());
  const ServingModel& model = **serving;
  std::string text;
  bool parse_special = request->parse_special();
  switch (request->input_case()) {
    case v1::TokenizeRequest::kText:
      text = request->text();
      break;
    case v1::TokenizeRequest::kChat: {
      if (model.chat_template == nullptr) {
        return Answer(ctx, FailedPreconditionError("this model has no chat template"));
      }
      std::vector<tokenizer::ChatMessage> messages;
      for (const v1::ChatMessage& m : request->chat().messages()) {
        if (!IsValidUtf8(m.content()) || !IsValidUtf8(m.role())) {
          return Answer(ctx, InvalidArgumentError("chat.messages must be valid UTF-8"));
        }
        messages.push_back({m.role(), m.content()});
      }
      tokenizer::ChatRenderOptions render;
      render.add_generation_prompt =
          !request->chat().has_add_generation_prompt() || request->chat().add_generation_prompt();
      StatusOr<std::string> rendered = model.chat_template->Render(messages, render);
      if (!rendered.ok()) {
        return Answer(ctx, InvalidArgumentError("chat: " + rendered.status().message()));
      }
      text = std::move(*rendered);
      parse_special = true;  // the template's markers are special tokens
      break;
    }
    case v1::TokenizeRequest::INPUT_NOT_SET:
      return Answer(ctx, InvalidArgumentError("one of text or chat must be set"));
  }
  if (text.size() > options_.max_tokenize_bytes) {
    return Answer(ctx, InvalidArgumentError("text must be at most " +
                                            std::to_string(options_.max_tokenize_bytes) +
                                            " bytes, got " + std::to_string(text.size())));
  }
  size_t offset = 0;
  if (!IsValidUtf8(text, &offset)) {
    return Answer(ctx, InvalidArgumentError("text must be valid UTF-8 (invalid byte at offset " +
                                            std::to_string(offset) + ")"));
  }
  const std::vector<int32_t> ids =
      model.tokenizer->Encode(text, {request->add_special(), parse_special});
  for (const int32_t id : ids) {
    response->add_token_ids(id);
    // Proto strings must be UTF-8; a byte token's piece alone may not be.
    response->add_pieces(
        tokenizer::ReplaceInvalidUtf8(model.tokenizer->TokenToPiece(id, /*render_special=*/true)));
  }
  return Answer(ctx, OkStatus());
}

grpc::ServerUnaryReactor* GenerationService::Detokenize(grpc::CallbackServerContext* ctx,
                                                        const v1::DetokenizeRequest* request,
                                                        v1::DetokenizeResponse* response) {
  StatusOr<ServingModel*> serving = state_->Serving();
  if (!serving.ok()) return Answer(ctx, serving.status());
  const ServingModel& model = **serving;
  const auto& ids = request->token_ids();
  if (static_cast<size_t>(ids.size()) > options_.max_detokenize_ids) {
    return Answer(ctx, InvalidArgumentError("token_ids must hold at most " +
                                            std::to_string(options_.max_detokenize_ids) +
                                            " ids, got " + std::to_string(ids.size())));
  }
  const int64_t vocab = model.info.vocab_size();
  for (int i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return Answer(
          ctx, InvalidArgumentError("token_ids[" + std::to_string(i) + "] must be in [0, " +
                                    std::to_string(vocab) + "), got " + std::to_string(ids[i])));
    }
  }
  response->set_text(tokenizer::ReplaceInvalidUtf8(model.tokenizer->Decode(
      std::span<const int32_t>(ids.data(), ids.size()), request->render_special())));
  return Answer(ctx, OkStatus());
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(
    grpc::CallbackServerContext* ctx, const v1::GetModelInfoRequest* /*request*/,
    v1::ModelInfo* response) {
  StatusOr<ServingModel*> serving = state_->Serving();
  if (!serving.ok()) return Answer(ctx, serving.status());
  *response = (*serving)->info;
  return Answer(ctx, OkStatus());
}

}  // namespace strata::server
