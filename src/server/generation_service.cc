#include "strata/server/generation_service.h"

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/common/logging.h"
#include "strata/server/grpc_auth.h"
#include "strata/server/proto_input.h"
#include "strata/server/request_parse.h"
#include "strata/tokenizer/incremental_detokenizer.h"

namespace strata::server {

GenerationService::GenerationService(ServingState* state, const ServiceOptions& options)
    : state_(state), metrics_(state->metrics()), options_(options) {
  // Bytes that do not parse get INVALID_ARGUMENT, not gRPC's UNIMPLEMENTED (request_parse.h).
  const auto refuse = [this](grpc::CallbackServerContext* ctx, const Status& status) {
    // A caller without a valid key learns nothing more, not even why its bytes do not parse.
    if (KeyAdmission a = AdmitGrpcCall(options_.api_keys, ctx, false); !a.status.ok()) {
      return RefuseUnary(ctx, metrics_, a.status);
    }
    LogInfo("request refused", {{"status", status.message()}});
    return RefuseUnary(ctx, metrics_, status);
  };
  const auto index = [](std::string_view method) {
    return MethodIndex(v1::Generation::service_full_name(), method);
  };
  MarkMethodCallback(
      index("Generate"),
      new ParseCheckedUnaryHandler<v1::GenerateRequest, v1::GenerateResponse>(
          [this](grpc::CallbackServerContext* ctx, const v1::GenerateRequest* request,
                 v1::GenerateResponse* response) { return Generate(ctx, request, response); },
          refuse));
  MarkMethodCallback(
      index("GenerateStream"),
      new ParseCheckedStreamHandler<v1::GenerateRequest, v1::GenerateStreamResponse>(
          [this](grpc::CallbackServerContext* ctx, const v1::GenerateRequest* request) {
            return GenerateStream(ctx, request);
          },
          [this](grpc::CallbackServerContext* ctx, const Status& status) {
            if (KeyAdmission a = AdmitGrpcCall(options_.api_keys, ctx, false); !a.status.ok()) {
              return RefuseStream(metrics_, a.status);
            }
            LogInfo("request refused", {{"status", status.message()}});
            return RefuseStream(metrics_, status);
          }));
  MarkMethodCallback(
      index("Tokenize"),
      new ParseCheckedUnaryHandler<v1::TokenizeRequest, v1::TokenizeResponse>(
          [this](grpc::CallbackServerContext* ctx, const v1::TokenizeRequest* request,
                 v1::TokenizeResponse* response) { return Tokenize(ctx, request, response); },
          refuse));
  MarkMethodCallback(
      index("Detokenize"),
      new ParseCheckedUnaryHandler<v1::DetokenizeRequest, v1::DetokenizeResponse>(
          [this](grpc::CallbackServerContext* ctx, const v1::DetokenizeRequest* request,
                 v1::DetokenizeResponse* response) { return Detokenize(ctx, request, response); },
          refuse));
  MarkMethodCallback(
      index("GetModelInfo"),
      new ParseCheckedUnaryHandler<v1::GetModelInfoRequest, v1::ModelInfo>(
          [this](grpc::CallbackServerContext* ctx, const v1::GetModelInfoRequest* request,
                 v1::ModelInfo* response) { return GetModelInfo(ctx, request, response); },
          refuse));
}

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
  KeyAdmission admitted = AdmitGrpcCall(options_.api_keys, ctx, /*generation=*/true);
  if (!admitted.status.ok()) return RefuseUnary(ctx, metrics_, admitted.status);
  StatusOr<ServingModel*> model = state_->Serving();
  if (!model.ok()) return RefuseUnary(ctx, metrics_, model.status());
  ServingModel& serving = **model;
  const CallEnv env = state_->EnvFor(serving, std::move(admitted.lease));
  return StartUnaryGenerate(env, ctx, response, [&](TranslatedFn start) {
    state_->TranslateThen(serving, InputFromProto(*request), std::move(start));
  });
}

grpc::ServerWriteReactor<v1::GenerateStreamResponse>* GenerationService::GenerateStream(
    grpc::CallbackServerContext* ctx, const v1::GenerateRequest* request) {
  KeyAdmission admitted = AdmitGrpcCall(options_.api_keys, ctx, /*generation=*/true);
  if (!admitted.status.ok()) return RefuseStream(metrics_, admitted.status);
  StatusOr<ServingModel*> model = state_->Serving();
  if (!model.ok()) return RefuseStream(metrics_, model.status());
  ServingModel& serving = **model;
  const CallEnv env = state_->EnvFor(serving, std::move(admitted.lease));
  return StartStreamGenerate(env, ctx, [&](TranslatedFn start) {
    state_->TranslateThen(serving, InputFromProto(*request), std::move(start));
  });
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* ctx,
                                                      const v1::TokenizeRequest* request,
                                                      v1::TokenizeResponse* response) {
  if (KeyAdmission a = AdmitGrpcCall(options_.api_keys, ctx, false); !a.status.ok()) {
    return Answer(ctx, a.status);
  }
  StatusOr<ServingModel*> serving = state_->Serving();
  if (!serving.ok()) return Answer(ctx, serving.status());
  const ServingModel& model = **serving;
  // The same checks (and chat rendering) as Generate's input.
  GenerationInput input;
  switch (request->input_case()) {
    case v1::TokenizeRequest::kText:
      input.kind = GenerationInput::Kind::kText;
      input.text = request->text();
      break;
    case v1::TokenizeRequest::kChat:
      input.kind = GenerationInput::Kind::kChat;
      for (const v1::ChatMessage& m : request->chat().messages()) {
        input.chat.push_back({m.role(), m.content()});
      }
      if (request->chat().has_add_generation_prompt()) {
        input.add_generation_prompt = request->chat().add_generation_prompt();
      }
      break;
    case v1::TokenizeRequest::INPUT_NOT_SET:
      return Answer(ctx, InvalidArgumentError("one of text or chat must be set"));
  }
  StatusOr<PromptText> checked = model.translator->CheckedText(input, "text");
  if (!checked.ok()) return Answer(ctx, checked.status());
  const std::string& text = checked->text;
  const bool parse_special = checked->parse_special || request->parse_special();
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
  if (KeyAdmission a = AdmitGrpcCall(options_.api_keys, ctx, false); !a.status.ok()) {
    return Answer(ctx, a.status);
  }
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
  if (KeyAdmission a = AdmitGrpcCall(options_.api_keys, ctx, false); !a.status.ok()) {
    return Answer(ctx, a.status);
  }
  StatusOr<ServingModel*> serving = state_->Serving();
  if (!serving.ok()) return Answer(ctx, serving.status());
  *response = (*serving)->info;
  return Answer(ctx, OkStatus());
}

}  // namespace strata::server
