// HttpResponseParser: incremental parsing of one HTTP/1.1 response — status line, headers, and a
// body framed by chunked transfer coding, Content-Length, or the connection's close.
//
// Thread rules: not thread-safe; one connection's reader owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/load/chunked_decoder.h"
#include "strata/common/status.h"

namespace strata::bench {

class HttpResponseParser {
 public:
  // Parses `input`, appending decoded body bytes to `*body`. kDataLoss on a malformed response.
  Status Feed(std::string_view input, std::string* body);
  // The peer closed the connection: OK when the response was complete or delimited by the
  // close; kDataLoss when it was cut short.
  Status FinishOnClose() const;

  bool headers_done() const { return state_ != State::kHeaders; }
  bool done() const;
  int status_code() const { return status_code_; }
  // The first header named `name` (case-insensitive), or nullopt.
  std::optional<std::string> Header(std::string_view name) const;

 private:
  enum class State { kHeaders, kBody };
  Status ParseHead();

  State state_ = State::kHeaders;
  std::string head_;
  int status_code_ = 0;
  std::vector<std::pair<std::string, std::string>> headers_;
  bool chunked_ = false;
  std::optional<uint64_t> content_length_;
  uint64_t body_bytes_ = 0;
  ChunkedDecoder chunked_decoder_;
};

}  // namespace strata::bench
