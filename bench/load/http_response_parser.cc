#include "bench/load/http_response_parser.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace strata::bench {

namespace {
constexpr size_t kMaxHead = 64 * 1024;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}
}  // namespace

Status HttpResponseParser::ParseHead() {
  std::string_view rest(head_);
  bool first = true;
  while (!rest.empty()) {
    const size_t newline = rest.find('\n');
    std::string_view line = rest.substr(0, newline);
    rest = newline == std::string_view::npos ? std::string_view() : rest.substr(newline + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (first) {
      first = false;
      // HTTP/1.x SP 3DIGIT SP reason
      if (line.substr(0, 7) != "HTTP/1." || line.size() < 12 || line[8] != ' ') {
        return DataLossError("bad HTTP status line '" + std::string(line) + "'");
      }
      const std::string_view code = line.substr(9, 3);
      const auto [end, ec] = std::from_chars(code.data(), code.data() + 3, status_code_);
      if (ec != std::errc() || end != code.data() + 3) {
        return DataLossError("bad HTTP status line '" + std::string(line) + "'");
      }
      continue;
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return DataLossError("bad HTTP header line '" + std::string(line) + "'");
    }
    headers_.emplace_back(Lower(Trim(line.substr(0, colon))),
                          std::string(Trim(line.substr(colon + 1))));
  }
  if (first) return DataLossError("empty HTTP response head");
  if (const auto te = Header("transfer-encoding")) {
    chunked_ = Lower(*te).find("chunked") != std::string::npos;
  }
  if (const auto cl = Header("content-length"); cl && !chunked_) {
    uint64_t n = 0;
    const auto [end, ec] = std::from_chars(cl->data(), cl->data() + cl->size(), n);
    if (ec != std::errc() || end != cl->data() + cl->size()) {
      return DataLossError("bad Content-Length '" + *cl + "'");
    }
    content_length_ = n;
  }
  // 1xx, 204 and 304 responses have no body.
  if (status_code_ / 100 == 1 || status_code_ == 204 || status_code_ == 304) content_length_ = 0;
  return OkStatus();
}

Status HttpResponseParser::Feed(std::string_view input, std::string* body) {
  if (state_ == State::kHeaders) {
    // Scan for the blank line ending the head; it may straddle the previous Feed.
    const size_t old_size = head_.size();
    head_.append(input);
    size_t end = std::string::npos;
    size_t body_start = 0;
    for (size_t i = old_size >= 3 ? old_size - 3 : 0; i < head_.size(); ++i) {
      if (head_.compare(i, 4, "\r\n\r\n") == 0) {
        end = i;
        body_start = i + 4;
        break;
      }
      if (head_.compare(i, 2, "\n\n") == 0) {
        end = i;
        body_start = i + 2;
        break;
      }
    }
    if (end == std::string::npos) {
      if (head_.size() > kMaxHead) return DataLossError("HTTP response head over 64 KiB");
      return OkStatus();
    }
    const std::string rest = head_.substr(body_start);
    head_.resize(end);
    STRATA_RETURN_IF_ERROR(ParseHead());
    state_ = State::kBody;
    if (rest.empty()) return OkStatus();
    return Feed(std::string_view(rest), body);
  }
  if (chunked_) return chunked_decoder_.Feed(input, body);
  if (content_length_) {
    const uint64_t n = std::min<uint64_t>(input.size(), *content_length_ - body_bytes_);
    body->append(input.data(), static_cast<size_t>(n));
    body_bytes_ += n;
    return OkStatus();
  }
  body->append(input);
  body_bytes_ += input.size();
  return OkStatus();
}

bool HttpResponseParser::done() const {
  if (state_ != State::kBody) return false;
  if (chunked_) return chunked_decoder_.done();
  if (content_length_) return body_bytes_ >= *content_length_;
  return false;  // delimited by the close
}

Status HttpResponseParser::FinishOnClose() const {
  if (state_ != State::kBody) return DataLossError("connection closed before the HTTP head ended");
  if (chunked_ && !chunked_decoder_.done()) {
    return DataLossError("connection closed inside the chunked body");
  }
  if (content_length_ && body_bytes_ < *content_length_) {
    return DataLossError("connection closed after " + std::to_string(body_bytes_) + " of " +
                         std::to_string(*content_length_) + " body bytes");
  }
  return OkStatus();
}

std::optional<std::string> HttpResponseParser::Header(std::string_view name) const {
  const std::string key = Lower(name);
  for (const auto& [k, v] : headers_) {
    if (k == key) return v;
  }
  return std::nullopt;
}

}  // namespace strata::bench
