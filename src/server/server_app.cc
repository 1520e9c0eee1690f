#include "strata/server/server_app.h"

#include <CivetServer.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "strata/cache/response_key.h"
#include "strata/common/heap_tuning.h"
#include "strata/common/logging.h"
#include "strata/embedding/embedding_batcher.h"
#include "strata/metrics/server_metrics.h"
#include "strata/server/api_keys.h"
#include "strata/server/cache_admin.h"
#include "strata/server/cache_admin_service.h"
#include "strata/server/connection_gate.h"
#include "strata/server/embedding_service.h"
#include "strata/server/generation_service.h"
#include "strata/server/grpc_listener.h"
#include "strata/server/http/batch_api.h"
#include "strata/server/http/batch_runner.h"
#include "strata/server/http/http_frontend.h"
#include "strata/server/jobs_service.h"
#include "strata/server/request_parse.h"
#include "strata/server/response_cache_setup.h"
#include "strata/server/serving_model.h"
#include "strata/server/tls_identity.h"
#include "strata/trace/otlp_http_exporter.h"

#ifndef STRATA_VERSION
#define STRATA_VERSION "0.0.0"
#endif
#ifndef STRATA_COMMIT
#define STRATA_COMMIT "unknown"
#endif

namespace strata::server {
namespace {

// Leaves gRPC server reflection out of a server: linking the reflection library registers its
// plugin for every ServerBuilder, so turning it off means removing the plugin.
class WithoutReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    std::erase_if(*plugins, [](const std::unique_ptr<grpc::ServerBuilderPlugin>& plugin) {
      return dynamic_cast<grpc::reflection::ProtoServerReflectionPlugin*>(plugin.get()) != nullptr;
    });
  }
};

using Clock = std::chrono::steady_clock;

constexpr char kServiceName[] = "strata.v1.Generation";
constexpr char kEmbeddingServiceName[] = "strata.v1.Embedding";
// Room for a request's other fields next to a prompt of --max-message-bytes.
constexpr int64_t kMessageSlack = 64 << 10;
// /metrics: connections served at once, how many more may wait for a worker (past them, new
// connections wait in the listen backlog), and how long one may take to send its request.
constexpr int kMetricsThreads = 8;
constexpr int kMetricsConnectionQueue = 32;
constexpr int kMetricsRequestTimeoutMs = 5000;
// gRPC: a connection must finish its handshake (up to the client's HTTP/2 SETTINGS) within this.
constexpr int kGrpcHandshakeTimeoutMs = 10000;

// SIGTERM and SIGINT drain; SIGHUP reloads the TLS files and the API keys file.
sigset_t HandledSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

// gRPC's credentials: plaintext, or TLS from files it watches itself (checked every
// refresh_seconds, so a renewed certificate is used by new connections without a restart).
std::shared_ptr<grpc::ServerCredentials> GrpcCredentials(const ServerConfig& config) {
  if (config.tls_cert_file.empty()) return grpc::InsecureServerCredentials();
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      config.tls_key_file, config.tls_cert_file, config.tls_client_ca_file,
      static_cast<unsigned int>(config.tls_refresh_seconds));
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (!config.tls_client_ca_file.empty()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

// Waits up to `timeout` for one of `set`; returns the signal or 0.
int WaitForSignal(const sigset_t& set, std::chrono::milliseconds timeout) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1000) * 1000000L;
  const int sig = sigtimedwait(&set, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

void SetHealth(grpc::Server* server, bool serving, bool embedding) {
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus(serving);
  health->SetServingStatus(kServiceName, serving);
  if (embedding) health->SetServingStatus(kEmbeddingServiceName, serving);
}

// The proposer's metrics label, "" without speculation.
std::string SpeculativeProposerName(const ServerConfig& config) {
  return config.speculative == "none" ? std::string() : config.speculative;
}

metrics::StepRecord ToStepRecord(const engine::EngineStats& s, const std::string& proposer) {
  metrics::StepRecord r;
  r.running = s.running;
  r.waiting = s.queued + s.waiting;
  r.batch_sequences = s.last_batch_sequences;
  r.batch_tokens = s.last_batch_tokens;
  r.kv_usage_ratio =
      s.kv.num_blocks > 0 ? static_cast<double>(s.kv.used_blocks) / s.kv.num_blocks : 0.0;
  r.kv_free_blocks = s.kv.free_blocks;
  r.kv_total_blocks = s.kv.num_blocks;
  r.preemptions_total = s.preemptions_total;
  r.prefix_queries_total = s.kv.prefix_queries;
  r.prefix_hits_total = s.kv.prefix_hits;
  r.busy_seconds_total = s.busy_seconds_total;
  r.proposer = proposer;
  r.speculative_verifications_total = s.speculative_verifications_total;
  r.speculative_proposed_total = s.speculative_proposed_tokens_total;
  r.speculative_accepted_total = s.speculative_accepted_tokens_total;
  r.speculative_accepted_lengths.assign(s.speculative_accepted_lengths.begin(),
                                        s.speculative_accepted_lengths.end());
  return r;
}

Status WritePortFile(const std::string& path, int grpc_port, int metrics_port, int http_port) {
  // Written whole under a temporary name, then renamed: a reader never sees half a file.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "{\"grpc_port\": " << grpc_port;
    if (metrics_port > 0) out << ", \"metrics_port\": " << metrics_port;
    if (http_port > 0) out << ", \"http_port\": " << http_port;
    out << "}\n";
    if (!out) return InternalError("cannot write the port file " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return InternalError("cannot rename " + tmp + " to " + path);
  }
  return OkStatus();
}

// The name the HTTP API serves the model under: --served-model-name, else the file's name
// without its directory and ".gguf".
std::string ServedModelName(const ServerConfig& config) {
  if (!config.served_model_name.empty()) return config.served_model_name;
  std::string name = config.model.substr(config.model.find_last_of('/') + 1);
  const std::string ext = ".gguf";
  if (name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0) {
    name.resize(name.size() - ext.size());
  }
  return name;
}

std::string HostPort(const std::string& host, int port) {
  // An IPv6 literal needs brackets.
  if (host.find(':') != std::string::npos && host.front() != '[') {
    return "[" + host + "]:" + std::to_string(port);
  }
  return host + ":" + std::to_string(port);
}

// civetweb's own messages (why a bind failed, a worker error) go to our log.
int LogCivetMessage(const mg_connection* /*connection*/, const char* message) {
  Log(LogLevel::kWarn, "metrics http server", {{"message", message}});
  return 1;
}

// A file's modification time and size: what tells that it changed.
struct FileStamp {
  std::filesystem::file_time_type mtime;
  uintmax_t size = 0;
  bool operator==(const FileStamp&) const = default;
};

std::optional<FileStamp> StampOf(const std::string& path) {
  std::error_code error;
  const std::filesystem::file_time_type mtime = std::filesystem::last_write_time(path, error);
  if (error) return std::nullopt;
  const uintmax_t size = std::filesystem::file_size(path, error);
  if (error) return std::nullopt;
  return FileStamp{mtime, size};
}

// Reads the keys file again into `keys`; a file that cannot be read or parsed leaves the keys
// as they were.
void ReloadApiKeys(ApiKeys* keys, const std::string& path, std::string_view why) {
  StatusOr<std::vector<ApiKeyEntry>> entries = ReadApiKeysFile(path);
  if (!entries.ok()) {
    Log(LogLevel::kWarn, "API keys reload failed; keeping the old keys",
        {{"reason", why}, {"error", entries.status().message()}});
    return;
  }
  const ApiKeys::ReloadResult r = keys->Reload(std::move(*entries));
  LogInfo("API keys reloaded", {{"reason", why},
                                {"keys", std::to_string(keys->size())},
                                {"added", std::to_string(r.added)},
                                {"changed", std::to_string(r.changed)},
                                {"removed", std::to_string(r.removed)}});
}

}  // namespace

int RunServer(const ServerConfig& config) {
  const sigset_t signals = HandledSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // inherited by every thread started below

  if (StatusOr<LogLevel> level = ParseLogLevel(config.log_level); level.ok()) SetLogLevel(*level);
  if (StatusOr<LogFormat> format = ParseLogFormat(config.log_format); format.ok()) {
    SetLogFormat(*format);
  }
  RouteLibraryLogs();
  // Before any thread starts: large blocks (request messages) stay mmapped and go back to the
  // system when freed, instead of being kept free in the arenas (common/heap_tuning.h).
  Log(LogLevel::kDebug, "heap", {{"mmap_threshold", FixMmapThreshold()}});

  // The backend kind is settled before any port is bound: `--backend cuda` on a machine that
  // cannot run it is one clear line and exit 1, not a server that never becomes ready.
  StatusOr<backend::BackendKind> kind = backend::ParseBackendKind(config.backend);
  if (kind.ok()) kind = backend::ResolveBackendKind(*kind);
  if (!kind.ok()) {
    Log(LogLevel::kError, "cannot use the backend", {{"error", kind.status().message()}});
    return 1;
  }

  metrics::BuildInfo build;
  build.version = STRATA_VERSION;
  build.commit = STRATA_COMMIT;
  build.backend = std::string(backend::BackendKindName(*kind));
  build.model = config.model.substr(config.model.find_last_of('/') + 1);
  metrics::ServerMetrics metrics(build);

  // /metrics first: operators see the server (and its loading state) at once. -1 turns the
  // plaintext port off: /metrics is then served only by the HTTP API (TLS and keys apply).
  std::unique_ptr<prometheus::Exposer> exposer;
  int metrics_port = -1;
  if (config.metrics_port >= 0) {
    try {
      static CivetCallbacks callbacks = [] {
        CivetCallbacks c{};
        c.log_message = LogCivetMessage;
        return c;
      }();
      // Each civetweb worker serves one connection at a time and waits up to request_timeout_ms
      // for its request: with the library's 2 workers and 30 s, two silent connections blocked
      // every scrape for 30 s. A scrape is one small GET; a client that has not sent it within
      // kMetricsRequestTimeoutMs is cut off.
      exposer = std::make_unique<prometheus::Exposer>(
          std::vector<std::string>{"listening_ports", HostPort(config.host, config.metrics_port),
                                   "num_threads", std::to_string(kMetricsThreads),
                                   "connection_queue", std::to_string(kMetricsConnectionQueue),
                                   "request_timeout_ms", std::to_string(kMetricsRequestTimeoutMs)},
          &callbacks);
    } catch (const std::exception& e) {
      Log(LogLevel::kError, "cannot serve metrics",
          {{"address", HostPort(config.host, config.metrics_port)}, {"error", e.what()}});
      return 1;
    }
    for (const std::weak_ptr<prometheus::Collectable>& c : metrics.collectables()) {
      exposer->RegisterCollectable(c);
    }
    const std::vector<int> metrics_ports = exposer->GetListeningPorts();
    metrics_port = metrics_ports.empty() ? config.metrics_port : metrics_ports.front();
  } else if (config.http_port < 0) {
    Log(LogLevel::kWarn, "no /metrics endpoint: the metrics port and the HTTP API are both off");
  }

  // The embedding model is small (tens of MB): loaded before any port is bound, so a bad folder
  // is one clear line and exit 1.
  std::unique_ptr<embedding::TextEmbedder> embedder;
  if (!config.embedding_model.empty()) {
    const Clock::time_point t = Clock::now();
    embedding::SentenceEncoderOptions encoder;
    encoder.num_threads = config.embedding_threads;
    embedding::EmbeddingBatcherOptions batching;
    batching.max_batch_texts = config.embedding_max_batch;
    batching.on_pass = [&metrics](const embedding::EmbeddingPass& pass) {
      metrics.ObserveEmbeddingPass(pass.texts);
    };
    StatusOr<std::unique_ptr<embedding::EmbeddingBatcher>> loaded =
        embedding::EmbeddingBatcher::Load(config.embedding_model, encoder, batching);
    if (!loaded.ok()) {
      Log(LogLevel::kError, "cannot load the embedding model",
          {{"embedding_model", config.embedding_model}, {"error", loaded.status().ToString()}});
      return 1;
    }
    embedder = std::move(*loaded);
    Log(LogLevel::kInfo, "embedding model loaded",
        {{"embedding_model", std::string(embedder->model_name())},
         {"dimension", std::to_string(embedder->dimension())},
         {"seconds", std::to_string(std::chrono::duration<double>(Clock::now() - t).count())}});
  }

  // Who may call (--api-keys-file); the keys outlive every call, so they come before the state.
  std::unique_ptr<ApiKeys> api_keys;
  std::optional<FileStamp> api_keys_stamp;  // what the keys were read from
  if (!config.api_keys_file.empty()) {
    api_keys_stamp = StampOf(config.api_keys_file);
    StatusOr<std::vector<ApiKeyEntry>> entries = ReadApiKeysFile(config.api_keys_file);
    if (!entries.ok()) {
      Log(LogLevel::kError, "cannot use the API keys file",
          {{"error", entries.status().message()}});
      return 1;
    }
    api_keys = std::make_unique<ApiKeys>(std::move(*entries), &metrics);
    LogInfo("API keys loaded", {{"keys", std::to_string(api_keys->size())}});
  }
  const bool reflection =
      config.grpc_reflection == "on" || (config.grpc_reflection == "auto" && api_keys == nullptr);

  // TLS: the files are checked here, so that a wrong one is one clear line and exit 1.
  std::shared_ptr<TlsIdentity> tls;
  if (!config.tls_cert_file.empty()) {
    StatusOr<std::shared_ptr<TlsIdentity>> loaded =
        TlsIdentity::Load({config.tls_cert_file, config.tls_key_file, config.tls_client_ca_file,
                           config.tls_refresh_seconds});
    if (!loaded.ok()) {
      Log(LogLevel::kError, "cannot use the TLS files", {{"error", loaded.status().message()}});
      return 1;
    }
    tls = std::move(*loaded);
    LogInfo("TLS on",
            {{"cert", config.tls_cert_file},
             {"client_certificates", config.tls_client_ca_file.empty() ? "no" : "required"}});
  }

  // Traces (--otlp-endpoint), exported in the background; the exporter outlives the calls.
  std::unique_ptr<trace::OtlpHttpExporter> traces;
  if (!config.otlp_endpoint.empty()) {
    trace::OtlpOptions o;
    o.endpoint = config.otlp_endpoint;
    o.headers = *trace::ParseOtlpHeaders(config.otlp_headers);  // LoadServerConfig checked it
    o.resource = {{"service.name", config.otlp_service_name},
                  {"service.version", std::string(STRATA_VERSION)},
                  {"strata.model", ServedModelName(config)}};
    o.scope_name = "strata";
    o.scope_version = STRATA_VERSION;
    o.max_queue_spans = static_cast<size_t>(config.otlp_max_queue_spans);
    o.on_spans = [&metrics](std::string_view result, int64_t spans) {
      metrics.CountTraceSpans(result, spans);
    };
    StatusOr<std::unique_ptr<trace::OtlpHttpExporter>> exporter =
        trace::OtlpHttpExporter::Create(std::move(o));
    if (!exporter.ok()) {
      Log(LogLevel::kError, "cannot export traces", {{"error", exporter.status().message()}});
      return 1;
    }
    traces = std::move(*exporter);
    LogInfo("exporting traces", {{"endpoint", config.otlp_endpoint}});
  }

  ServingState state(&metrics, config.log_prompts, traces.get());
  ServiceOptions service_options;
  service_options.api_keys = api_keys.get();
  GenerationService service(&state, service_options);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  if (!reflection) builder.SetOption(std::make_unique<WithoutReflection>());
  // The gRPC port is bound here, not by gRPC, so that it holds at most --max-connections
  // (grpc_listener.h); the HTTP port's gate is its thread pool's queue (http_frontend.h).
  const auto gate_hooks = [&metrics](const std::string& port) {
    ConnectionGate::Hooks hooks;
    hooks.on_change = [&metrics, port](int64_t open) { metrics.SetConnections(port, open); };
    hooks.on_full = [&metrics, port] { metrics.CountConnectionsFull(port); };
    return hooks;
  };
  ConnectionGate grpc_connections(config.max_connections, gate_hooks("grpc"));
  ConnectionGate http_connections(config.max_connections, gate_hooks("http"));
  StatusOr<std::unique_ptr<GrpcListener>> bound = GrpcListener::Bind(config.host, config.grpc_port);
  if (!bound.ok()) {
    Log(LogLevel::kError, "cannot serve gRPC (is the port taken?)",
        {{"address", HostPort(config.host, config.grpc_port)},
         {"error", bound.status().message()}});
    return 1;
  }
  const int grpc_port = (*bound)->port();
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> grpc_acceptor =
      builder.experimental().AddExternalConnectionAcceptor(
          grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
          GrpcCredentials(config));
  std::unique_ptr<GrpcListener> grpc_listener = std::move(*bound);  // stops before the acceptor
  // The transport allows a little more than --max-message-bytes so that a prompt just past the
  // limit reaches the translator and gets INVALID_ARGUMENT naming the field; far larger
  // messages are cut off by gRPC itself (RESOURCE_EXHAUSTED) before they are read.
  // Half-open and idle connections do not stay forever; aged ones are asked to reconnect (to
  // another replica, behind a load balancer).
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, kGrpcHandshakeTimeoutMs);
  if (config.grpc_max_connection_idle_s > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                               static_cast<int>(config.grpc_max_connection_idle_s * 1000));
  }
  if (config.grpc_max_connection_age_s > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               static_cast<int>(config.grpc_max_connection_age_s * 1000));
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                               static_cast<int>(config.grpc_max_connection_age_grace_s * 1000));
  }
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<int64_t>(config.max_message_bytes + kMessageSlack, INT32_MAX)));
  builder.RegisterService(&service);
  // strata.v1.Embedding exists only with an embedding model (without, gRPC answers UNIMPLEMENTED).
  EmbeddingServiceOptions embedding_options;
  embedding_options.max_total_bytes = static_cast<size_t>(config.max_message_bytes);
  embedding_options.api_keys = api_keys.get();
  EmbeddingService embedding_service(&state, embedder.get(), embedding_options);
  if (embedder != nullptr) builder.RegisterService(&embedding_service);
  // The operator's cache controls, behind the admin token (--admin-token-file).
  std::unique_ptr<CacheAdmin> cache_admin;
  std::unique_ptr<CacheAdminService> cache_admin_service;
  if (!config.admin_token_file.empty()) {
    std::ifstream in(config.admin_token_file, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    StatusOr<std::string> token =
        in ? ParseAdminToken(text.str()) : StatusOr<std::string>(NotFoundError("cannot read it"));
    if (!token.ok()) {
      Log(LogLevel::kError, "cannot use the admin token file",
          {{"file", config.admin_token_file}, {"error", token.status().message()}});
      return 1;
    }
    cache_admin = std::make_unique<CacheAdmin>(std::move(*token), config.response_cache);
    cache_admin_service = std::make_unique<CacheAdminService>(cache_admin.get());
    builder.RegisterService(cache_admin_service.get());
  }
  // Batch jobs (--jobs-db): the database opens before any port serves, so a bad file is one
  // clear line and exit 1; the runner starts once the model serves. Both transports serve them.
  std::unique_ptr<jobs::JobStore> jobs_store;
  std::unique_ptr<http::BatchRunner> batch_runner;
  if (!config.jobs_db.empty()) {
    StatusOr<std::unique_ptr<jobs::JobStore>> opened = jobs::JobStore::Open(config.jobs_db);
    if (!opened.ok()) {
      Log(LogLevel::kError, "cannot open the batch jobs database",
          {{"file", config.jobs_db}, {"error", opened.status().message()}});
      return 1;
    }
    jobs_store = std::move(*opened);
    http::BatchLineEnv lines;
    lines.state = &state;
    lines.model_id = ServedModelName(config);
    lines.embeddings = embedder.get();
    http::BatchRunnerOptions runner_options;
    runner_options.max_sequences = static_cast<size_t>(config.batch_max_sequences);
    runner_options.engine_slots = static_cast<size_t>(config.max_batch_size);
    runner_options.reserve_slots = static_cast<size_t>(config.batch_reserve_slots);
    runner_options.retention = std::chrono::hours(config.batch_retention_hours);
    batch_runner =
        std::make_unique<http::BatchRunner>(jobs_store.get(), std::move(lines), runner_options);
  }

  std::unique_ptr<JobsService> jobs_service;
  if (jobs_store) {
    jobs_service = std::make_unique<JobsService>(
        http::BatchApi(jobs_store.get(), batch_runner.get()), api_keys.get());
    builder.RegisterService(jobs_service.get());
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    Log(LogLevel::kError, "cannot start the gRPC server",
        {{"address", HostPort(config.host, grpc_port)}});
    return 1;
  }
  grpc_listener->Start(grpc_acceptor.get(), &grpc_connections);
  // On every way out from here the listener stops before the server is destroyed (declared
  // after it, so destroyed first): no connection is handed to a server going away.
  struct ListenerStop {
    GrpcListener* listener;
    ~ListenerStop() { listener->Stop(); }
  } listener_stop{grpc_listener.get()};
  SetHealth(server.get(), false, embedder != nullptr);

  // The OpenAI-compatible API, over the same ServingState: /health answers 503 while loading.
  std::unique_ptr<http::HttpFrontend> http_frontend;
  if (config.http_port >= 0) {
    http::HttpOptions http_options;
    http_options.host = config.host;
    http_options.port = config.http_port;
    http_options.threads = config.http_threads;
    http_options.connections = &http_connections;
    http_options.model_id = ServedModelName(config);
    http_options.max_body_bytes = static_cast<size_t>(config.max_message_bytes + kMessageSlack);
    http_options.metrics_text = [&metrics] { return metrics.Serialize(); };
    http_options.cache_admin = cache_admin.get();
    http_options.embeddings = embedder.get();
    http_options.jobs = jobs_store.get();
    http_options.batch_runner = batch_runner.get();
    http_options.api_keys = api_keys.get();
    http_options.tls = tls;
    http_frontend = std::make_unique<http::HttpFrontend>(&state, std::move(http_options));
    if (Status started = http_frontend->Start(); !started.ok()) {
      Log(LogLevel::kError, "cannot serve HTTP", {{"error", started.message()}});
      server->Shutdown();
      return 1;
    }
  }
  const int http_port = http_frontend ? http_frontend->port() : -1;
  Log(LogLevel::kInfo, "listening",
      {{"grpc", HostPort(config.host, grpc_port)},
       {"metrics", metrics_port > 0 ? HostPort(config.host, metrics_port) : "off"},
       {"http", http_port > 0 ? HostPort(config.host, http_port) : "off"}});
  if (!config.port_file.empty()) {
    if (Status written = WritePortFile(config.port_file, grpc_port, metrics_port, http_port);
        !written.ok()) {
      Log(LogLevel::kError, "cannot write the port file", {{"error", written.message()}});
      server->Shutdown();
      return 1;
    }
  }

  Log(LogLevel::kInfo, "loading the model", {{"model", config.model}});
  const Clock::time_point load_start = Clock::now();
  // The model loads on the kind resolved above ("auto" is not probed a second time).
  ServerConfig load_config = config;
  load_config.backend = std::string(backend::BackendKindName(*kind));
  StatusOr<std::unique_ptr<ServingModel>> model =
      LoadServingModel(load_config, [&metrics, proposer = SpeculativeProposerName(config)](
                                        const engine::EngineStats& stats, bool /*ran*/) {
        metrics.ObserveStep(ToStepRecord(stats, proposer));
      });
  if (!model.ok()) {
    Log(LogLevel::kError, "cannot load the model",
        {{"model", config.model}, {"error", model.status().ToString()}});
    server->Shutdown();
    return 1;
  }
  engine::Engine& engine = *(*model)->engine;
  std::unique_ptr<ResponseCache> response_cache;  // destroyed before the model, after Stop
  if (config.response_cache) {
    // The model's identity in every key: a digest of the file's bytes, not its path.
    const Clock::time_point digest_start = Clock::now();
    std::string digest = cache::Sha256Hex((*model)->file->bytes());
    Log(LogLevel::kInfo, "response cache on",
        {{"model_sha256", digest},
         {"bytes", std::to_string(config.response_cache_bytes)},
         {"ttl_seconds", std::to_string(config.response_cache_ttl_seconds)},
         {"digest_seconds",
          std::to_string(std::chrono::duration<double>(Clock::now() - digest_start).count())}});
    StatusOr<std::unique_ptr<ResponseCache>> made =
        MakeResponseCache(config, &engine, std::move(digest), &metrics, embedder.get());
    if (!made.ok()) {
      Log(LogLevel::kError, "cannot set up the response cache",
          {{"error", made.status().ToString()}});
      server->Shutdown();
      return 1;
    }
    response_cache = std::move(*made);
    (*model)->submitter = response_cache->submitter.get();
    if (cache_admin != nullptr) cache_admin->Attach(response_cache->submitter.get());
  }
  metrics.ObserveStep(ToStepRecord(engine.Stats(), SpeculativeProposerName(config)));
  engine.Start();
  state.Activate(model->get());
  if (batch_runner) batch_runner->Start();
  SetHealth(server.get(), true, embedder != nullptr);
  const v1::ModelInfo& info = (*model)->info;
  Log(LogLevel::kInfo, "serving",
      {{"model", info.name()},
       {"backend", info.backend()},
       {"kv_cache_tokens", std::to_string(info.kv_cache_tokens())},
       {"load_seconds",
        std::to_string(std::chrono::duration<double>(Clock::now() - load_start).count())}});

  int sig = 0;
  while (sig == 0 || sig == SIGHUP) {
    if (sig == SIGHUP && tls != nullptr) {
      // The HTTP port's identity now; gRPC's file watcher within --tls-refresh-seconds.
      const Status reloaded = tls->Reload();
      Log(reloaded.ok() ? LogLevel::kInfo : LogLevel::kWarn,
          reloaded.ok() ? "TLS certificate reloaded"
                        : "TLS certificate reload failed; keeping the old one",
          {{"signal", "SIGHUP"}, {"error", reloaded.ok() ? "" : reloaded.message()}});
    }
    if (api_keys != nullptr) {
      // On SIGHUP, and when the file changed (checked every second: a mounted secret's update
      // sends no signal).
      const std::optional<FileStamp> stamp = StampOf(config.api_keys_file);
      if (sig == SIGHUP || (stamp.has_value() && stamp != api_keys_stamp)) {
        ReloadApiKeys(api_keys.get(), config.api_keys_file,
                      sig == SIGHUP ? "SIGHUP" : "the file changed");
        api_keys_stamp = stamp;
      }
    }
    sig = WaitForSignal(signals, std::chrono::milliseconds(1000));
  }

  // Drain.
  Log(LogLevel::kInfo, "draining",
      {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"},
       {"in_flight", std::to_string(state.in_flight())},
       {"grace_seconds", std::to_string(config.drain_grace_seconds)}});
  SetHealth(server.get(), false, embedder != nullptr);
  state.BeginDrain();
  // Batch lines running now are cancelled and stay pending in the database for the next start.
  if (batch_runner) batch_runner->Stop();
  const auto grace = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(config.drain_grace_seconds));
  const Clock::time_point deadline = Clock::now() + grace;
  // gRPC stops taking calls at once: its listener closes and every connection gets GOAWAY, so a
  // balancer in front (nginx, a Kubernetes Service) opens its next call elsewhere instead of
  // getting UNAVAILABLE inside an HTTP/2 response it cannot retry. Calls in flight go on; the
  // engine's stop below ends whatever the grace leaves. (HTTP keeps listening and answers 503,
  // which balancers do retry, so /health tells the drain.)
  const auto grpc_deadline =
      std::chrono::system_clock::now() +
      std::chrono::duration_cast<std::chrono::system_clock::duration>(grace) +
      std::chrono::seconds(5);
  grpc_listener->Stop();
  std::thread grpc_shutdown([&server, grpc_deadline] { server->Shutdown(grpc_deadline); });
  bool cut_short = false;
  while (state.in_flight() > 0 && Clock::now() < deadline) {
    const int again = WaitForSignal(signals, std::chrono::milliseconds(10));
    if (again == SIGTERM || again == SIGINT) {
      cut_short = true;
      break;
    }
  }
  const int64_t left = state.in_flight();
  if (left > 0) {
    Log(LogLevel::kWarn,
        cut_short ? "second signal: cancelling the requests left"
                  : "grace period over: cancelling the requests left",
        {{"in_flight", std::to_string(left)}});
  }
  engine.Stop();  // ends what is left; their calls complete UNAVAILABLE
  grpc_shutdown.join();
  server->Wait();
  if (http_frontend) http_frontend->Stop();
  if (traces) traces->Shutdown(std::chrono::seconds(2));  // the last calls' spans
  Log(LogLevel::kInfo, "stopped", {});
  return 0;
}

}  // namespace strata::server
