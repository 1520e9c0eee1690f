// OtlpHttpExporter: a SpanSink that sends spans to an OpenTelemetry collector over OTLP/HTTP
// (POST <endpoint> with a protobuf ExportTraceServiceRequest, Content-Type
// application/x-protobuf), in batches, from one background thread.
//
// Emit queues and returns at once; the thread waits until max_batch_spans are queued or
// flush_interval has passed since the oldest queued span, then POSTs batches of at most
// max_batch_spans. Nothing is retried: a failed POST loses its spans (counted "failed"), a full
// queue refuses a whole Emit (counted "dropped"), so tracing never holds memory or threads
// hostage to a slow collector. Failures are logged at warn at most once per 10 s, naming the
// endpoint and the error, never the headers' values (they may hold credentials).
//
// Thread rules: Emit and Shutdown may be called from any thread, concurrently; Emit takes a
// mutex briefly and never waits on the network. on_spans is called from Emit's caller and from
// the background thread, never under the exporter's lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "strata/common/status.h"
#include "strata/trace/span.h"

namespace httplib {
class Client;
}  // namespace httplib

namespace strata::trace {

struct OtlpEndpoint {
  std::string base;  // "http://host:port" (or https), as httplib::Client takes it
  std::string path;  // "/v1/traces" when the URL has none
  bool tls = false;  // https
};

// Parses "http://host[:port][/path]" or "https://...": host a name, an IPv4 address or a
// bracketed IPv6 address; port 1 to 65535 (default: the scheme's); path absent or "/" means
// "/v1/traces" (the OTLP/HTTP default). Anything else (another scheme, an empty host, a bad
// port, user info, spaces or control characters, a fragment) is INVALID_ARGUMENT naming the
// problem.
StatusOr<OtlpEndpoint> ParseOtlpEndpoint(std::string_view url);

// Parses "key=value,key2=value2" (the OTEL_EXPORTER_OTLP_HEADERS format): whitespace around
// items, keys and values is trimmed, empty items are skipped (so "" means none), values are
// percent-decoded ("Bearer%20abc"). A malformed item (no '=', a key that is not an HTTP header
// name, a bad %-escape, a control character) is INVALID_ARGUMENT naming the item's position and
// key, never its value.
StatusOr<std::vector<std::pair<std::string, std::string>>> ParseOtlpHeaders(std::string_view text);

struct OtlpOptions {
  std::string endpoint;                                      // URL as ParseOtlpEndpoint takes it
  std::vector<std::pair<std::string, std::string>> headers;  // sent with every POST
  std::vector<Attribute> resource;                           // service.name etc.
  std::string scope_name = "strata";
  std::string scope_version;
  size_t max_queue_spans = 4096;  // spans waiting for export at most; more are dropped
  size_t max_batch_spans = 512;   // spans per POST at most
  std::chrono::milliseconds flush_interval{500};
  std::chrono::milliseconds timeout{3000};  // each of connect, read and write of one POST
  // Told of every span's fate: result "exported", "dropped" (queue full or shut down) or
  // "failed" (the POST failed, got a non-2xx answer, or the collector rejected the spans in a
  // partial success). Called from any thread; must be cheap and must not call Shutdown.
  std::function<void(std::string_view result, int64_t spans)> on_spans;
};

class OtlpHttpExporter final : public SpanSink {
 public:
  // Validates the options (endpoint, headers, non-zero sizes) and starts the background thread.
  // INVALID_ARGUMENT for bad options.
  static StatusOr<std::unique_ptr<OtlpHttpExporter>> Create(OtlpOptions options);

  ~OtlpHttpExporter() override;  // Shutdown(std::chrono::seconds(1))

  OtlpHttpExporter(const OtlpHttpExporter&) = delete;
  OtlpHttpExporter& operator=(const OtlpHttpExporter&) = delete;

  // Queues the spans (one trace's spans together: if they do not all fit, all are dropped and
  // counted). Never blocks on the network; takes a mutex briefly.
  void Emit(std::vector<Span> spans) override;

  // Exports what is queued within `grace` (spans still queued after it are counted dropped; a
  // POST still in flight at the end is cut short and counted failed), then stops the thread.
  // Idempotent; Emit after it drops.
  void Shutdown(std::chrono::milliseconds grace);

 private:
  struct Queued {
    Span span;
    std::chrono::steady_clock::time_point at;  // when Emit queued it
  };

  OtlpHttpExporter(OtlpOptions options, OtlpEndpoint endpoint,
                   std::unique_ptr<httplib::Client> client);
  void Run();  // the background thread
  // POSTs one batch; returns how many spans the collector accepted (the rest failed).
  size_t Export(const std::vector<Span>& batch, bool stopping,
                std::chrono::steady_clock::time_point deadline);
  void Report(std::string_view result, size_t spans) const;
  void WarnRateLimited(std::string_view error, size_t spans);

  const OtlpOptions options_;
  const OtlpEndpoint endpoint_;
  const std::unique_ptr<httplib::Client> client_;  // used by the background thread only
                                                   // (Shutdown may stop() it)

  std::mutex mutex_;              // guards the members below
  std::condition_variable wake_;  // the thread's: spans queued, or stopping
  std::condition_variable done_;  // Shutdown's: the thread is finished
  std::deque<Queued> queue_;
  bool stopping_ = false;
  bool worker_done_ = false;
  std::chrono::steady_clock::time_point deadline_;  // stopping_: when the grace ends

  std::mutex shutdown_mutex_;  // serializes Shutdown (so one caller joins)
  std::thread worker_;

  // The background thread's own.
  std::chrono::steady_clock::time_point last_warning_{};
  bool warned_ = false;
  int64_t unlogged_failures_ = 0;
};

}  // namespace strata::trace
