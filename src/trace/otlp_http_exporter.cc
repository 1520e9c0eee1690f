#include "strata/trace/otlp_http_exporter.h"

#include <httplib.h>

#include <algorithm>
#include <charconv>
#include <span>

#include "strata/common/logging.h"
#include "strata/otlp/v1/trace.pb.h"
#include "strata/trace/otlp_encoding.h"

namespace strata::trace {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kDefaultPath = "/v1/traces";
constexpr std::chrono::seconds kWarnInterval{10};

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool IsHexDigit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

// An HTTP header name: RFC 9110's token characters.
bool IsTokenChar(char c) {
  return IsAlnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// Visible ASCII or above (UTF-8 bytes), plus space and tab: what a header value may hold.
bool IsValueChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u == '\t' || (u >= 0x20 && u != 0x7f);
}

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    const char c = s[i] >= 'A' && s[i] <= 'Z' ? static_cast<char>(s[i] - 'A' + 'a') : s[i];
    if (c != prefix[i]) return false;
  }
  return true;
}

Status ValidateHeader(const std::string& key, const std::string& value, size_t index) {
  const std::string where = "OTLP header " + std::to_string(index + 1);
  if (key.empty() || !std::all_of(key.begin(), key.end(), IsTokenChar)) {
    return InvalidArgumentError(where +
                                ": the key must be an HTTP header name (letters, digits and "
                                "!#$%&'*+-.^_`|~)");
  }
  if (!std::all_of(value.begin(), value.end(), IsValueChar)) {
    return InvalidArgumentError(where + " ('" + key +
                                "'): the value holds a control character (CR, LF, ...)");
  }
  return OkStatus();
}

}  // namespace

StatusOr<OtlpEndpoint> ParseOtlpEndpoint(std::string_view url) {
  const std::string what = "the OTLP endpoint ";
  OtlpEndpoint endpoint;
  std::string_view rest;
  if (StartsWithNoCase(url, "http://")) {
    rest = url.substr(7);
  } else if (StartsWithNoCase(url, "https://")) {
    rest = url.substr(8);
    endpoint.tls = true;
  } else {
    return InvalidArgumentError(what +
                                "must start with http:// or https:// (e.g. "
                                "http://localhost:4318)");
  }
  for (const char c : url) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) {
      return InvalidArgumentError(what + "must not hold spaces, control or non-ASCII characters");
    }
  }
  const size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  const std::string_view path =
      slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) {
    return InvalidArgumentError(what +
                                "must not hold user info (user:password@); send credentials "
                                "as headers");
  }
  if (path.find('#') != std::string_view::npos) {
    return InvalidArgumentError(what + "must not hold a fragment ('#')");
  }
  std::string_view host;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return InvalidArgumentError(what + "has an IPv6 address without its closing ']'");
    }
    host = authority.substr(0, close + 1);
    const std::string_view inside = host.substr(1, host.size() - 2);
    if (inside.empty() || !std::all_of(inside.begin(), inside.end(), [](char c) {
          return IsHexDigit(c) || c == ':' || c == '.';
        })) {
      return InvalidArgumentError(what + "has a malformed IPv6 address");
    }
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return InvalidArgumentError(what + "has characters after the IPv6 address");
      }
      port = after.substr(1);
      if (port.empty()) return InvalidArgumentError(what + "has an empty port after ':'");
    }
  } else {
    const size_t colon = authority.find(':');
    host = authority.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) return InvalidArgumentError(what + "has an empty port after ':'");
    }
    if (host.empty()) return InvalidArgumentError(what + "has no host");
    if (!std::all_of(host.begin(), host.end(),
                     [](char c) { return IsAlnum(c) || c == '-' || c == '.' || c == '_'; })) {
      return InvalidArgumentError(what + "has a host that is not a name or an address");
    }
  }
  if (!port.empty()) {
    int n = 0;
    const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), n);
    if (error != std::errc() || end != port.data() + port.size() || n < 1 || n > 65535 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return InvalidArgumentError(what + "has a bad port (expected 1 to 65535)");
    }
  }
  endpoint.base = endpoint.tls ? "https://" : "http://";
  endpoint.base += host;
  if (!port.empty()) {
    endpoint.base += ':';
    endpoint.base += port;
  }
  endpoint.path = path.empty() || path == "/" ? std::string(kDefaultPath) : std::string(path);
  return endpoint;
}

StatusOr<std::vector<std::pair<std::string, std::string>>> ParseOtlpHeaders(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> headers;
  size_t index = 0;
  while (true) {
    const size_t comma = text.find(',');
    const std::string_view item = Trim(text.substr(0, comma));
    if (!item.empty()) {
      const std::string where = "OTLP header " + std::to_string(index + 1);
      const size_t eq = item.find('=');
      if (eq == std::string_view::npos) {
        return InvalidArgumentError(where + ": expected key=value");
      }
      std::string key(Trim(item.substr(0, eq)));
      if (key.empty()) return InvalidArgumentError(where + ": the key is empty");
      const std::string_view raw = Trim(item.substr(eq + 1));
      std::string value;
      value.reserve(raw.size());
      for (size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] != '%') {
          value += raw[i];
          continue;
        }
        if (i + 2 >= raw.size() || !IsHexDigit(raw[i + 1]) || !IsHexDigit(raw[i + 2])) {
          return InvalidArgumentError(where + " ('" + key + "'): a '%' must start a %XX escape");
        }
        value += static_cast<char>(HexValue(raw[i + 1]) << 4 | HexValue(raw[i + 2]));
        i += 2;
      }
      STRATA_RETURN_IF_ERROR(ValidateHeader(key, value, index));
      headers.emplace_back(std::move(key), std::move(value));
    }
    ++index;
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return headers;
}

StatusOr<std::unique_ptr<OtlpHttpExporter>> OtlpHttpExporter::Create(OtlpOptions options) {
  STRATA_ASSIGN_OR_RETURN(OtlpEndpoint endpoint, ParseOtlpEndpoint(options.endpoint));
  for (size_t i = 0; i < options.headers.size(); ++i) {
    STRATA_RETURN_IF_ERROR(ValidateHeader(options.headers[i].first, options.headers[i].second, i));
  }
  if (options.max_queue_spans == 0 || options.max_batch_spans == 0) {
    return InvalidArgumentError(
        "the OTLP exporter's max_queue_spans and max_batch_spans must be "
        "at least 1");
  }
  // The bounds keep the thread's deadlines (now + interval) far from overflow.
  constexpr std::chrono::milliseconds kMaxDuration = std::chrono::hours(24);
  if (options.flush_interval.count() < 0 || options.flush_interval > kMaxDuration) {
    return InvalidArgumentError("the OTLP exporter's flush interval must be 0 to 24 h");
  }
  if (options.timeout.count() <= 0 || options.timeout > kMaxDuration) {
    return InvalidArgumentError("the OTLP exporter's timeout must be 1 ms to 24 h");
  }
  auto client = std::make_unique<httplib::Client>(endpoint.base);
  if (!client->is_valid()) {
    return InvalidArgumentError("the OTLP endpoint " + endpoint.base +
                                " is not one the HTTP client can reach (https needs OpenSSL "
                                "support)");
  }
  client->set_keep_alive(true);
  client->set_connection_timeout(options.timeout);
  client->set_read_timeout(options.timeout);
  client->set_write_timeout(options.timeout);
  return std::unique_ptr<OtlpHttpExporter>(
      new OtlpHttpExporter(std::move(options), std::move(endpoint), std::move(client)));
}

OtlpHttpExporter::OtlpHttpExporter(OtlpOptions options, OtlpEndpoint endpoint,
                                   std::unique_ptr<httplib::Client> client)
    : options_(std::move(options)), endpoint_(std::move(endpoint)), client_(std::move(client)) {
  worker_ = std::thread([this] { Run(); });
}

OtlpHttpExporter::~OtlpHttpExporter() { Shutdown(std::chrono::seconds(1)); }

void OtlpHttpExporter::Report(std::string_view result, size_t spans) const {
  if (options_.on_spans && spans > 0) options_.on_spans(result, static_cast<int64_t>(spans));
}

void OtlpHttpExporter::Emit(std::vector<Span> spans) {
  if (spans.empty()) return;
  const size_t n = spans.size();
  bool wake = false;
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopping_ && queue_.size() + n <= options_.max_queue_spans) {
      const Clock::time_point now = Clock::now();
      wake = queue_.empty() || queue_.size() + n >= options_.max_batch_spans;
      for (Span& span : spans) queue_.push_back(Queued{std::move(span), now});
      queued = true;
    }
  }
  if (!queued) {
    Report("dropped", n);
    return;
  }
  if (wake) wake_.notify_one();
}

void OtlpHttpExporter::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    // Wait until a batch is due: a full one, the oldest span's flush interval over, or stopping.
    while (!stopping_ && queue_.size() < options_.max_batch_spans) {
      if (queue_.empty()) {
        wake_.wait(lock);
        continue;
      }
      const Clock::time_point due = queue_.front().at + options_.flush_interval;
      if (Clock::now() >= due) break;
      wake_.wait_until(lock, due);
    }
    if (queue_.empty()) {
      if (stopping_) break;
      continue;
    }
    const bool stopping = stopping_;
    const Clock::time_point deadline = deadline_;
    if (stopping && Clock::now() >= deadline) break;
    const size_t n = std::min(queue_.size(), options_.max_batch_spans);
    std::vector<Span> batch;
    batch.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      batch.push_back(std::move(queue_.front().span));
      queue_.pop_front();
    }
    lock.unlock();
    const size_t exported = Export(batch, stopping, deadline);
    Report("exported", exported);
    Report("failed", batch.size() - exported);
    lock.lock();
  }
  // Stopping: what the grace did not cover is dropped.
  const size_t left = queue_.size();
  queue_.clear();
  worker_done_ = true;
  lock.unlock();
  done_.notify_all();
  Report("dropped", left);
}

size_t OtlpHttpExporter::Export(const std::vector<Span>& batch, bool stopping,
                                Clock::time_point deadline) {
  const std::string body =
      EncodeExportRequest(options_.resource, options_.scope_name, options_.scope_version, batch);
  if (stopping) {
    // Shutdown's grace bounds this POST too.
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    const auto timeout = std::max(std::chrono::milliseconds(1), std::min(left, options_.timeout));
    client_->set_connection_timeout(timeout);
    client_->set_read_timeout(timeout);
    client_->set_write_timeout(timeout);
  }
  httplib::Headers headers(options_.headers.begin(), options_.headers.end());
  const httplib::Result result =
      client_->Post(endpoint_.path, headers, body, "application/x-protobuf");
  if (!result) {
    WarnRateLimited(httplib::to_string(result.error()), batch.size());
    return 0;
  }
  if (result->status < 200 || result->status > 299) {
    WarnRateLimited("HTTP " + std::to_string(result->status), batch.size());
    return 0;
  }
  // A collector that refused some spans says so in a partial success (OTLP/HTTP §"Partial
  // Success"); an empty or unreadable answer means all were accepted.
  otlp::v1::ExportTraceServiceResponse response;
  if (!result->body.empty() && response.ParseFromString(result->body) &&
      response.partial_success().rejected_spans() > 0) {
    const auto rejected = std::min<size_t>(
        batch.size(), static_cast<size_t>(response.partial_success().rejected_spans()));
    WarnRateLimited("the collector rejected " + std::to_string(rejected) +
                        " spans: " + response.partial_success().error_message().substr(0, 200),
                    rejected);
    return batch.size() - rejected;
  }
  return batch.size();
}

void OtlpHttpExporter::WarnRateLimited(std::string_view error, size_t spans) {
  ++unlogged_failures_;
  const Clock::time_point now = Clock::now();
  if (warned_ && now - last_warning_ < kWarnInterval) return;
  warned_ = true;
  last_warning_ = now;
  const std::string spans_text = std::to_string(spans);
  const std::string failures_text = std::to_string(unlogged_failures_);
  unlogged_failures_ = 0;
  // The endpoint without any query string, and never the headers: either may hold credentials.
  const std::string where = endpoint_.base + endpoint_.path.substr(0, endpoint_.path.find('?'));
  LogWarn("OTLP trace export failed", {{"endpoint", where},
                                       {"error", error},
                                       {"spans", spans_text},
                                       {"failures_since_last_warning", failures_text}});
}

void OtlpHttpExporter::Shutdown(std::chrono::milliseconds grace) {
  std::lock_guard<std::mutex> shutdown_lock(shutdown_mutex_);
  if (!worker_.joinable()) return;
  const Clock::time_point deadline =
      Clock::now() + std::clamp<std::chrono::milliseconds>(grace, std::chrono::milliseconds(0),
                                                           std::chrono::hours(24));
  {
    std::unique_lock<std::mutex> lock(mutex_);
    stopping_ = true;
    deadline_ = deadline;
    wake_.notify_all();
    if (!done_.wait_until(lock, deadline, [this] { return worker_done_; })) {
      // The grace is over with a POST in flight: cut it short (its spans count failed).
      lock.unlock();
      client_->stop();
    }
  }
  worker_.join();
}

}  // namespace strata::trace
