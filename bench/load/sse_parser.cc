#include "bench/load/sse_parser.h"

namespace strata::bench {

namespace {
constexpr size_t kMaxLine = size_t{16} << 20;
}  // namespace

void SseParser::EndLine(std::vector<std::string>* events) {
  if (line_.empty()) {
    if (has_data_) events->push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  const size_t colon = line_.find(':');
  if (colon == 0) {  // a comment
    line_.clear();
    return;
  }
  const std::string_view field = std::string_view(line_).substr(0, colon);
  if (field == "data") {
    std::string_view value;
    if (colon != std::string::npos) {
      value = std::string_view(line_).substr(colon + 1);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    }
    if (has_data_) data_ += '\n';
    data_.append(value);
    has_data_ = true;
  }
  line_.clear();
}

Status SseParser::Feed(std::string_view input, std::vector<std::string>* events) {
  for (const char c : input) {
    if (skip_lf_) {
      skip_lf_ = false;
      if (c == '\n') continue;
    }
    if (c == '\r' || c == '\n') {
      skip_lf_ = c == '\r';
      EndLine(events);
      continue;
    }
    line_ += c;
    if (line_.size() > kMaxLine) return DataLossError("event stream line longer than 16 MiB");
  }
  return OkStatus();
}

}  // namespace strata::bench
