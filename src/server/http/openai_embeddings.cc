#include "strata/server/http/openai_embeddings.h"

#include <bit>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "json_type_name.h"

namespace strata::server::http {
namespace {

using nlohmann::json;

bool Fail(ApiError* error, int http_status, std::string param, std::string message) {
  error->http_status = http_status;
  error->param = std::move(param);
  error->message = std::move(message);
  return false;
}

constexpr char kTokenIdsRefused[] =
    "input holds token ids, which Strata does not embed: its embedding model has its own "
    "tokenizer (WordPiece), not the one such ids come from; send the text instead";

bool ReadInput(const json& doc, EmbeddingsRequest* out, ApiError* error) {
  const auto it = doc.find("input");
  if (it == doc.end() || it->is_null()) return Fail(error, 400, "input", "input is required");
  const json& input = *it;
  if (input.is_string()) {
    out->input.push_back(input.get<std::string>());
    return true;
  }
  if (!input.is_array()) {
    return Fail(
        error, 400, "input",
        std::string("input must be a string or an array of strings, got ") + JsonTypeName(input));
  }
  if (input.empty()) return Fail(error, 400, "input", "input must not be an empty array");
  if (input.size() > kMaxEmbeddingInputs) {
    return Fail(error, 400, "input",
                "input must hold at most " + std::to_string(kMaxEmbeddingInputs) + " texts, got " +
                    std::to_string(input.size()));
  }
  out->input.reserve(input.size());
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    if (item.is_string()) {
      out->input.push_back(item.get<std::string>());
    } else if (item.is_number_integer() || item.is_number_unsigned() || item.is_array()) {
      return Fail(error, 400, "input", kTokenIdsRefused);
    } else {
      return Fail(error, 400, "input",
                  "input[" + std::to_string(i) + "] must be a string, got " + JsonTypeName(item));
    }
  }
  return true;
}

// The field `name` when present and not null.
const json* Get(const json& doc, const char* name) {
  const auto it = doc.find(name);
  return it == doc.end() || it->is_null() ? nullptr : &*it;
}

void AppendFloat(std::string* out, float v) {
  if (!std::isfinite(v)) v = 0;  // not produced by the encoder; JSON has no NaN
  char buf[32];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr);
}

}  // namespace

bool ParseEmbeddingsRequest(std::string_view body, EmbeddingsRequest* out, ApiError* error) {
  *out = EmbeddingsRequest();
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Fail(error, 400, "", "the request body is not valid JSON");
  if (!doc.is_object()) {
    return Fail(error, 400, "",
                std::string("the request body must be a JSON object, got ") + JsonTypeName(doc));
  }
  const json* model = Get(doc, "model");
  if (model == nullptr) return Fail(error, 400, "model", "model is required");
  if (!model->is_string()) {
    return Fail(error, 400, "model",
                std::string("model must be a string, got ") + JsonTypeName(*model));
  }
  out->model = model->get<std::string>();
  if (!ReadInput(doc, out, error)) return false;
  if (const json* format = Get(doc, "encoding_format")) {
    if (*format == "base64") {
      out->base64 = true;
    } else if (*format != "float") {
      return Fail(error, 400, "encoding_format",
                  "encoding_format must be \"float\" or \"base64\", got " + format->dump());
    }
  }
  if (const json* dimensions = Get(doc, "dimensions")) {
    if (!dimensions->is_number_integer() && !dimensions->is_number_unsigned()) {
      return Fail(error, 400, "dimensions",
                  std::string("dimensions must be an integer, got ") + JsonTypeName(*dimensions));
    }
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    out->dimensions = dimensions->is_number_unsigned() &&
                              dimensions->get<uint64_t>() > static_cast<uint64_t>(kMax)
                          ? kMax
                          : dimensions->get<int64_t>();
  }
  if (const json* user = Get(doc, "user")) {
    if (!user->is_string()) {
      return Fail(error, 400, "user",
                  std::string("user must be a string, got ") + JsonTypeName(*user));
    }
    out->user = user->get<std::string>();
  }
  return true;
}

std::string Base64Floats(std::span<const float> values) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes;
  bytes.reserve(values.size() * 4);
  for (const float v : values) {
    const auto u = std::bit_cast<uint32_t>(v);
    for (int shift = 0; shift < 32; shift += 8) bytes.push_back(static_cast<char>(u >> shift));
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t n = (uint32_t{static_cast<uint8_t>(bytes[i])} << 16) |
                       (uint32_t{static_cast<uint8_t>(bytes[i + 1])} << 8) |
                       uint32_t{static_cast<uint8_t>(bytes[i + 2])};
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(kAlphabet[(n >> 6) & 63]);
    out.push_back(kAlphabet[n & 63]);
  }
  const size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t n = uint32_t{static_cast<uint8_t>(bytes[i])} << 16;
    if (rest == 2) n |= uint32_t{static_cast<uint8_t>(bytes[i + 1])} << 8;
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(rest == 2 ? kAlphabet[(n >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

std::string EmbeddingsBody(const embedding::Embeddings& embeddings, std::string_view model,
                           bool base64) {
  // Written by hand: 2048 vectors of 384 floats are ~15 MB of JSON, and the floats want their
  // shortest float32 (not float64) spelling.
  std::string out = R"({"object":"list","data":[)";
  for (size_t i = 0; i < embeddings.vectors.size(); ++i) {
    if (i > 0) out += ',';
    out += R"({"object":"embedding","index":)";
    out += std::to_string(i);
    out += R"(,"embedding":)";
    const std::vector<float>& v = embeddings.vectors[i];
    if (base64) {
      out += '"';
      out += Base64Floats(v);
      out += '"';
    } else {
      out += '[';
      for (size_t d = 0; d < v.size(); ++d) {
        if (d > 0) out += ',';
        AppendFloat(&out, v[d]);
      }
      out += ']';
    }
    out += '}';
  }
  out += R"(],"model":)";
  out += json(std::string(model)).dump(-1, ' ', false, json::error_handler_t::replace);
  const std::string tokens = std::to_string(embeddings.tokens);
  out += R"(,"usage":{"prompt_tokens":)" + tokens + R"(,"total_tokens":)" + tokens + "}}";
  return out;
}

EmbeddingsReply AnswerEmbeddings(std::string_view body, embedding::TextEmbedder* embedder,
                                 const Status& serving, metrics::ServerMetrics* metrics) {
  const auto start = std::chrono::steady_clock::now();
  EmbeddingsRequest request;
  int64_t tokens = 0;
  auto reply_error = [&](StatusCode code, const ApiError& error) {
    if (metrics != nullptr) metrics->ObserveEmbeddingCall("http", StatusCodeName(code), 0, 0, 0);
    return EmbeddingsReply{error.http_status, ErrorBody(error)};
  };
  auto reply_status = [&](const Status& status) {
    ApiError error = ApiErrorFromStatus(status, Endpoint::kCompletions);
    // The embedder names texts as "texts[i]"; this API calls them input[i].
    if (status.code() == StatusCode::kInvalidArgument && status.message().rfind("texts[", 0) == 0) {
      error.param = "input";
      error.message = "input" + status.message().substr(5);
    }
    return reply_error(status.code(), error);
  };

  if (embedder == nullptr) {
    ApiError error = ApiErrorFromStatus(
        NotFoundError("this server has no embedding model (start it with --embedding-model DIR)"),
        Endpoint::kCompletions);
    error.code = "";
    return reply_error(StatusCode::kNotFound, error);
  }
  ApiError bad;
  if (!ParseEmbeddingsRequest(body, &request, &bad)) {
    return reply_error(StatusCode::kInvalidArgument, bad);
  }
  if (!serving.ok()) return reply_status(serving);
  if (request.model != embedder->model_name()) {
    return reply_status(NotFoundError("the model '" + request.model +
                                      "' does not exist; this server's embedding model is '" +
                                      std::string(embedder->model_name()) + "'"));
  }
  if (request.dimensions && *request.dimensions != embedder->dimension()) {
    ApiError error;
    error.param = "dimensions";
    error.message = "dimensions must be " + std::to_string(embedder->dimension()) +
                    " (the model's; Strata does not shorten embeddings), got " +
                    std::to_string(*request.dimensions);
    return reply_error(StatusCode::kInvalidArgument, error);
  }
  StatusOr<embedding::Embeddings> embedded = embedder->Embed(request.input);
  if (!embedded.ok()) return reply_status(embedded.status());
  tokens = embedded->tokens;
  EmbeddingsReply reply{200, EmbeddingsBody(*embedded, embedder->model_name(), request.base64)};
  if (metrics != nullptr) {
    metrics->ObserveEmbeddingCall(
        "http", "OK", static_cast<int64_t>(request.input.size()), tokens,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return reply;
}

}  // namespace strata::server::http
