#include "strata/server/http/batch_input.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>
#include <unordered_set>
#include <utility>

#include "json_type_name.h"

namespace strata::server::http {
namespace {

using nlohmann::json;

std::string RandomSuffix() {
  static thread_local std::mt19937_64 random{std::random_device{}()};
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string out;
  for (int i = 0; i < 24; ++i) out += kAlphabet[random() % (sizeof(kAlphabet) - 1)];
  return out;
}

}  // namespace

bool IsBatchEndpoint(std::string_view endpoint) {
  return std::find(std::begin(kBatchEndpoints), std::end(kBatchEndpoints), endpoint) !=
         std::end(kBatchEndpoints);
}

std::string BatchResultLine(std::string_view custom_id, int http_status,
                            std::string_view request_id, std::string_view response_body,
                            std::string_view error_code, std::string_view error_message) {
  json line = {{"id", "batch_req_" + RandomSuffix()}};
  line["custom_id"] = custom_id.empty() ? json(nullptr) : json(std::string(custom_id));
  if (response_body.empty()) {
    line["response"] = nullptr;
  } else {
    json body = json::parse(response_body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) body = std::string(response_body);
    line["response"] = {{"status_code", http_status},
                        {"request_id", std::string(request_id)},
                        {"body", std::move(body)}};
  }
  if (error_code.empty() && error_message.empty()) {
    line["error"] = nullptr;
  } else {
    line["error"] = {{"code", std::string(error_code)}, {"message", std::string(error_message)}};
  }
  return line.dump(-1, ' ', false, json::error_handler_t::replace);
}

StatusOr<BatchInput> ParseBatchInput(std::string_view content, std::string_view endpoint,
                                     const BatchBodyCheck& check, const BatchInputLimits& limits) {
  BatchInput out;
  std::unordered_set<std::string> custom_ids;
  int64_t index = 0;  // of request lines
  size_t line_number = 0;
  size_t start = 0;
  while (start < content.size()) {
    size_t end = content.find('\n', start);
    if (end == std::string_view::npos) end = content.size();
    std::string_view text = content.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (text.find_first_not_of(" \t") == std::string_view::npos) continue;
    if (text.size() > limits.max_line_bytes) {
      return InvalidArgumentError("line " + std::to_string(line_number) + " is longer than " +
                                  std::to_string(limits.max_line_bytes) + " bytes");
    }
    if (static_cast<size_t>(index) >= limits.max_lines) {
      return InvalidArgumentError("the file has more than " + std::to_string(limits.max_lines) +
                                  " request lines");
    }
    const std::string where = "line " + std::to_string(line_number) + ": ";
    std::string custom_id;
    const auto invalid = [&](const std::string& message) {
      out.invalid.push_back(
          {index, false,
           BatchResultLine(custom_id, 0, "", "", "invalid_request", where + message)});
      ++index;
    };
    const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object()) {
      invalid(doc.is_discarded() ? "not valid JSON"
                                 : "must be a JSON object, got " + std::string(JsonTypeName(doc)));
      continue;
    }
    const auto id = doc.find("custom_id");
    if (id != doc.end() && id->is_string()) custom_id = id->get<std::string>();
    if (id == doc.end() || !id->is_string() || custom_id.empty()) {
      custom_id.clear();
      invalid("custom_id must be a non-empty string");
      continue;
    }
    if (!custom_ids.insert(custom_id).second) {
      invalid("custom_id '" + custom_id + "' is used by an earlier line");
      continue;
    }
    const auto method = doc.find("method");
    if (method == doc.end() || *method != "POST") {
      invalid("method must be \"POST\"");
      continue;
    }
    const auto url = doc.find("url");
    if (url == doc.end() || !url->is_string() || *url != endpoint) {
      invalid("url must be the batch's endpoint, \"" + std::string(endpoint) + "\"");
      continue;
    }
    const auto body = doc.find("body");
    if (body == doc.end() || !body->is_object()) {
      invalid("body must be a JSON object");
      continue;
    }
    std::string body_text = body->dump(-1, ' ', false, json::error_handler_t::replace);
    if (Status checked = check(endpoint, body_text); !checked.ok()) {
      invalid(checked.message());
      continue;
    }
    out.lines.push_back({index, std::move(custom_id), std::move(body_text)});
    ++index;
  }
  if (index == 0) return InvalidArgumentError("the file has no request line");
  return out;
}

}  // namespace strata::server::http
