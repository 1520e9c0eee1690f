// libFuzzer target: arbitrary bytes as the gRPC server receives them for Generate (and
// Tokenize): parsed as strata.v1.GenerateRequest; bytes protobuf refuses must get a non-empty
// description (DescribeUnparsable), never a crash; a parsed request goes through
// InputFromProto and RequestTranslator (size bound, UTF-8, chat rendering by a template the
// first byte picks, sampling and cache checks) and CheckedText. Invariants:
//   - a translated request has a non-empty prompt of in-vocabulary ids and max_tokens >= 1, and
//     a constraint exactly when it asked for an output format (compiled against a small
//     vocabulary);
//   - every refusal is INVALID_ARGUMENT or FAILED_PRECONDITION with a non-empty message that is
//     valid UTF-8 (it is sent as a gRPC status and inside HTTP JSON bodies).
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "strata/common/utf8.h"
#include "strata/server/proto_input.h"
#include "strata/server/request_parse.h"
#include "strata/server/request_translator.h"
#include "strata/tokenizer/chat_template.h"
#include "strata/v1/generation.pb.h"

namespace strata {
namespace {

void RequireGoodRefusal(const Status& status) {
  fuzz::Require(status.code() == StatusCode::kInvalidArgument ||
                    status.code() == StatusCode::kFailedPrecondition,
                "a refusal is INVALID_ARGUMENT or FAILED_PRECONDITION");
  fuzz::Require(!status.message().empty(), "a refusal says why");
  fuzz::Require(IsValidUtf8(status.message()), "a refusal's message is valid UTF-8");
}

const tokenizer::ChatTemplate* Template(uint8_t which) {
  static const std::vector<std::unique_ptr<tokenizer::ChatTemplate>> templates = [] {
    std::vector<std::unique_ptr<tokenizer::ChatTemplate>> out;
    for (const std::string& name : tokenizer::ChatTemplateRegistry::Global().Names()) {
      auto t = tokenizer::ChatTemplateRegistry::Global().Create(name);
      if (t.ok()) out.push_back(std::move(*t));
    }
    return out;
  }();
  if (templates.empty() || which % (templates.size() + 1) == templates.size()) return nullptr;
  return templates[which % (templates.size() + 1)].get();
}

}  // namespace
}  // namespace strata

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace strata;
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);  // parse complaints are expected here
    return true;
  }();
  (void)quiet;
  if (size == 0) return 0;
  const tokenizer::ChatTemplate* chat = Template(data[0]);
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);

  v1::GenerateRequest request;
  if (!request.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    const std::string why = server::DescribeUnparsable(*v1::GenerateRequest::descriptor(), bytes);
    fuzz::Require(!why.empty() && IsValidUtf8(why), "an unparsable request is described");
    return 0;
  }
  server::TranslatorLimits limits;
  limits.max_prompt_bytes = 8192;
  limits.context_tokens = 512;
  const tokenizer::Tokenizer& tok = fuzz::SmallTokenizer();
  // Structured-output formats compile against the small vocabulary (an LRU of a few, shared
  // across inputs as a server shares it across requests).
  static server::OutputConstraints constraints(&tok, /*max_compiled=*/4);
  const server::RequestTranslator translator(&tok, chat, limits, &constraints);
  const server::GenerationInput input = server::InputFromProto(request);
  StatusOr<server::TranslatedRequest> out = translator.Translate(input, /*drawn_seed=*/7);
  if (out.ok()) {
    fuzz::Require(!out->request.prompt.empty(), "a translated prompt is not empty");
    for (const int32_t id : out->request.prompt) {
      fuzz::Require(id >= 0 && static_cast<size_t>(id) < tok.vocab().tokens.size(),
                    "prompt ids are in the vocabulary");
    }
    fuzz::Require(out->request.params.max_tokens >= 1, "max_tokens >= 1");
    fuzz::Require((out->request.constraint != nullptr) ==
                      (input.output_format.kind != server::OutputFormatInput::Kind::kNone),
                  "a constraint exactly for a structured request");
  } else {
    RequireGoodRefusal(out.status());
  }
  if (input.kind == server::GenerationInput::Kind::kText ||
      input.kind == server::GenerationInput::Kind::kChat) {
    StatusOr<server::PromptText> text = translator.CheckedText(input, "text");
    if (!text.ok()) RequireGoodRefusal(text.status());
  }
  return 0;
}
