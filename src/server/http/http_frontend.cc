#include "strata/server/http/http_frontend.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "admin_routes.h"
#include "batch_routes.h"
#include "strata/common/logging.h"
#include "strata/server/call_recorder.h"
#include "strata/server/http/openai_embeddings.h"
#include "strata/server/http/openai_request.h"
#include "strata/server/http/openai_response.h"

namespace strata::server::http {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(50);
constexpr int kListenBacklog = 4096;  // the kernel caps it at net.core.somaxconn

void Send(httplib::Response& res, int status, const std::string& json) {
  res.status = status;
  res.set_content(json, "application/json");
}

void SendError(httplib::Response& res, const ApiError& error) {
  if (error.http_status == 429) {
    res.set_header("Retry-After", std::to_string(error.retry_after_seconds));
  }
  if (error.http_status == 401) res.set_header("WWW-Authenticate", "Bearer");
  Send(res, error.http_status, ErrorBody(error));
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One streamed generation: cpp-httplib calls Provide on the connection's thread until the
// stream is done, then Release. A write that fails means the client left: the request is
// cancelled and its last chunk awaited (the next engine step), so the call is recorded and
// counted out exactly once.
class StreamCall {
 public:
  StreamCall(const CallEnv& env, std::shared_ptr<engine::RequestStream> stream, std::string id,
             CallTrace trace, Responder responder, Endpoint endpoint)
      : env_(env),
        stream_(std::move(stream)),
        trace_(std::move(trace)),
        recorder_(env.metrics, std::move(id), env.key, &trace_),
        responder_(std::move(responder)),
        endpoint_(endpoint) {}

  bool Provide(httplib::DataSink& sink) {
    if (finished_) {
      sink.done();
      return true;
    }
    engine::StreamChunk chunk;
    if (!stream_->Next(&chunk, kPollInterval)) {
      if (sink.is_writable()) return true;  // nothing new yet
      Abandon();
      return false;
    }
    recorder_.OnChunk(chunk);
    if (!chunk.finish_reason) {
      const std::string events = responder_.Events(chunk);
      if (!events.empty() && !sink.write(events.data(), events.size())) {
        Abandon();
        return false;
      }
      return true;
    }
    const Status status = recorder_.OnLast(chunk, CallRecorder::Cancel::kNone);
    Done();
    std::string events;
    if (status.ok()) {
      events = responder_.Events(chunk);
    } else {
      // The text that came with the failing chunk, then the error.
      chunk.finish_reason.reset();
      events =
          responder_.Events(chunk) + Responder::ErrorEvents(ApiErrorFromStatus(status, endpoint_));
    }
    if (!sink.write(events.data(), events.size())) return false;
    sink.done();
    return true;
  }

  // The connection is over, whichever way.
  void Release() { Abandon(); }

 private:
  void Abandon() {
    if (finished_) return;
    env_.engine->Cancel(stream_->id());
    engine::StreamChunk chunk;
    while (stream_->Next(&chunk)) {  // the last chunk comes at the next engine step
      recorder_.OnChunk(chunk);
      if (chunk.finish_reason) {
        (void)recorder_.OnLast(chunk, CallRecorder::Cancel::kClient);
        break;
      }
    }
    Done();
  }

  void Done() {
    finished_ = true;
    env_.in_flight->fetch_sub(1);
  }

  CallEnv env_;
  std::shared_ptr<engine::RequestStream> stream_;
  CallTrace trace_;  // before recorder_, which points to it
  CallRecorder recorder_;
  Responder responder_;
  Endpoint endpoint_;
  bool finished_ = false;
};

}  // namespace

namespace {

// HTTPS when there is an identity: each handshake presents its current certificate.
std::unique_ptr<httplib::Server> MakeServer(const std::shared_ptr<TlsIdentity>& tls) {
  if (tls == nullptr) return std::make_unique<httplib::Server>();
  return std::make_unique<httplib::SSLServer>([tls](SSL_CTX& ctx) {
    tls->InstallOn(&ctx);
    return true;
  });
}

}  // namespace

struct HttpFrontend::Impl {
  ServingState* state;
  HttpOptions options;
  std::unique_ptr<httplib::Server> server_owner;
  httplib::Server& server;
  std::thread thread;
  int port = 0;
  int64_t started = UnixSeconds();
  std::atomic<bool> running{false};
  BatchRoutes batches{http::BatchApi(nullptr, nullptr)};

  Impl(ServingState* s, HttpOptions o)
      : state(s),
        options(std::move(o)),
        server_owner(MakeServer(options.tls)),
        server(*server_owner) {}

  // Counts a refused call by its code and answers it.
  void Refuse(httplib::Response& res, const Status& status, Endpoint endpoint) {
    state->metrics()->CountError(StatusCodeName(status.code()));
    SendError(res, ApiErrorFromStatus(status, endpoint));
  }

  // Admits a call by its Authorization header (api_keys.h); a refused one is answered (401, or
  // 429 with Retry-After) and counted. Without keys every call is admitted, without a lease.
  bool Admit(const httplib::Request& req, httplib::Response& res, bool generation,
             Endpoint endpoint, std::shared_ptr<ApiKeyLease>* lease = nullptr) {
    if (options.api_keys == nullptr) return true;
    KeyAdmission admitted =
        options.api_keys->Admit(req.get_header_value("Authorization"), generation);
    if (admitted.status.ok()) {
      if (lease != nullptr) *lease = std::move(admitted.lease);
      return true;
    }
    state->metrics()->CountError(StatusCodeName(admitted.status.code()));
    ApiError e = ApiErrorFromStatus(admitted.status, endpoint);
    if (e.http_status == 429) {
      e.code = "rate_limit_exceeded";
      e.retry_after_seconds = admitted.retry_after_seconds;
    }
    SendError(res, e);
    return false;
  }

  // OK when `name` names the served model (its id or the GGUF's general.name), else NOT_FOUND.
  Status KnownModel(const std::string& name, const ServingModel& model) const {
    if (name == options.model_id || name == model.info.name()) return OkStatus();
    return NotFoundError("the model '" + name + "' does not exist; this server serves '" +
                         options.model_id + "'");
  }

  void Health(httplib::Response& res) {
    const StatusOr<ServingModel*> serving = state->Serving();
    if (serving.ok()) {
      Send(res, 200, R"({"status":"serving"})");
    } else {
      Send(res, 503, state->draining() ? R"({"status":"draining"})" : R"({"status":"loading"})");
    }
  }

  void Models(const httplib::Request& req, httplib::Response& res) {
    if (!Admit(req, res, /*generation=*/false, Endpoint::kCompletions)) return;
    const StatusOr<ServingModel*> serving = state->Serving();
    if (!serving.ok()) return Refuse(res, serving.status(), Endpoint::kCompletions);
    const int64_t context = (*serving)->info.context_length();
    if (req.matches.size() > 1) {
      const std::string id = req.matches[1];
      if (Status known = KnownModel(id, **serving); !known.ok()) {
        return Refuse(res, known, Endpoint::kCompletions);
      }
      return Send(res, 200, ModelBody(options.model_id, started, context));
    }
    Send(res, 200, ModelsBody(options.model_id, started, context));
  }

  void Generate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
    std::shared_ptr<ApiKeyLease> key;
    if (!Admit(req, res, /*generation=*/true, endpoint, &key)) return;
    const bool chat = endpoint == Endpoint::kChatCompletions;
    const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
    CallTrace trace(req.get_header_value("traceparent"), "POST " + path, state->spans());
    trace.SetAttribute("http.request.method", std::string("POST"));
    trace.SetAttribute("url.path", path);
    res.set_header("X-Trace-Id", trace.trace_id());
    const auto refuse = [&](const Status& status) {
      trace.End(status);
      Refuse(res, status, endpoint);
    };
    OpenAiRequest parsed;
    ApiError bad;
    if (!ParseOpenAiRequest(endpoint, req.body, chat ? 0 : options.completions_max_tokens, &parsed,
                            &bad)) {
      state->metrics()->CountError(StatusCodeName(StatusCode::kInvalidArgument));
      trace.End(InvalidArgumentError(bad.message));
      return SendError(res, bad);
    }
    StatusOr<ServingModel*> serving = state->Serving();
    if (!serving.ok()) return refuse(serving.status());
    ServingModel& model = **serving;
    if (Status known = KnownModel(parsed.model, model); !known.ok()) return refuse(known);
    if (parsed.input.request_id.empty() && req.has_header("X-Request-Id")) {
      parsed.input.request_id = req.get_header_value("X-Request-Id");
    }
    StatusOr<TranslatedRequest> translated = state->TranslateWaiting(model, parsed.input);
    trace.Translated();
    if (!translated.ok()) return refuse(translated.status());
    const CallEnv env = state->EnvFor(model, std::move(key));
    const std::string client_id = translated->request_id;
    translated->request.record_stages = trace.recording();
    trace.Submitting(translated->request.cache.cacheable);
    StatusOr<std::shared_ptr<engine::RequestStream>> submitted =
        env.engine->Submit(std::move(translated->request));
    trace.Submitted();
    if (!submitted.ok()) return refuse(submitted.status());
    std::shared_ptr<engine::RequestStream> stream = std::move(*submitted);
    env.in_flight->fetch_add(1);

    ResponseContext ctx;
    ctx.endpoint = endpoint;
    ctx.id = client_id.empty()
                 ? std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(stream->id())
                 : client_id;
    ctx.created = UnixSeconds();
    ctx.model = options.model_id;
    ctx.logprobs = parsed.logprobs;
    ctx.top_logprobs = parsed.top_logprobs;
    ctx.include_usage = parsed.include_usage;
    ctx.tools = parsed.tools.active();
    ctx.tokenizer = model.tokenizer.get();
    res.set_header("X-Request-Id", ctx.id);
    Responder responder(ctx);

    if (parsed.stream) {
      auto call = std::make_shared<StreamCall>(env, std::move(stream), ctx.id, std::move(trace),
                                               std::move(responder), endpoint);
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [call](size_t /*offset*/, httplib::DataSink& sink) { return call->Provide(sink); },
          [call](bool /*success*/) { call->Release(); });
      return;
    }

    CallRecorder recorder(env.metrics, ctx.id, env.key, &trace);
    engine::StreamChunk chunk;
    while (stream->Next(&chunk)) {
      recorder.OnChunk(chunk);
      responder.Add(chunk);
      if (!chunk.finish_reason) continue;
      const Status status = recorder.OnLast(chunk, CallRecorder::Cancel::kNone);
      env.in_flight->fetch_sub(1);
      if (!status.ok()) return SendError(res, ApiErrorFromStatus(status, endpoint));
      return Send(res, 200, responder.Body(chunk));
    }
    env.in_flight->fetch_sub(1);  // not reached: every stream ends with a last chunk
    SendError(res,
              ApiErrorFromStatus(InternalError("the request ended without a result"), endpoint));
  }

  // The Files and Batches routes, behind API keys like the others.
  void BatchRoutesOn() {
    batches = BatchRoutes{http::BatchApi(options.jobs, options.batch_runner)};
    using Handler = void (BatchRoutes::*)(const std::string&, const httplib::Request&,
                                          httplib::Response&) const;
    using IdHandler =
        void (BatchRoutes::*)(const std::string&, const std::string&, httplib::Response&) const;
    // The caller's key name owns what it creates and is all it sees ("" without keys).
    const auto with_request = [this](Handler handler) {
      return [this, handler](const httplib::Request& req, httplib::Response& res) {
        std::shared_ptr<ApiKeyLease> key;
        if (!Admit(req, res, /*generation=*/false, Endpoint::kCompletions, &key)) return;
        (batches.*handler)(key ? key->key_name() : std::string(), req, res);
      };
    };
    const auto with_id = [this](IdHandler handler) {
      return [this, handler](const httplib::Request& req, httplib::Response& res) {
        std::shared_ptr<ApiKeyLease> key;
        if (!Admit(req, res, /*generation=*/false, Endpoint::kCompletions, &key)) return;
        (batches.*handler)(key ? key->key_name() : std::string(), req.matches[1].str(), res);
      };
    };
    server.Post("/v1/files", with_request(&BatchRoutes::CreateFile));
    server.Get("/v1/files", with_request(&BatchRoutes::ListFiles));
    server.Get(R"(/v1/files/([^/]+)/content)", with_id(&BatchRoutes::FileContent));
    server.Get(R"(/v1/files/([^/]+))", with_id(&BatchRoutes::GetFile));
    server.Delete(R"(/v1/files/([^/]+))", with_id(&BatchRoutes::DeleteFile));
    server.Post("/v1/batches", with_request(&BatchRoutes::CreateBatch));
    server.Get("/v1/batches", with_request(&BatchRoutes::ListBatches));
    server.Get(R"(/v1/batches/([^/]+))", with_id(&BatchRoutes::GetBatch));
    server.Post(R"(/v1/batches/([^/]+)/cancel)", with_id(&BatchRoutes::CancelBatch));
  }

  void Routes() {
    server.Get("/health", [this](const httplib::Request&, httplib::Response& res) { Health(res); });
    server.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
      if (!Admit(req, res, /*generation=*/false, Endpoint::kCompletions)) return;
      if (!options.metrics_text) {
        res.status = 404;
        return;
      }
      res.set_content(options.metrics_text(), "text/plain; version=0.0.4; charset=utf-8");
    });
    server.Get("/v1/models",
               [this](const httplib::Request& req, httplib::Response& res) { Models(req, res); });
    server.Get(R"(/v1/models/(.+))",
               [this](const httplib::Request& req, httplib::Response& res) { Models(req, res); });
    server.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      Generate(Endpoint::kCompletions, req, res);
    });
    server.Post("/v1/chat/completions",
                [this](const httplib::Request& req, httplib::Response& res) {
                  Generate(Endpoint::kChatCompletions, req, res);
                });
    server.Post("/v1/embeddings", [this](const httplib::Request& req, httplib::Response& res) {
      if (!Admit(req, res, /*generation=*/false, Endpoint::kCompletions)) return;
      const StatusOr<ServingModel*> serving = state->Serving();
      const EmbeddingsReply reply =
          AnswerEmbeddings(req.body, options.embeddings, serving.status(), state->metrics());
      if (reply.http_status == 429) res.set_header("Retry-After", "1");
      Send(res, reply.http_status, reply.body);
    });
    if (options.cache_admin != nullptr) {
      CacheAdmin* admin = options.cache_admin;
      server.Post("/admin/cache/invalidate",
                  [admin](const httplib::Request& req, httplib::Response& res) {
                    AdminInvalidate(admin, req, res);
                  });
      server.Post("/admin/cache/epoch",
                  [admin](const httplib::Request& req, httplib::Response& res) {
                    AdminBumpEpoch(admin, req, res);
                  });
    }
    if (options.jobs != nullptr && options.batch_runner != nullptr) BatchRoutesOn();
    // Routes that do not exist, bodies over the limit, methods not served: OpenAI's shape.
    server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      ApiError e;
      e.http_status = res.status;
      if (res.status == 404) {
        e.type = "not_found_error";
        e.message = "no route " + req.method + " " + req.path;
      } else if (res.status == 413) {
        e.message = "the request body is too large";
      } else {
        e.message = "HTTP " + std::to_string(res.status);
      }
      SendError(res, e);
    });
    server.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
          ApiError e;
          e.http_status = 500;
          e.type = "server_error";
          e.message = "internal error";
          try {
            if (ep) std::rethrow_exception(ep);
          } catch (const std::exception& ex) {
            e.message = std::string("internal error: ") + ex.what();
          } catch (...) {
          }
          SendError(res, e);
        });
  }
};

namespace {

// cpp-httplib's thread pool behind a ConnectionGate. The server hands every accepted connection
// to enqueue() (which serves and then closes it), so enqueue() taking a place, waiting while the
// port is full, stops the accept loop the way a limited listener does, and the job gives the
// place back once the connection is closed.
class GatedTaskQueue : public httplib::TaskQueue {
 public:
  GatedTaskQueue(int threads, ConnectionGate* gate) : pool_(threads), gate_(gate) {}
  void enqueue(std::function<void()> fn) override {
    gate_->Acquire();
    pool_.enqueue([fn = std::move(fn), gate = gate_] {
      fn();
      gate->Release();
    });
  }
  void shutdown() override { pool_.shutdown(); }

 private:
  httplib::ThreadPool pool_;
  ConnectionGate* gate_;
};

}  // namespace

HttpFrontend::HttpFrontend(ServingState* state, HttpOptions options)
    : impl_(std::make_unique<Impl>(state, std::move(options))) {}

HttpFrontend::~HttpFrontend() { Stop(); }

Status HttpFrontend::Start() {
  Impl& m = *impl_;
  const int threads = std::max(1, m.options.threads);
  ConnectionGate* gate = m.options.connections;
  m.server.new_task_queue = [threads, gate]() -> httplib::TaskQueue* {
    if (gate == nullptr) return new httplib::ThreadPool(threads);
    return new GatedTaskQueue(threads, gate);
  };
  m.server.set_payload_max_length(m.options.max_body_bytes);
  if (!m.server.is_valid()) return InternalError("cannot set up TLS for the HTTP API");
  // The listening socket, as cpp-httplib creates it (the last one it tries is the one bound).
  int listen_fd = -1;
  m.server.set_socket_options([&listen_fd](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd = static_cast<int>(sock);
  });
  m.Routes();
  if (m.options.port == 0) {
    m.port = m.server.bind_to_any_port(m.options.host);
  } else {
    m.port = m.server.bind_to_port(m.options.host, m.options.port) ? m.options.port : -1;
  }
  if (m.port <= 0) {
    return UnavailableError("cannot listen for HTTP on " + m.options.host + ":" +
                            std::to_string(m.options.port) + " (is the port taken?)");
  }
  // cpp-httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into the
  // library): 64 clients connecting at once overflow the accept queue, and their connections
  // stall for SYN retransmits or fail. A second listen() on the socket sets a new backlog.
  if (listen_fd < 0 || ::listen(listen_fd, kListenBacklog) != 0) {
    return UnavailableError("cannot set the HTTP listen backlog");
  }
  m.running.store(true);
  m.thread = std::thread([&m] { m.server.listen_after_bind(); });
  return OkStatus();
}

int HttpFrontend::port() const { return impl_->port; }

void HttpFrontend::Stop() {
  Impl& m = *impl_;
  if (!m.running.exchange(false)) return;
  // An accept loop waiting for a place must see the stop.
  if (m.options.connections != nullptr) m.options.connections->Shut();
  m.server.stop();
  if (m.thread.joinable()) m.thread.join();
}

}  // namespace strata::server::http
