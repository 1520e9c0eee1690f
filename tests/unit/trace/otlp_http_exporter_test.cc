#include "strata/trace/otlp_http_exporter.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "strata/otlp/v1/trace.pb.h"

namespace strata::trace {
namespace {

namespace pb = ::strata::otlp::v1;
using std::chrono::milliseconds;

// Polls `done` until it holds or 10 s pass (a generous deadline, not a timing assertion).
bool WaitFor(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return done();
}

// An OTLP/HTTP collector on 127.0.0.1: records every POST /v1/traces and answers `status`.
class Collector {
 public:
  struct Received {
    std::string content_type;
    std::string api_key;  // the x-api-key header
    pb::ExportTraceServiceRequest request;
    bool parsed = false;
  };

  explicit Collector(int status = 200, std::string answer = {}) {
    server_.Post("/v1/traces",
                 [this, status, answer](const httplib::Request& req, httplib::Response& res) {
                   if (before_answer) before_answer();
                   Received received;
                   received.content_type = req.get_header_value("Content-Type");
                   received.api_key = req.get_header_value("x-api-key");
                   received.parsed = received.request.ParseFromString(req.body);
                   {
                     std::lock_guard<std::mutex> lock(mutex_);
                     received_.push_back(std::move(received));
                   }
                   res.status = status;
                   if (!answer.empty()) res.set_content(answer, "application/x-protobuf");
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() only stops a server that is running.
    WaitFor([this] { return server_.is_running(); });
  }
  ~Collector() {
    server_.stop();
    thread_.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  std::vector<Received> received() {
    std::lock_guard<std::mutex> lock(mutex_);
    return received_;
  }

  size_t spans() {
    size_t n = 0;
    for (const Received& r : received()) {
      for (const pb::ResourceSpans& rs : r.request.resource_spans()) {
        for (const pb::ScopeSpans& ss : rs.scope_spans()) n += ss.spans_size();
      }
    }
    return n;
  }

  std::vector<pb::Span> all_spans() {
    std::vector<pb::Span> out;
    for (const Received& r : received()) {
      for (const pb::ResourceSpans& rs : r.request.resource_spans()) {
        for (const pb::ScopeSpans& ss : rs.scope_spans()) {
          out.insert(out.end(), ss.spans().begin(), ss.spans().end());
        }
      }
    }
    return out;
  }

  std::function<void()> before_answer;  // set before any span is sent

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::vector<Received> received_;
};

// What on_spans was told, by result.
struct Fates {
  std::atomic<int64_t> exported{0};
  std::atomic<int64_t> dropped{0};
  std::atomic<int64_t> failed{0};
  std::atomic<int64_t> unknown{0};

  std::function<void(std::string_view, int64_t)> Callback() {
    return [this](std::string_view result, int64_t n) {
      (result == "exported"  ? exported
       : result == "dropped" ? dropped
       : result == "failed"  ? failed
                             : unknown) += n;
    };
  }
};

// One trace of `n` spans: a server root and internal children, named "<prefix>.<i>".
std::vector<Span> MakeTrace(size_t n, const std::string& prefix) {
  const TraceId trace_id = NewTraceId();
  std::vector<Span> spans(n);
  for (size_t i = 0; i < n; ++i) {
    spans[i].trace_id = trace_id;
    spans[i].span_id = NewSpanId();
    if (i > 0) spans[i].parent_span_id = spans[0].span_id;
    spans[i].name = prefix + "." + std::to_string(i);
    spans[i].kind = i == 0 ? SpanKind::kServer : SpanKind::kInternal;
    spans[i].start_unix_nano = 1'000'000'000 + static_cast<int64_t>(i);
    spans[i].end_unix_nano = 2'000'000'000;
  }
  return spans;
}

// Options sending to `endpoint` every `flush` (or when a batch is full), fates told to `fates`.
OtlpOptions OptionsFor(std::string endpoint, milliseconds flush, Fates* fates) {
  OtlpOptions options;
  options.endpoint = std::move(endpoint);
  options.flush_interval = flush;
  options.on_spans = fates->Callback();
  return options;
}

std::unique_ptr<OtlpHttpExporter> MustCreate(OtlpOptions options) {
  StatusOr<std::unique_ptr<OtlpHttpExporter>> exporter = OtlpHttpExporter::Create(options);
  EXPECT_TRUE(exporter.ok()) << exporter.status().ToString();
  return exporter.ok() ? std::move(exporter).value() : nullptr;
}

// A loopback port nobody listens on: bound by the kernel's choice, then closed.
int UnusedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(ParseOtlpEndpoint, AcceptsHttpAndHttpsUrls) {
  struct Case {
    std::string url, base, path;
    bool tls;
  };
  const std::vector<Case> cases = {
      {"http://localhost:4318", "http://localhost:4318", "/v1/traces", false},
      {"http://localhost:4318/", "http://localhost:4318", "/v1/traces", false},
      {"http://127.0.0.1:4318/v1/traces", "http://127.0.0.1:4318", "/v1/traces", false},
      {"https://otel.example.com/custom/traces", "https://otel.example.com", "/custom/traces",
       true},
      {"HTTPS://collector_1.internal:443", "https://collector_1.internal:443", "/v1/traces", true},
      {"http://[::1]:4318/v1/traces", "http://[::1]:4318", "/v1/traces", false},
      {"http://otel:65535/x?tenant=a", "http://otel:65535", "/x?tenant=a", false},
  };
  for (const Case& c : cases) {
    StatusOr<OtlpEndpoint> endpoint = ParseOtlpEndpoint(c.url);
    ASSERT_TRUE(endpoint.ok()) << c.url << ": " << endpoint.status().ToString();
    EXPECT_EQ(endpoint->base, c.base) << c.url;
    EXPECT_EQ(endpoint->path, c.path) << c.url;
    EXPECT_EQ(endpoint->tls, c.tls) << c.url;
  }
}

TEST(ParseOtlpEndpoint, RefusesOtherSchemesAndMalformedUrls) {
  struct Case {
    std::string url, mentions;  // what the message must name
  };
  const std::vector<Case> cases = {
      {"", "http://"},
      {"localhost:4318", "http://"},
      {"grpc://localhost:4317", "http://"},
      {"ftp://localhost/v1/traces", "http://"},
      {"http:/localhost:4318", "http://"},
      {"http://", "host"},
      {"http://:4318/v1/traces", "host"},
      {"http:///v1/traces", "host"},
      {"http://local%host", "host"},
      {"http://localhost:", "port"},
      {"http://localhost:0", "port"},
      {"http://localhost:65536", "port"},
      {"http://localhost:99999999999", "port"},
      {"http://localhost:-1", "port"},
      {"http://localhost:43a8", "port"},
      {"http://local host:4318", "spaces"},
      {"http://localhost:4318/v1/ traces", "spaces"},
      {" http://localhost:4318", "http://"},
      {"http://localhost:4318/v1/traces\n", "spaces"},
      {"http://user:secret@localhost:4318", "user info"},
      {"http://localhost:4318/v1/traces#frag", "fragment"},
      {"http://[::1:4318", "IPv6"},
      {"http://[]:4318", "IPv6"},
      {"http://[::1]x:4318", "IPv6"},
  };
  for (const Case& c : cases) {
    StatusOr<OtlpEndpoint> endpoint = ParseOtlpEndpoint(c.url);
    ASSERT_FALSE(endpoint.ok()) << "'" << c.url << "' was accepted";
    EXPECT_EQ(endpoint.status().code(), StatusCode::kInvalidArgument) << c.url;
    EXPECT_NE(endpoint.status().message().find(c.mentions), std::string::npos)
        << c.url << ": " << endpoint.status().message();
  }
  // The message never repeats a password from the URL.
  EXPECT_EQ(ParseOtlpEndpoint("http://user:secret@localhost").status().message().find("secret"),
            std::string::npos);
}

TEST(ParseOtlpHeaders, ReadsKeyValueLists) {
  using Headers = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(ParseOtlpHeaders("").value(), Headers{});
  EXPECT_EQ(ParseOtlpHeaders("  ").value(), Headers{});
  EXPECT_EQ(ParseOtlpHeaders("api-key=abc").value(), (Headers{{"api-key", "abc"}}));
  EXPECT_EQ(ParseOtlpHeaders(" api-key = abc , x-tenant=t1 ").value(),
            (Headers{{"api-key", "abc"}, {"x-tenant", "t1"}}));
  EXPECT_EQ(ParseOtlpHeaders("a=1,,b=2,").value(), (Headers{{"a", "1"}, {"b", "2"}}));
  EXPECT_EQ(ParseOtlpHeaders("authorization=Bearer%20abc%3D%3d").value(),
            (Headers{{"authorization", "Bearer abc=="}}));
  EXPECT_EQ(ParseOtlpHeaders("k=v=w").value(), (Headers{{"k", "v=w"}}));
  EXPECT_EQ(ParseOtlpHeaders("k=").value(), (Headers{{"k", ""}}));
}

TEST(ParseOtlpHeaders, RefusesMalformedItemsWithoutShowingValues) {
  const std::vector<std::string> bad = {
      "novalue",        "a=1,secret",   "=secret",
      "bad key=secret", "k\x01=secret", "k=secret%zz",
      "k=secret%4",     "k=secret%",    "k=secret%0D%0AX-Injected: 1",
      "k=sec\nret",     "a(b)=secret",
  };
  for (const std::string& text : bad) {
    StatusOr<std::vector<std::pair<std::string, std::string>>> headers = ParseOtlpHeaders(text);
    ASSERT_FALSE(headers.ok()) << "'" << text << "' was accepted";
    EXPECT_EQ(headers.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(headers.status().message().find("OTLP header"), std::string::npos);
    EXPECT_EQ(headers.status().message().find("secret"), std::string::npos)
        << headers.status().message();
  }
  EXPECT_NE(ParseOtlpHeaders("a=1,b").status().message().find("header 2"), std::string::npos);
}

TEST(OtlpHttpExporter, CreateRefusesBadOptions) {
  OtlpOptions options;
  options.endpoint = "grpc://localhost:4317";
  EXPECT_EQ(OtlpHttpExporter::Create(options).status().code(), StatusCode::kInvalidArgument);
  options.endpoint = "http://localhost:4318";
  options.headers = {{"x-key", "a\r\nb"}};
  EXPECT_EQ(OtlpHttpExporter::Create(options).status().code(), StatusCode::kInvalidArgument);
  options.headers = {{"bad key", "v"}};
  EXPECT_EQ(OtlpHttpExporter::Create(options).status().code(), StatusCode::kInvalidArgument);
  options.headers = {};
  options.max_batch_spans = 0;
  EXPECT_EQ(OtlpHttpExporter::Create(options).status().code(), StatusCode::kInvalidArgument);
  options.max_batch_spans = 1;
  options.max_queue_spans = 0;
  EXPECT_EQ(OtlpHttpExporter::Create(options).status().code(), StatusCode::kInvalidArgument);
  options.max_queue_spans = 1;
  options.flush_interval = milliseconds(-1);
  EXPECT_EQ(OtlpHttpExporter::Create(options).status().code(), StatusCode::kInvalidArgument);
  options.flush_interval = milliseconds::max();
  EXPECT_EQ(OtlpHttpExporter::Create(options).status().code(), StatusCode::kInvalidArgument);
  options.flush_interval = milliseconds(500);
  options.timeout = milliseconds(0);
  EXPECT_EQ(OtlpHttpExporter::Create(options).status().code(), StatusCode::kInvalidArgument);
  options.timeout = milliseconds(3000);
  EXPECT_TRUE(OtlpHttpExporter::Create(options).ok());  // nothing is sent, so nothing fails
}

TEST(OtlpHttpExporter, SpansArriveWithTheConfiguredHeadersAndContentType) {
  Collector collector;
  Fates fates;
  OtlpOptions options;
  options.endpoint = collector.url();
  options.headers = {{"x-api-key", "s3cret"}};
  options.resource = {{"service.name", std::string("strata-test")}};
  options.scope_version = "9.9";
  options.flush_interval = milliseconds(20);
  options.on_spans = fates.Callback();
  std::unique_ptr<OtlpHttpExporter> exporter = MustCreate(options);
  ASSERT_NE(exporter, nullptr);

  const std::vector<Span> trace = MakeTrace(3, "request");
  exporter->Emit(trace);
  ASSERT_TRUE(WaitFor([&] { return fates.exported.load() == 3; })) << fates.exported.load();
  EXPECT_EQ(fates.dropped.load(), 0);
  EXPECT_EQ(fates.failed.load(), 0);
  EXPECT_EQ(fates.unknown.load(), 0);

  const std::vector<Collector::Received> received = collector.received();
  ASSERT_FALSE(received.empty());
  for (const Collector::Received& r : received) {
    EXPECT_TRUE(r.parsed);
    EXPECT_EQ(r.content_type, "application/x-protobuf");
    EXPECT_EQ(r.api_key, "s3cret");
    ASSERT_EQ(r.request.resource_spans_size(), 1);
    const pb::ResourceSpans& rs = r.request.resource_spans(0);
    ASSERT_EQ(rs.resource().attributes_size(), 1);
    EXPECT_EQ(rs.resource().attributes(0).key(), "service.name");
    EXPECT_EQ(rs.resource().attributes(0).value().string_value(), "strata-test");
    ASSERT_EQ(rs.scope_spans_size(), 1);
    EXPECT_EQ(rs.scope_spans(0).scope().name(), "strata");
    EXPECT_EQ(rs.scope_spans(0).scope().version(), "9.9");
  }
  const std::vector<pb::Span> spans = collector.all_spans();
  ASSERT_EQ(spans.size(), 3u);
  for (size_t i = 0; i < spans.size(); ++i) {
    EXPECT_EQ(spans[i].name(), trace[i].name);
    EXPECT_EQ(spans[i].trace_id(),
              std::string(reinterpret_cast<const char*>(trace[i].trace_id.data()), 16));
    EXPECT_EQ(spans[i].parent_span_id().empty(), i == 0);
    EXPECT_EQ(spans[i].kind(), i == 0 ? pb::Span::SPAN_KIND_SERVER : pb::Span::SPAN_KIND_INTERNAL);
  }
}

TEST(OtlpHttpExporter, BatchesHoldAtMostMaxBatchSpans) {
  Collector collector;
  Fates fates;
  OtlpOptions options;
  options.endpoint = collector.url();
  options.max_batch_spans = 4;
  options.flush_interval = std::chrono::hours(1);  // only full batches go before Shutdown
  options.on_spans = fates.Callback();
  std::unique_ptr<OtlpHttpExporter> exporter = MustCreate(options);
  ASSERT_NE(exporter, nullptr);

  exporter->Emit(MakeTrace(7, "a"));
  exporter->Emit(MakeTrace(3, "b"));
  // Ten queued: two full batches go at once, the last two wait for the flush interval.
  ASSERT_TRUE(WaitFor([&] { return collector.spans() == 8; })) << collector.spans();
  exporter->Shutdown(std::chrono::seconds(10));
  EXPECT_EQ(collector.spans(), 10u);
  EXPECT_EQ(fates.exported.load(), 10);
  EXPECT_EQ(fates.dropped.load(), 0);
  const std::vector<Collector::Received> received = collector.received();
  EXPECT_EQ(received.size(), 3u);
  for (const Collector::Received& r : received) {
    EXPECT_LE(r.request.resource_spans(0).scope_spans(0).spans_size(), 4);
  }
  // Every span arrives exactly once.
  std::set<std::string> names;
  for (const pb::Span& span : collector.all_spans()) names.insert(span.name());
  EXPECT_EQ(names.size(), 10u);
}

TEST(OtlpHttpExporter, ShutdownFlushesWhatIsQueued) {
  Collector collector;
  Fates fates;
  OtlpOptions options = OptionsFor(collector.url(), std::chrono::hours(1), &fates);
  std::unique_ptr<OtlpHttpExporter> exporter = MustCreate(options);
  ASSERT_NE(exporter, nullptr);

  exporter->Emit(MakeTrace(2, "x"));
  exporter->Emit(MakeTrace(1, "y"));
  exporter->Shutdown(std::chrono::seconds(10));
  EXPECT_EQ(collector.spans(), 3u);
  EXPECT_EQ(fates.exported.load(), 3);
  // Idempotent, and Emit afterwards drops.
  exporter->Shutdown(std::chrono::seconds(10));
  exporter->Emit(MakeTrace(2, "late"));
  EXPECT_EQ(fates.dropped.load(), 2);
  EXPECT_EQ(collector.spans(), 3u);
}

TEST(OtlpHttpExporter, AFullQueueDropsWholeTraces) {
  Collector collector;
  Fates fates;
  OtlpOptions options;
  options.endpoint = collector.url();
  options.max_queue_spans = 5;
  options.max_batch_spans = 100;
  options.flush_interval = std::chrono::hours(1);  // nothing leaves the queue before Shutdown
  options.on_spans = fates.Callback();
  std::unique_ptr<OtlpHttpExporter> exporter = MustCreate(options);
  ASSERT_NE(exporter, nullptr);

  exporter->Emit(MakeTrace(3, "kept1"));     // 3 queued
  exporter->Emit(MakeTrace(3, "dropped1"));  // 6 > 5: all three dropped
  EXPECT_EQ(fates.dropped.load(), 3);
  exporter->Emit(MakeTrace(2, "kept2"));  // exactly full
  exporter->Emit(MakeTrace(1, "dropped2"));
  EXPECT_EQ(fates.dropped.load(), 4);
  exporter->Emit(MakeTrace(6, "toobig"));  // larger than the whole queue
  EXPECT_EQ(fates.dropped.load(), 10);

  exporter->Shutdown(std::chrono::seconds(10));
  EXPECT_EQ(fates.exported.load(), 5);
  EXPECT_EQ(fates.dropped.load(), 10);
  std::set<std::string> names;
  for (const pb::Span& span : collector.all_spans()) names.insert(span.name());
  EXPECT_EQ(names, (std::set<std::string>{"kept1.0", "kept1.1", "kept1.2", "kept2.0", "kept2.1"}));
}

TEST(OtlpHttpExporter, AServerErrorCountsFailed) {
  Collector collector(500);
  Fates fates;
  OtlpOptions options = OptionsFor(collector.url(), milliseconds(10), &fates);
  std::unique_ptr<OtlpHttpExporter> exporter = MustCreate(options);
  ASSERT_NE(exporter, nullptr);

  exporter->Emit(MakeTrace(2, "t"));
  ASSERT_TRUE(WaitFor([&] { return fates.failed.load() == 2; })) << fates.failed.load();
  exporter->Emit(MakeTrace(3, "u"));  // no retries: the next batch is new spans only
  ASSERT_TRUE(WaitFor([&] { return fates.failed.load() == 5; })) << fates.failed.load();
  exporter->Shutdown(std::chrono::seconds(10));
  EXPECT_EQ(fates.exported.load(), 0);
  EXPECT_EQ(fates.failed.load(), 5);
  EXPECT_EQ(collector.spans(), 5u);
}

TEST(OtlpHttpExporter, AnEndpointNobodyListensOnCountsFailed) {
  Fates fates;
  OtlpOptions options;
  options.endpoint = "http://127.0.0.1:" + std::to_string(UnusedPort());
  options.flush_interval = milliseconds(10);
  options.timeout = milliseconds(2000);
  options.on_spans = fates.Callback();
  std::unique_ptr<OtlpHttpExporter> exporter = MustCreate(options);
  ASSERT_NE(exporter, nullptr);

  exporter->Emit(MakeTrace(4, "t"));
  ASSERT_TRUE(WaitFor([&] { return fates.failed.load() == 4; })) << fates.failed.load();
  EXPECT_EQ(fates.exported.load(), 0);
}

TEST(OtlpHttpExporter, APartialSuccessCountsTheRejectedSpansFailed) {
  pb::ExportTraceServiceResponse answer;
  answer.mutable_partial_success()->set_rejected_spans(1);
  answer.mutable_partial_success()->set_error_message("span too large");
  Collector collector(200, answer.SerializeAsString());
  Fates fates;
  OtlpOptions options = OptionsFor(collector.url(), std::chrono::hours(1), &fates);
  std::unique_ptr<OtlpHttpExporter> exporter = MustCreate(options);
  ASSERT_NE(exporter, nullptr);

  exporter->Emit(MakeTrace(3, "t"));
  exporter->Shutdown(std::chrono::seconds(10));
  EXPECT_EQ(fates.exported.load(), 2);
  EXPECT_EQ(fates.failed.load(), 1);
}

TEST(OtlpHttpExporter, ShutdownCutsShortAPostStillInFlightAfterTheGrace) {
  // Declared before the collector, so its handler threads end before this goes.
  struct Gate {
    std::mutex mutex;
    std::condition_variable cv;
    bool released = false;
    std::atomic<bool> answering{false};
    std::atomic<bool> gave_up{false};
  } gate;
  Collector collector;
  // The collector holds its answer until the test releases it (or 20 s pass, so a broken
  // exporter fails this test instead of hanging it).
  collector.before_answer = [&gate] {
    gate.answering = true;
    std::unique_lock<std::mutex> lock(gate.mutex);
    if (!gate.cv.wait_for(lock, std::chrono::seconds(20), [&gate] { return gate.released; })) {
      gate.gave_up = true;
    }
  };
  Fates fates;
  OtlpOptions options;
  options.endpoint = collector.url();
  options.flush_interval = milliseconds(0);
  options.timeout = std::chrono::seconds(60);
  options.on_spans = fates.Callback();
  std::unique_ptr<OtlpHttpExporter> exporter = MustCreate(options);
  ASSERT_NE(exporter, nullptr);

  exporter->Emit(MakeTrace(2, "stuck"));
  ASSERT_TRUE(WaitFor([&gate] { return gate.answering.load(); }));
  exporter->Emit(MakeTrace(3, "queued"));
  exporter->Shutdown(milliseconds(100));
  // Shutdown returned while the collector still held the POST.
  EXPECT_FALSE(gate.gave_up.load());
  {
    std::lock_guard<std::mutex> lock(gate.mutex);
    gate.released = true;
  }
  gate.cv.notify_all();
  EXPECT_EQ(fates.failed.load(), 2);   // the POST cut short
  EXPECT_EQ(fates.dropped.load(), 3);  // never sent
  EXPECT_EQ(fates.exported.load(), 0);
}

}  // namespace
}  // namespace strata::trace
