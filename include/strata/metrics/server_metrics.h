// ServerMetrics: every metric the server exports, in one Prometheus registry, recorded where
// the facts happen (docs/metrics.md lists them).
//
// Latencies go into both a histogram (`strata_<what>_seconds`, aggregatable across replicas;
// buckets from 0.5 ms to 5 min so one layout serves CPU and GPU servers) and a summary with
// quantiles 0.5/0.9/0.95/0.99 over a sliding window (`strata_<what>_quantiles_seconds`, what
// an operator reads directly). A word before the unit keeps the two families apart; it is not
// "_summary" because promtool's linter rejects a summary whose name contains its type.
//
// The module depends on `common` only: callers translate their own types into the plain
// records below (the server does it for the engine's usage, timing and step statistics).
//
// Thread rules: every method is thread-safe (prometheus-cpp metrics are); ObserveStep is meant
// for one thread (it turns the engine's running totals into counter increments).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace prometheus {
class Collectable;
class Registry;
class Counter;
class Gauge;
class Histogram;
class Summary;
template <typename T>
class Family;
}  // namespace prometheus

namespace strata::metrics {

// One finished request. Seconds are from its submission; a negative value means the request
// never reached that stage (e.g. cancelled while queued), and is not observed.
struct RequestRecord {
  std::string finish_reason;  // "stop", "length", "cancelled", "error"
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_prompt_tokens = 0;
  double queue_seconds = -1;
  double time_to_first_token_seconds = -1;
  double e2e_seconds = -1;
};

// The engine after one step. The totals are running totals since start; ServerMetrics adds
// their growth to its counters.
struct StepRecord {
  int64_t running = 0;
  int64_t waiting = 0;  // queued + waiting in the scheduler
  int64_t batch_sequences = 0;
  int64_t batch_tokens = 0;
  double kv_usage_ratio = 0;    // used blocks / all blocks
  int64_t kv_free_blocks = 0;   // blocks no sequence holds (cached ones included)
  int64_t kv_total_blocks = 0;  // the pool's size
  int64_t preemptions_total = 0;
  int64_t prefix_queries_total = 0;  // prompt blocks looked up
  int64_t prefix_hits_total = 0;     // of which found
  double busy_seconds_total = 0;     // in steps that ran a batch
  // Speculative decoding ("" proposer: off): drafts verified, their tokens, the tokens
  // accepted, and verifications by accepted draft tokens (index = count).
  std::string proposer;
  int64_t speculative_verifications_total = 0;
  int64_t speculative_proposed_total = 0;
  int64_t speculative_accepted_total = 0;
  std::vector<int64_t> speculative_accepted_lengths;
};

struct BuildInfo {
  std::string version;
  std::string commit;
  std::string backend;  // "cpu", "cuda"
  std::string model;    // the model's name
};

class ServerMetrics {
 public:
  // `summary_window`: how far back the summaries' quantiles look.
  explicit ServerMetrics(const BuildInfo& build,
                         std::chrono::seconds summary_window = std::chrono::seconds(600));
  ~ServerMetrics();

  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // A request ended (any reason): counters, and the latencies it reached.
  void ObserveRequest(const RequestRecord& request);
  // A gap between two tokens of one request.
  void ObserveInterTokenLatency(double seconds);
  // `n` tokens generated now (for the tokens-per-second gauge and the counter).
  void CountGeneratedTokens(int64_t n);
  // A request refused or failed with a gRPC status code name ("INVALID_ARGUMENT", ...).
  void CountError(std::string_view code);
  // The engine's state after a step.
  void ObserveStep(const StepRecord& step);

  // Response-cache facts; `cache` is "response" (or "semantic"), `tier` "l1", "l2" or
  // "inflight", `result` "hit", "miss" or "error".
  void ObserveCacheLookup(std::string_view cache, std::string_view tier, std::string_view result,
                          double seconds);
  void CountCacheTokensServed(std::string_view cache, int64_t tokens);
  void CountCacheError(std::string_view cache, std::string_view tier);
  void SetCacheSize(std::string_view cache, std::string_view tier, int64_t entries, int64_t bytes);

  // Embedding facts (--embedding-model). A call of the Embed RPC or /v1/embeddings ended with
  // `code` (a gRPC status name, "OK" included; `transport` "grpc" or "http"); an OK one also
  // counts its texts and tokens and observes its latency. A pass is one encoder run of `texts`
  // texts, however many calls they came from.
  void ObserveEmbeddingCall(std::string_view transport, std::string_view code, int64_t texts,
                            int64_t tokens, double seconds);
  void ObserveEmbeddingPass(int64_t texts);

  // API-key facts (--api-keys-file), by the key's name (never the key): a call admitted, the
  // prompt and completion tokens a generation call used, a call refused by a limit (`limit`:
  // "requests", "tokens" or "streams").
  void CountKeyRequest(std::string_view key);
  void CountKeyTokens(std::string_view key, int64_t prompt_tokens, int64_t completion_tokens);
  void CountKeyRefusal(std::string_view key, std::string_view limit);

  // Trace spans by what became of them: "exported", "dropped" (the export queue was full) or
  // "failed" (the collector did not take them).
  void CountTraceSpans(std::string_view result, int64_t spans);

  // Batch jobs (--jobs-db): jobs per state ("in_progress", "completed", ...), and lines that
  // ended with a result ("completed" or "failed").
  void SetBatchJobs(std::string_view state, int64_t jobs);
  void CountBatchLines(std::string_view result);

  // Client connections a port ("grpc" or "http") holds now, and how many new ones found it at
  // --max-connections and waited in the listen backlog.
  void SetConnections(std::string_view port, int64_t open);
  void CountConnectionsFull(std::string_view port);

  // The exposition in Prometheus' text format (what /metrics serves): the registry's metrics,
  // then the process's own (process_* and the C heap, read now).
  std::string Serialize() const;
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  // What an exposer collects, in Serialize's order: the registry, then the process collector.
  std::vector<std::weak_ptr<prometheus::Collectable>> collectables() const;

 private:
  struct Latency {
    prometheus::Histogram* histogram;
    prometheus::Summary* summary;
    void Observe(double seconds) const;
  };
  Latency AddLatency(const std::string& what, const std::string& help);
  void UpdateTokensPerSecond(int64_t n);
  void UpdateTokensPerSecondLocked(int64_t n, std::chrono::steady_clock::time_point now);
  void ObserveSpeculationLocked(const StepRecord& step);

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Collectable> process_;  // ProcessCollector
  std::chrono::seconds summary_window_;

  Latency ttft_{};
  Latency itl_{};
  Latency e2e_{};
  Latency queue_{};
  Latency prefill_{};
  prometheus::Counter* prompt_tokens_ = nullptr;
  prometheus::Counter* generation_tokens_ = nullptr;
  prometheus::Counter* preemptions_ = nullptr;
  prometheus::Counter* prefix_queries_ = nullptr;
  prometheus::Counter* prefix_hits_ = nullptr;
  prometheus::Counter* engine_busy_ = nullptr;
  prometheus::Family<prometheus::Counter>* requests_ = nullptr;        // {finish_reason}
  prometheus::Family<prometheus::Counter>* errors_ = nullptr;          // {code}
  prometheus::Family<prometheus::Counter>* cache_requests_ = nullptr;  // {cache, tier, result}
  prometheus::Family<prometheus::Histogram>* cache_lookup_ = nullptr;  // {cache, tier}
  prometheus::Family<prometheus::Counter>* cache_tokens_ = nullptr;    // {cache}
  prometheus::Family<prometheus::Counter>* cache_errors_ = nullptr;    // {cache, tier}
  prometheus::Family<prometheus::Gauge>* cache_entries_ = nullptr;     // {cache, tier}
  prometheus::Family<prometheus::Gauge>* cache_bytes_ = nullptr;       // {cache, tier}

  // Embeddings; requests by {transport, code}.
  prometheus::Family<prometheus::Counter>* key_requests_ = nullptr;      // {key}
  prometheus::Family<prometheus::Counter>* key_tokens_ = nullptr;        // {key, kind}
  prometheus::Family<prometheus::Counter>* key_refusals_ = nullptr;      // {key, limit}
  prometheus::Family<prometheus::Counter>* trace_spans_ = nullptr;       // {result}
  prometheus::Family<prometheus::Gauge>* batch_jobs_ = nullptr;          // {state}
  prometheus::Family<prometheus::Counter>* batch_lines_ = nullptr;       // {result}
  prometheus::Family<prometheus::Gauge>* connections_ = nullptr;         // {port}
  prometheus::Family<prometheus::Counter>* connections_full_ = nullptr;  // {port}
  prometheus::Family<prometheus::Counter>* embedding_requests_ = nullptr;
  prometheus::Counter* embedding_texts_ = nullptr;
  prometheus::Counter* embedding_tokens_ = nullptr;
  prometheus::Histogram* embedding_batch_texts_ = nullptr;
  Latency embedding_{};

  prometheus::Gauge* running_ = nullptr;
  prometheus::Gauge* waiting_ = nullptr;
  prometheus::Gauge* kv_usage_ = nullptr;
  prometheus::Gauge* kv_free_blocks_ = nullptr;
  prometheus::Gauge* kv_total_blocks_ = nullptr;
  prometheus::Gauge* batch_size_ = nullptr;
  prometheus::Gauge* tokens_per_second_ = nullptr;
  prometheus::Histogram* iteration_tokens_ = nullptr;

  // Speculative decoding, by {proposer}.
  prometheus::Family<prometheus::Counter>* spec_verifications_ = nullptr;
  prometheus::Family<prometheus::Counter>* spec_proposed_ = nullptr;
  prometheus::Family<prometheus::Counter>* spec_accepted_ = nullptr;
  prometheus::Family<prometheus::Histogram>* spec_accepted_length_ = nullptr;
  prometheus::Family<prometheus::Histogram>* spec_tokens_per_step_ = nullptr;

  std::mutex mutex_;  // guards what follows
  StepRecord last_step_;
  // Generated tokens per second over the last few seconds: (time, tokens) entries, and their
  // sum.
  std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> recent_;
  int64_t recent_tokens_ = 0;
};

}  // namespace strata::metrics
