#include "strata/server/server_config.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <variant>

#include "strata/trace/otlp_http_exporter.h"

namespace strata::server {
namespace {

// How one setting parses and where it lands.
struct Setting {
  const char* name;
  std::variant<std::string ServerConfig::*, int32_t ServerConfig::*, int64_t ServerConfig::*,
               double ServerConfig::*, bool ServerConfig::*>
      field;
  double min = 0;
  double max = 0;
  std::vector<std::string> choices;  // for strings: allowed values (empty: any)
  const char* help = "";
};

const std::vector<Setting>& Settings() {
  constexpr double kMaxI32 = std::numeric_limits<int32_t>::max();
  constexpr double kMaxI64 = 9.0e15;  // exact in a double
  // gRPC takes its timeouts as int milliseconds.
  constexpr double kMaxGrpcSeconds = 2147483;
  static const std::vector<Setting> settings = {
      {"model", &ServerConfig::model, 0, 0, {}, "GGUF model file (required)"},
      {"chat_template",
       &ServerConfig::chat_template,
       0,
       0,
       {},
       "chat template name (gemma, chatml, llama3); empty: detect from the model"},
      {"backend",
       &ServerConfig::backend,
       0,
       0,
       {"auto", "cpu", "cuda"},
       "where the model runs: cuda, cpu, or auto (cuda when built with it and a device is "
       "visible, else cpu)"},
      {"device", &ServerConfig::device, 0, 1024, {}, "CUDA device ordinal (cuda only)"},
      {"gpu_memory_fraction",
       &ServerConfig::gpu_memory_fraction,
       0.01,
       1,
       {},
       "share of the device's free memory after the weights that the KV cache and workspaces "
       "may take (cuda only)"},
      {"cuda_graphs",
       &ServerConfig::cuda_graphs,
       0,
       0,
       {},
       "replay decode steps as CUDA graphs (cuda only)"},
      {"cuda_f16_weights",
       &ServerConfig::cuda_f16_weights,
       0,
       0,
       {"auto", "on", "off"},
       "keep fp16 copies of quantized weights for batches of more than 16 tokens instead of "
       "dequantizing on every step (cuda only; auto: when the KV cache keeps at least half of "
       "its memory)"},
      {"threads", &ServerConfig::threads, 0, 1024, {}, "CPU threads; 0: one per core"},
      {"matmul_precision",
       &ServerConfig::matmul_precision,
       0,
       0,
       {"auto", "int8", "fp32"},
       "CPU matmul activations: auto (per weight type, the faster of int8 and fp32 measured on "
       "the model's matrices at start-up), int8 (llama.cpp-like rounding; fp32 kernels on CPUs "
       "without AVX-512 VNNI) or fp32 (exact)"},
      {"kv_budget_bytes",
       &ServerConfig::kv_budget_bytes,
       0,
       kMaxI64,
       {},
       "KV cache memory; 0: the backend's default (cpu: 256 MiB; cuda: from "
       "--gpu-memory-fraction)"},
      {"kv_dtype",
       &ServerConfig::kv_dtype,
       0,
       0,
       {"f16", "f32", "q8_0"},
       "KV cache element type (f32, q8_0: cpu only)"},
      {"kv_block_size", &ServerConfig::kv_block_size, 1, 1024, {}, "tokens per KV block"},
      {"host", &ServerConfig::host, 0, 0, {}, "address to listen on"},
      {"grpc_port", &ServerConfig::grpc_port, 0, 65535, {}, "gRPC port; 0: any free port"},
      {"grpc_max_connection_idle_s",
       &ServerConfig::grpc_max_connection_idle_s,
       0,
       kMaxGrpcSeconds,
       {},
       "gRPC: close a connection after this many seconds without a call; 0: never"},
      {"grpc_max_connection_age_s",
       &ServerConfig::grpc_max_connection_age_s,
       0,
       kMaxGrpcSeconds,
       {},
       "gRPC: ask a client to reconnect after this many seconds (spreads load over replicas); "
       "0: never"},
      {"grpc_max_connection_age_grace_s",
       &ServerConfig::grpc_max_connection_age_grace_s,
       0,
       kMaxGrpcSeconds,
       {},
       "gRPC: seconds calls in flight on an aged connection get to finish"},
      {"metrics_port",
       &ServerConfig::metrics_port,
       -1,
       65535,
       {},
       "Prometheus /metrics port (plaintext); 0: any free port; -1: off (the HTTP API's "
       "/metrics, with its TLS and keys, stays)"},
      {"http_port",
       &ServerConfig::http_port,
       -1,
       65535,
       {},
       "OpenAI-compatible HTTP API port; 0: any free port; -1: no HTTP API"},
      {"http_threads",
       &ServerConfig::http_threads,
       1,
       4096,
       {},
       "HTTP connections served at once (each open connection, a streaming one included, "
       "holds one)"},
      {"max_connections",
       &ServerConfig::max_connections,
       0,
       1000000,
       {},
       "client connections the gRPC port and the HTTP port each hold at once; more wait in the "
       "kernel's listen backlog until one closes; 0: no limit"},
      {"served_model_name",
       &ServerConfig::served_model_name,
       0,
       0,
       {},
       "the model name the HTTP API lists and requests give; empty: the model file's name "
       "without .gguf"},
      {"port_file",
       &ServerConfig::port_file,
       0,
       0,
       {},
       "once the ports are bound, write {\"grpc_port\": N, \"metrics_port\": M, \"http_port\": H} "
       "here"},
      {"max_message_bytes",
       &ServerConfig::max_message_bytes,
       1024,
       kMaxI32,
       {},
       "largest gRPC request accepted"},
      {"max_model_len",
       &ServerConfig::max_model_len,
       0,
       kMaxI64,
       {},
       "prompt + max_tokens per request at most; 0: the model's context length"},
      {"max_batched_tokens",
       &ServerConfig::max_batched_tokens,
       1,
       kMaxI64,
       {},
       "tokens per engine step at most (the static budget)"},
      {"max_batch_size",
       &ServerConfig::max_batch_size,
       1,
       kMaxI32,
       {},
       "sequences per engine step at most"},
      {"long_prefill_chunk",
       &ServerConfig::long_prefill_chunk,
       0,
       kMaxI64,
       {},
       "prompt tokens per sequence per step at most; 0: no cap"},
      {"max_queued_requests",
       &ServerConfig::max_queued_requests,
       1,
       kMaxI64,
       {},
       "requests waiting for the engine at most; beyond: RESOURCE_EXHAUSTED"},
      {"batching",
       &ServerConfig::batching,
       0,
       0,
       {"static", "adaptive"},
       "token budget fixed (static) or following load and --target-itl-ms (adaptive)"},
      {"target_itl_ms",
       &ServerConfig::target_itl_ms,
       1,
       1e6,
       {},
       "inter-token latency target of adaptive batching, milliseconds"},
      {"min_prefill_tokens",
       &ServerConfig::min_prefill_tokens,
       0,
       kMaxI64,
       {},
       "adaptive batching: prompt tokens each step keeps for waiting prompts, whatever the "
       "target"},
      {"constraint_mask_threads",
       &ServerConfig::constraint_mask_threads,
       0,
       64,
       {},
       "structured output: threads that compute token masks of grammar positions seen for the "
       "first time, off the engine thread; 0: on the engine thread"},
      {"enable_prefix_caching",
       &ServerConfig::enable_prefix_caching,
       0,
       0,
       {},
       "reuse the KV of cached prompt prefixes"},
      {"preload_prompts",
       &ServerConfig::preload_prompts,
       0,
       0,
       {},
       "file of prompts (one per line; \\n and \\\\ escapes) put into the prefix cache at start"},
      {"speculative",
       &ServerConfig::speculative,
       0,
       0,
       {"none", "ngram", "draft", "self"},
       "speculative decoding: none, ngram (drafts looked up in the prompt and output), draft "
       "(drafts from --speculative-draft-model) or self (the model's own first layers "
       "draft); exact: outputs do not change"},
      {"speculative_self_layers",
       &ServerConfig::speculative_self_layers,
       0,
       4096,
       {},
       "layers of the self-speculation draft; 0: measured at start-up (the best expected "
       "speedup among a quarter, a third, half and two thirds of the layers)"},
      {"speculative_draft_model",
       &ServerConfig::speculative_draft_model,
       0,
       0,
       {},
       "GGUF file of the draft model for --speculative draft: a smaller model with the "
       "target's vocabulary"},
      {"speculative_draft_kv_bytes",
       &ServerConfig::speculative_draft_kv_bytes,
       65536,
       kMaxI64,
       {},
       "memory for the draft model's KV cache, bytes"},
      {"speculative_tokens",
       &ServerConfig::speculative_tokens,
       1,
       16,
       {},
       "draft tokens per sequence per step at most"},
      {"speculative_adaptive",
       &ServerConfig::speculative_adaptive,
       0,
       0,
       {},
       "size each draft from its sequence's measured acceptance and the measured cost of a "
       "token in the batch (off: always --speculative-tokens when the proposer has them)"},
      {"speculative_ngram_min",
       &ServerConfig::speculative_ngram_min,
       1,
       64,
       {},
       "the n-gram proposer's shortest suffix looked up"},
      {"speculative_ngram_max",
       &ServerConfig::speculative_ngram_max,
       1,
       64,
       {},
       "the n-gram proposer's longest suffix looked up"},
      {"default_max_tokens",
       &ServerConfig::default_max_tokens,
       1,
       kMaxI32,
       {},
       "max_tokens of a request that sets none"},
      {"response_cache",
       &ServerConfig::response_cache,
       0,
       0,
       {},
       "answer deterministic requests (temperature 0, or a seed the client chose) from earlier "
       "identical ones, and compute identical requests in flight once"},
      {"response_cache_bytes",
       &ServerConfig::response_cache_bytes,
       1024,
       kMaxI64,
       {},
       "memory of the in-process response cache (least recently used entries leave first)"},
      {"response_cache_ttl_seconds",
       &ServerConfig::response_cache_ttl_seconds,
       1,
       int64_t{365} * 86400,
       {},
       "how long a cached response is served at most (a request's cache_ttl may shorten it)"},
      {"response_cache_redis",
       &ServerConfig::response_cache_redis,
       0,
       0,
       {},
       "host:port of a Redis server every replica shares as the response cache's second tier; "
       "empty: in-process only"},
      {"response_cache_redis_timeout_ms",
       &ServerConfig::response_cache_redis_timeout_ms,
       1,
       60000,
       {},
       "bound of each Redis call; a Redis that fails is skipped (requests served uncached) and "
       "retried a second later"},
      {"embedding_model",
       &ServerConfig::embedding_model,
       0,
       0,
       {},
       "sentence-embedding model folder (e.g. models/all-minilm-l6-v2) for the semantic cache "
       "and the embeddings endpoints; empty: none"},
      {"embedding_threads",
       &ServerConfig::embedding_threads,
       1,
       256,
       {},
       "threads of the embedding encoder (they compete with the engine's --threads)"},
      {"embedding_max_batch",
       &ServerConfig::embedding_max_batch,
       1,
       4096,
       {},
       "texts per embedding encoder pass at most (concurrent calls are batched)"},
      {"semantic_cache",
       &ServerConfig::semantic_cache,
       0,
       0,
       {},
       "also answer requests that ask for it (cache semantic) with the answer of an earlier "
       "request whose text is similar and whose other parameters are equal; needs "
       "--response-cache and --embedding-model"},
      {"semantic_cache_threshold",
       &ServerConfig::semantic_cache_threshold,
       0.5,
       1.0,
       {},
       "cosine similarity of two texts' embeddings at or above which the semantic cache hits "
       "(docs/benchmarks/semantic-threshold.md: precision by threshold)"},
      {"semantic_cache_max_entries",
       &ServerConfig::semantic_cache_max_entries,
       1,
       int64_t{10} << 20,
       {},
       "texts the semantic cache indexes at most (the oldest leave first)"},
      {"admin_token_file",
       &ServerConfig::admin_token_file,
       0,
       0,
       {},
       "file whose first line is the token CacheAdmin calls (gRPC) and /admin/ requests (HTTP) "
       "must present as 'authorization: Bearer TOKEN'; empty: those endpoints are off"},
      {"api_keys_file",
       &ServerConfig::api_keys_file,
       0,
       0,
       {},
       "file of API keys (one 'NAME SHA256HEX [rpm=N] [tpm=N] [streams=N]' per line); calls "
       "must then present 'authorization: Bearer KEY'; empty: no keys"},
      {"grpc_reflection",
       &ServerConfig::grpc_reflection,
       0,
       0,
       {"auto", "on", "off"},
       "gRPC server reflection: on, off, or auto (on without API keys, off with them)"},
      {"tls_cert_file",
       &ServerConfig::tls_cert_file,
       0,
       0,
       {},
       "PEM certificate chain of the gRPC and HTTP ports (with --tls-key-file); empty: plaintext"},
      {"tls_key_file", &ServerConfig::tls_key_file, 0, 0, {}, "PEM private key of the certificate"},
      {"tls_client_ca_file",
       &ServerConfig::tls_client_ca_file,
       0,
       0,
       {},
       "PEM CA certificates: clients must present a certificate one of them signed (mTLS); "
       "empty: no client certificates"},
      {"tls_refresh_seconds",
       &ServerConfig::tls_refresh_seconds,
       1,
       86400,
       {},
       "how often the TLS files are checked for changes (also reloaded on SIGHUP)"},
      {"jobs_db",
       &ServerConfig::jobs_db,
       0,
       0,
       {},
       "SQLite file of batch jobs: turns on /v1/files and /v1/batches (created when absent); "
       "empty: off"},
      {"batch_max_sequences",
       &ServerConfig::batch_max_sequences,
       1,
       1024,
       {},
       "batch lines running at once, at most"},
      {"batch_reserve_slots",
       &ServerConfig::batch_reserve_slots,
       0,
       kMaxI32,
       {},
       "engine batch slots that batch lines leave free for interactive requests"},
      {"batch_max_slowdown",
       &ServerConfig::batch_max_slowdown,
       0,
       100,
       {},
       "how much longer batch lines may make a step that carries interactive requests, as a "
       "fraction (0.1: 10%), by the engine's step-time model; at least one batch token a step"},
      {"batch_retention_hours",
       &ServerConfig::batch_retention_hours,
       1,
       24 * 365,
       {},
       "finished batch jobs and their output files are deleted after this long"},
      {"otlp_endpoint",
       &ServerConfig::otlp_endpoint,
       0,
       0,
       {},
       "OTLP/HTTP URL the traces of generation calls are exported to (protobuf), e.g. "
       "http://127.0.0.1:4318/v1/traces; empty: traces are not exported"},
      {"otlp_headers",
       &ServerConfig::otlp_headers,
       0,
       0,
       {},
       "headers sent with each trace export, as key=value,key=value"},
      {"otlp_service_name",
       &ServerConfig::otlp_service_name,
       0,
       0,
       {},
       "the service.name of the exported traces"},
      {"otlp_max_queue_spans",
       &ServerConfig::otlp_max_queue_spans,
       16,
       int64_t{1} << 20,
       {},
       "spans waiting for export at most; a trace that does not fit is dropped and counted"},
      {"drain_grace_seconds",
       &ServerConfig::drain_grace_seconds,
       0,
       86400,
       {},
       "on SIGTERM/SIGINT, how long in-flight requests may finish before they are cancelled"},
      {"log_level",
       &ServerConfig::log_level,
       0,
       0,
       {"trace", "debug", "info", "warn", "error", "off"},
       "least severe log level written"},
      {"log_format", &ServerConfig::log_format, 0, 0, {"text", "json"}, "log line format"},
      {"log_prompts",
       &ServerConfig::log_prompts,
       0,
       0,
       {},
       "put prompt text in debug logs (off by default: prompts may be private)"},
  };
  return settings;
}

std::string FlagOf(std::string_view name) {
  std::string flag = "--";
  for (const char c : name) flag.push_back(c == '_' ? '-' : c);
  return flag;
}

std::string EnvOf(std::string_view name) {
  std::string env = "STRATA_";
  for (const char c : name) env.push_back(static_cast<char>(std::toupper(c)));
  return env;
}

std::string JoinChoices(const std::vector<std::string>& choices) {
  std::string out;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) out += i + 1 == choices.size() ? " or " : ", ";
    out += choices[i];
  }
  return out;
}

std::string FormatNumber(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string DefaultOf(const Setting& setting) {
  const ServerConfig defaults;
  return std::visit(
      [&](auto member) -> std::string {
        const auto& value = defaults.*member;
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return value;
        } else if constexpr (std::is_same_v<T, bool>) {
          return value ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          return FormatNumber(value);
        } else {
          return std::to_string(value);
        }
      },
      setting.field);
}

const Setting* Find(std::string_view name) {
  for (const Setting& s : Settings()) {
    if (name == s.name) return &s;
  }
  return nullptr;
}

// Sets `setting` of *config from `value`; `source` names where the value came from.
Status Apply(const Setting& setting, const std::string& source, const std::string& value,
             ServerConfig* config) {
  auto bad = [&](const std::string& what) {
    return InvalidArgumentError(source + ": " + setting.name + " must be " + what + ", got '" +
                                value + "'");
  };
  return std::visit(
      [&](auto member) -> Status {
        auto& field = config->*member;
        using T = std::decay_t<decltype(field)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (!setting.choices.empty()) {
            bool known = false;
            for (const std::string& c : setting.choices) known |= c == value;
            if (!known) return bad("one of " + JoinChoices(setting.choices));
          }
          field = value;
        } else if constexpr (std::is_same_v<T, bool>) {
          if (value == "true" || value == "1" || value == "yes" || value == "on") {
            field = true;
          } else if (value == "false" || value == "0" || value == "no" || value == "off") {
            field = false;
          } else {
            return bad("true or false");
          }
        } else {
          const std::string range =
              "in [" + FormatNumber(setting.min) + ", " + FormatNumber(setting.max) + "]";
          errno = 0;
          char* end = nullptr;
          if constexpr (std::is_same_v<T, double>) {
            const double v = std::strtod(value.c_str(), &end);
            if (value.empty() || *end != '\0' || errno != 0 || !std::isfinite(v) ||
                v < setting.min || v > setting.max) {
              return bad("a number " + range);
            }
            field = v;
          } else {
            const long long v = std::strtoll(value.c_str(), &end, 10);
            if (value.empty() || *end != '\0' || errno != 0 ||
                static_cast<double>(v) < setting.min || static_cast<double>(v) > setting.max) {
              return bad("an integer " + range);
            }
            field = static_cast<T>(v);
          }
        }
        return OkStatus();
      },
      setting.field);
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

Status ApplyFile(const std::string& path, const std::string& text, ServerConfig* config) {
  std::istringstream lines(text);
  std::string raw;
  int number = 0;
  while (std::getline(lines, raw)) {
    ++number;
    const std::string where = path + ":" + std::to_string(number);
    std::string_view line = Trim(raw);
    if (line.empty() || line.front() == '#') continue;
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgumentError(where + ": expected 'name = value', got '" + std::string(line) +
                                  "'");
    }
    const std::string name(Trim(line.substr(0, eq)));
    std::string_view value = Trim(line.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    } else if (const size_t hash = value.find(" #"); hash != std::string_view::npos) {
      value = Trim(value.substr(0, hash));
    }
    const Setting* setting = Find(name);
    if (setting == nullptr) {
      return InvalidArgumentError(where + ": unknown setting '" + name +
                                  "' (strata-server --help lists them)");
    }
    STRATA_RETURN_IF_ERROR(Apply(*setting, where, std::string(value), config));
  }
  return OkStatus();
}

// Command-line arguments as (flag name without dashes, value, source) in order. Boolean flags
// may stand alone.
struct FlagValue {
  std::string name;  // config-file spelling
  std::string value;
  std::string source;
};

StatusOr<std::vector<FlagValue>> ParseArgs(const std::vector<std::string>& args, bool* help) {
  std::vector<FlagValue> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      *help = true;
      return out;
    }
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      return InvalidArgumentError("unexpected argument '" + arg +
                                  "': settings are flags such as --model FILE (see --help)");
    }
    std::string flag = arg;
    std::optional<std::string> value;
    if (const size_t eq = arg.find('='); eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    std::string name;
    for (const char c : std::string_view(flag).substr(2)) name.push_back(c == '-' ? '_' : c);
    const Setting* setting = Find(name);
    if (setting == nullptr && name != "config") {
      return InvalidArgumentError("unknown flag " + flag + " (see --help)");
    }
    const bool is_bool =
        setting != nullptr && std::holds_alternative<bool ServerConfig::*>(setting->field);
    if (!value) {
      if (is_bool && (i + 1 >= args.size() || args[i + 1].compare(0, 2, "--") == 0)) {
        value = "true";
      } else if (i + 1 >= args.size()) {
        return InvalidArgumentError(flag + " needs a value (see --help)");
      } else {
        value = args[++i];
      }
    }
    out.push_back({name, *value, flag});
  }
  return out;
}

}  // namespace

std::vector<SettingInfo> ListSettings() {
  std::vector<SettingInfo> out;
  out.push_back({"config", "--config", "STRATA_CONFIG", "",
                 "config file of 'name = value' lines, read before the environment and flags"});
  for (const Setting& s : Settings()) {
    std::string help = s.help;
    if (!s.choices.empty()) help += " (" + JoinChoices(s.choices) + ")";
    out.push_back({s.name, FlagOf(s.name), EnvOf(s.name), DefaultOf(s), help});
  }
  return out;
}

std::string ServerUsage() {
  std::string usage =
      "usage: strata-server --model FILE [settings]\n"
      "Serves the model over gRPC (strata.v1.Generation, health, reflection) and exports\n"
      "Prometheus metrics at /metrics. Each setting is a flag, a config-file name and an\n"
      "environment variable; flags beat the environment, which beats the config file.\n\n";
  for (const SettingInfo& s : ListSettings()) {
    std::string line = "  " + s.flag;
    line.resize(std::max<size_t>(line.size() + 1, 26), ' ');
    line += s.help;
    if (!s.default_value.empty()) line += " [" + s.default_value + "]";
    usage += line + "\n" + std::string(26, ' ') + s.env + "\n";
  }
  return usage;
}

StatusOr<ServerConfig> LoadServerConfig(
    const std::vector<std::string>& args,
    const std::function<std::optional<std::string>(const std::string&)>& getenv,
    const std::function<StatusOr<std::string>(const std::string&)>& read_file, bool* help) {
  *help = false;
  STRATA_ASSIGN_OR_RETURN(std::vector<FlagValue> flags, ParseArgs(args, help));
  if (*help) return ServerConfig{};

  // The config file: from --config, else STRATA_CONFIG.
  std::optional<std::string> config_path = getenv("STRATA_CONFIG");
  for (const FlagValue& f : flags) {
    if (f.name == "config") config_path = f.value;
  }
  ServerConfig config;
  if (config_path && !config_path->empty()) {
    StatusOr<std::string> text = read_file(*config_path);
    if (!text.ok()) {
      return InvalidArgumentError("cannot read the config file " + *config_path + ": " +
                                  text.status().message());
    }
    STRATA_RETURN_IF_ERROR(ApplyFile(*config_path, *text, &config));
  }
  for (const Setting& s : Settings()) {
    const std::string env = EnvOf(s.name);
    if (std::optional<std::string> value = getenv(env)) {
      STRATA_RETURN_IF_ERROR(Apply(s, env, *value, &config));
    }
  }
  for (const FlagValue& f : flags) {
    if (f.name == "config") continue;
    STRATA_RETURN_IF_ERROR(Apply(*Find(f.name), f.source, f.value, &config));
  }
  if (config.model.empty()) {
    return InvalidArgumentError("the model is required: --model FILE (or STRATA_MODEL)");
  }
  if ((config.speculative == "draft") != !config.speculative_draft_model.empty()) {
    return InvalidArgumentError(
        "speculative = draft and speculative_draft_model go together (--speculative draft "
        "--speculative-draft-model FILE)");
  }
  if (config.speculative_ngram_min > config.speculative_ngram_max) {
    return InvalidArgumentError("speculative_ngram_min (" +
                                std::to_string(config.speculative_ngram_min) +
                                ") must not exceed speculative_ngram_max (" +
                                std::to_string(config.speculative_ngram_max) + ")");
  }
  if (config.semantic_cache && !config.response_cache) {
    return InvalidArgumentError("semantic_cache needs response_cache (--response-cache)");
  }
  if (config.semantic_cache && config.embedding_model.empty()) {
    return InvalidArgumentError(
        "semantic_cache needs an embedding model (--embedding-model DIR, e.g. "
        "models/all-minilm-l6-v2)");
  }
  if (config.tls_cert_file.empty() != config.tls_key_file.empty()) {
    return InvalidArgumentError("tls_cert_file and tls_key_file must be given together");
  }
  if (!config.tls_client_ca_file.empty() && config.tls_cert_file.empty()) {
    return InvalidArgumentError("tls_client_ca_file needs tls_cert_file and tls_key_file");
  }
  if (!config.otlp_endpoint.empty()) {
    if (StatusOr<trace::OtlpEndpoint> url = trace::ParseOtlpEndpoint(config.otlp_endpoint);
        !url.ok()) {
      return InvalidArgumentError("otlp_endpoint: " + url.status().message());
    }
  }
  if (StatusOr<std::vector<std::pair<std::string, std::string>>> headers =
          trace::ParseOtlpHeaders(config.otlp_headers);
      !headers.ok()) {
    return InvalidArgumentError("otlp_headers: " + headers.status().message());
  }
  if (config.otlp_service_name.empty()) {
    return InvalidArgumentError("otlp_service_name must not be empty");
  }
  return config;
}

StatusOr<ServerConfig> LoadServerConfig(int argc, char** argv, bool* help) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto getenv = [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
  auto read_file = [](const std::string& path) -> StatusOr<std::string> {
    std::ifstream in(path, std::ios::binary);
    if (!in) return NotFoundError("no such file or not readable");
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) return InternalError("read error");
    return text.str();
  };
  return LoadServerConfig(args, getenv, read_file, help);
}

}  // namespace strata::server
