// ServerConfig: every setting of strata-server, read from (later wins) defaults, a config file,
// the environment and the command line. One name per setting in all three places:
//   flag `--max-batch-size 32` (or `--max-batch-size=32`),
//   config file line `max_batch_size = 32`,
//   environment `STRATA_MAX_BATCH_SIZE=32`.
// Booleans take true/false (also 1/0, yes/no, on/off); a boolean flag alone means true.
// The config file is given with `--config FILE` (or STRATA_CONFIG): `name = value` lines,
// `#` comments, values optionally in double quotes. Unknown names in a file or on the command
// line are errors (a typo must not silently keep a default); unknown STRATA_* variables are
// ignored (other tools use the prefix too).
//
// docs/configuration.md lists every setting; a unit test keeps it in step with the table here.
//
// Thread rules: plain values; LoadServerConfig is a pure function of its inputs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/common/status.h"

namespace strata::server {

struct ServerConfig {
  // Model and backend.
  std::string model;                 // GGUF file (required)
  std::string chat_template;         // "" = detect from the model
  std::string backend = "auto";      // "auto", "cpu" or "cuda" (backend_factory.h)
  int32_t device = 0;                // CUDA device ordinal
  double gpu_memory_fraction = 0.9;  // CUDA: share of free memory for KV and workspaces
  bool cuda_graphs = true;           // CUDA: replay decode steps as graphs
  // CUDA: fp16 copies of quantized weights for batches over 16 tokens: "auto", "on" or "off"
  // (backend_factory.h).
  std::string cuda_f16_weights = "auto";
  int32_t threads = 0;  // CPU threads; 0 = one per core
  // "auto", "int8" or "fp32" (CPU matmul activations, matmul_plan.h). auto times the model's
  // matrices both ways at start-up and runs each weight type at the faster one (int8, as
  // llama.cpp does, on the AVX-512 VNNI CPUs measured so far; fp32 on CPUs without VNNI).
  std::string matmul_precision = "auto";
  int64_t kv_budget_bytes = 0;   // 0 = the backend's default (CPU 256 MiB, CUDA from the fraction)
  std::string kv_dtype = "f16";  // "f16", "f32" or "q8_0"
  int32_t kv_block_size = 16;    // tokens per KV block

  // Network.
  std::string host = "127.0.0.1";
  int32_t grpc_port = 50051;  // 0 = any free port (see port_file)
  int32_t metrics_port = 9464;
  int32_t http_port = 8000;  // OpenAI-compatible API; -1 = off
  int32_t http_threads = 256;
  // Client connections the gRPC and HTTP ports each hold at once (0: no limit); more wait in the
  // kernel's listen backlog.
  int32_t max_connections = 1024;
  // gRPC connections: closed after this long without a call (0: never), and asked to reconnect
  // (GOAWAY) after this age, calls in flight getting the grace period to finish (0: never).
  int64_t grpc_max_connection_idle_s = 300;
  int64_t grpc_max_connection_age_s = 3600;
  int64_t grpc_max_connection_age_grace_s = 600;
  std::string served_model_name;  // empty: the model file's name without .gguf
  std::string port_file;          // the bound ports are written here as JSON once bound
  int64_t max_message_bytes = int64_t{4} << 20;

  // Scheduling.
  int64_t max_model_len = 0;  // tokens per request (prompt + max_tokens); 0 = the model's
  int64_t max_batched_tokens = 512;
  int32_t max_batch_size = 64;
  int64_t long_prefill_chunk = 0;  // 0 = no per-sequence cap
  int64_t max_queued_requests = 1024;
  std::string batching = "adaptive";  // "static" or "adaptive"
  double target_itl_ms = 80;          // adaptive batching's inter-token latency target
  int64_t min_prefill_tokens = 64;    // adaptive: prompt tokens per step kept for waiting prompts
  // Structured output: helper threads for token masks first seen (0: on the engine thread).
  int32_t constraint_mask_threads = 1;
  bool enable_prefix_caching = true;
  std::string preload_prompts;  // file of prompts put into the prefix cache at start-up

  // Speculative decoding (engine/engine.h): "none", "ngram" (prompt lookup) or "draft" (a
  // smaller model with the same vocabulary, speculative_draft_model).
  std::string speculative = "none";
  std::string speculative_draft_model;  // GGUF file of the draft model
  int32_t speculative_self_layers = 0;  // self: the draft's layers; 0 = chosen by measurement
  int64_t speculative_draft_kv_bytes = int64_t{64} << 20;  // the draft model's KV cache
  int32_t speculative_tokens = 6;                          // draft tokens per step at most
  bool speculative_adaptive = true;   // draft length from measured acceptance and cost
  int32_t speculative_ngram_min = 2;  // the n-gram proposer's shortest suffix
  int32_t speculative_ngram_max = 4;  // and longest

  // Requests.
  int32_t default_max_tokens = 256;

  // Response cache: deterministic requests (greedy, or with a seed the client chose) answered
  // from earlier identical ones (cache/caching_submitter.h).
  bool response_cache = false;
  int64_t response_cache_bytes = int64_t{256} << 20;  // in-process tier
  int64_t response_cache_ttl_seconds = 3600;          // an entry's lifetime at most
  std::string response_cache_redis;                   // "host:port" of the shared tier; "" = none
  int32_t response_cache_redis_timeout_ms = 50;       // per Redis call (connect, command)

  // Embeddings: the sentence-embedding model (a sentence-transformers folder, e.g.
  // models/all-minilm-l6-v2) behind the Embed RPC, /v1/embeddings and the semantic cache.
  std::string embedding_model;       // "" = none
  int32_t embedding_threads = 1;     // the encoder's own threads (they compete with the engine's)
  int32_t embedding_max_batch = 64;  // texts per encoder pass at most

  // Semantic cache: a request that asks for it may get the answer of an earlier one whose text
  // is similar (embedding model: --embedding-model; needs --response-cache).
  bool semantic_cache = false;
  double semantic_cache_threshold = 0.9;       // cosine similarity at or above which it hits
  int64_t semantic_cache_max_entries = 20000;  // texts indexed at most (oldest leave first)

  // Operations: a file holding the token that CacheAdmin (gRPC) and /admin/* (HTTP) calls must
  // present; "" = those endpoints are off.
  std::string admin_token_file;

  // Access: the API keys file (api_keys.h); "" = no keys, every call is served. gRPC server
  // reflection: "auto" = on without keys, off with them.
  std::string api_keys_file;
  std::string grpc_reflection = "auto";  // "auto", "on", "off"

  // TLS on the gRPC and HTTP ports (tls_identity.h): PEM certificate chain and key; with a
  // client CA, clients must present a certificate it signed (mTLS). "" = plaintext.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  int32_t tls_refresh_seconds = 10;  // how often changed files are picked up

  // Batch jobs (OpenAI's Files and Batches APIs over HTTP): their SQLite database; "" = off.
  std::string jobs_db;
  int32_t batch_max_sequences = 8;  // batch lines running at once, at most
  int32_t batch_reserve_slots = 8;  // engine batch slots batch lines leave to interactive calls
  // Fraction by which batch lines may lengthen a step of interactive requests (engine side).
  double batch_max_slowdown = 0.1;
  int32_t batch_retention_hours = 168;  // finished jobs (and their output files) are kept this long

  // Tracing (call_trace.h): generation calls' spans are exported over OTLP/HTTP (protobuf) to
  // this URL ("http://collector:4318/v1/traces"); "" = not exported.
  std::string otlp_endpoint;
  std::string otlp_headers;                  // "key=value,..." sent with each export
  std::string otlp_service_name = "strata";  // the service.name resource attribute
  int64_t otlp_max_queue_spans = 4096;       // spans waiting for export at most (more are dropped)

  // Lifecycle and logs.
  double drain_grace_seconds = 30;
  std::string log_level = "info";
  std::string log_format = "text";  // "text" or "json"
  bool log_prompts = false;         // prompt text in debug logs (off: privacy)
};

// One setting, for --help and the docs test.
struct SettingInfo {
  std::string name;  // the config-file name: "max_batch_size"
  std::string flag;  // "--max-batch-size"
  std::string env;   // "STRATA_MAX_BATCH_SIZE"
  std::string default_value;
  std::string help;
};

// Every setting, in --help order (also "config").
std::vector<SettingInfo> ListSettings();

// `--help` text.
std::string ServerUsage();

// Reads the configuration. `args` are argv[1..]; `getenv` looks up one environment variable
// (nullopt when unset); `read_file` reads the config file. INVALID_ARGUMENT naming the source
// ("--grpc-port", "STRATA_GRPC_PORT", "server.conf:3") and the setting for anything malformed
// or out of range, and when --model is missing. `*help` is set (and nothing else checked) when
// the arguments ask for --help.
StatusOr<ServerConfig> LoadServerConfig(
    const std::vector<std::string>& args,
    const std::function<std::optional<std::string>(const std::string&)>& getenv,
    const std::function<StatusOr<std::string>(const std::string&)>& read_file, bool* help);

// The same, reading the process's environment and files.
StatusOr<ServerConfig> LoadServerConfig(int argc, char** argv, bool* help);

}  // namespace strata::server
