// libFuzzer target: arbitrary bytes as the body of POST /v1/completions or
// /v1/chat/completions (the first byte's bit 0 picks the endpoint): ParseOpenAiRequest must
// accept or refuse without crashing; a refusal's OpenAI error body must be valid JSON carrying a
// status of 400 (cpp-httplib would turn a throwing serializer into a 500). With bit 1 set, the
// bytes are a batch job's input file instead (ParseBatchInput, each line's body through
// ParseOpenAiRequest): every error-file line must be JSON, every kept line's body must parse.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "strata/server/http/batch_input.h"
#include "strata/server/http/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace strata;
  using namespace strata::server::http;
  if (size == 0) return 0;
  const Endpoint endpoint = (data[0] & 1) ? Endpoint::kChatCompletions : Endpoint::kCompletions;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 2) {
    const auto check = [endpoint](std::string_view, std::string_view line_body) {
      OpenAiRequest line;
      ApiError error;
      return ParseOpenAiRequest(endpoint, line_body, 16, &line, &error)
                 ? OkStatus()
                 : InvalidArgumentError(error.message);
    };
    const char* url =
        endpoint == Endpoint::kChatCompletions ? "/v1/chat/completions" : "/v1/completions";
    StatusOr<BatchInput> input = ParseBatchInput(body, url, check);
    if (!input.ok()) return 0;
    for (const jobs::LineResult& r : input->invalid) {
      fuzz::Require(!r.ok && nlohmann::json::accept(r.json), "an error line is JSON");
    }
    for (const jobs::BatchLine& line : input->lines) {
      fuzz::Require(check(url, line.body).ok(), "a kept line's body parses");
    }
    return 0;
  }
  OpenAiRequest parsed;
  ApiError error;
  if (ParseOpenAiRequest(endpoint, body, /*default_max_tokens=*/16, &parsed, &error)) {
    fuzz::Require(parsed.endpoint == endpoint, "the endpoint is kept");
    return 0;
  }
  fuzz::Require(error.http_status == 400 || error.http_status == 404,
                "a refused body is 400 (or 404 for an unknown model)");
  std::string text;
  try {
    text = ErrorBody(error);
  } catch (...) {
    fuzz::Require(false, "the error body serializes");
  }
  fuzz::Require(nlohmann::json::accept(text), "the error body is JSON");
  return 0;
}
