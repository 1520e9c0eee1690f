#include "bench/load/dataset.h"

#include <cstdint>
#include <fstream>
#include <sstream>

#include "bench/load/json_fields.h"

namespace strata::bench {

namespace {

StatusOr<RequestSpec> ParseEntry(std::string_view line, int64_t default_output_tokens) {
  STRATA_ASSIGN_OR_RETURN(const nlohmann::json object, ParseJsonObject(line));
  const nlohmann::json* prompt = FindField(object, "prompt");
  const nlohmann::json* ids = FindField(object, "prompt_token_ids");
  if ((prompt == nullptr) == (ids == nullptr)) {
    return InvalidArgumentError("needs exactly one of \"prompt\" and \"prompt_token_ids\"");
  }
  RequestSpec spec;
  if (prompt != nullptr) {
    if (!prompt->is_string()) return InvalidArgumentError("\"prompt\" must be a string");
    spec.prompt_text = AsString(prompt);
    spec.has_text = true;
  } else {
    if (!ids->is_array() || ids->empty()) {
      return InvalidArgumentError("\"prompt_token_ids\" must be a non-empty array of integers");
    }
    for (const nlohmann::json& v : *ids) {
      const std::optional<int64_t> id = AsInt(v);
      if (!id || *id < 0 || *id > INT32_MAX) {
        return InvalidArgumentError("\"prompt_token_ids\" must hold integers in [0, 2^31)");
      }
      spec.prompt_token_ids.push_back(static_cast<int32_t>(*id));
    }
  }
  spec.output_tokens = default_output_tokens;
  if (const nlohmann::json* out = FindField(object, "output_tokens")) {
    const std::optional<int64_t> n = AsInt(*out);
    if (!n || *n < 1) return InvalidArgumentError("\"output_tokens\" must be an integer >= 1");
    spec.output_tokens = *n;
  }
  return spec;
}

}  // namespace

StatusOr<std::vector<RequestSpec>> ParseDataset(std::string_view text,
                                                int64_t default_output_tokens) {
  std::vector<RequestSpec> entries;
  int64_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    const size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    StatusOr<RequestSpec> entry = ParseEntry(line, default_output_tokens);
    if (!entry.ok()) {
      return InvalidArgumentError("dataset line " + std::to_string(line_number) + ": " +
                                  entry.status().message());
    }
    entries.push_back(std::move(entry).value());
  }
  if (entries.empty()) return InvalidArgumentError("dataset has no entries");
  return entries;
}

StatusOr<std::vector<RequestSpec>> LoadDataset(const std::string& path,
                                               int64_t default_output_tokens) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read dataset " + path);
  std::stringstream text;
  text << in.rdbuf();
  StatusOr<std::vector<RequestSpec>> entries = ParseDataset(text.str(), default_output_tokens);
  if (!entries.ok()) return entries.status().WithContext(path);
  return entries;
}

}  // namespace strata::bench
