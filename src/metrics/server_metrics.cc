#include "strata/metrics/server_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/summary.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <iterator>
#include <utility>

#include "process_collector.h"

namespace strata::metrics {
namespace {

using Clock = std::chrono::steady_clock;

// Tokens-per-second gauge window.
constexpr auto kRateWindow = std::chrono::seconds(10);

// From 0.5 ms (a GPU's inter-token gap) to 5 minutes (a long CPU request).
prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.15,  0.25, 0.5,
          0.75,   1.0,   2.5,    5.0,   7.5,  10.0,  20.0, 30.0,  60.0, 120.0, 300.0};
}

prometheus::Summary::Quantiles Quantiles() {
  // (quantile, allowed rank error)
  return {{0.5, 0.01}, {0.9, 0.005}, {0.95, 0.002}, {0.99, 0.001}};
}

}  // namespace

void ServerMetrics::Latency::Observe(double seconds) const {
  histogram->Observe(seconds);
  summary->Observe(seconds);
}

ServerMetrics::Latency ServerMetrics::AddLatency(const std::string& what, const std::string& help) {
  Latency l;
  l.histogram = &prometheus::BuildHistogram()
                     .Name("strata_" + what + "_seconds")
                     .Help(help)
                     .Register(*registry_)
                     .Add({}, LatencyBuckets());
  l.summary = &prometheus::BuildSummary()
                   .Name("strata_" + what + "_quantiles_seconds")
                   .Help(help + " (quantiles over a sliding window)")
                   .Register(*registry_)
                   .Add({}, Quantiles(), summary_window_, 5);
  return l;
}

ServerMetrics::ServerMetrics(const BuildInfo& build, std::chrono::seconds summary_window)
    : registry_(std::make_shared<prometheus::Registry>()),
      process_(std::make_shared<ProcessCollector>()),
      summary_window_(summary_window) {
  ttft_ = AddLatency("time_to_first_token", "Time from a request's arrival to its first token");
  itl_ = AddLatency("inter_token_latency", "Time between two tokens of one request");
  e2e_ = AddLatency("e2e_request_latency", "Time from a request's arrival to its end");
  queue_ = AddLatency("request_queue_time", "Time a request waited before its first step");
  prefill_ =
      AddLatency("request_prefill_time", "Time from a request's first step to its first token");

  auto counter = [&](const std::string& name, const std::string& help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(*registry_).Add({});
  };
  prompt_tokens_ = counter("strata_prompt_tokens_total", "Prompt tokens of finished requests");
  generation_tokens_ = counter("strata_generation_tokens_total", "Tokens generated");
  preemptions_ = counter("strata_preemptions_total", "Sequences preempted for KV blocks");
  prefix_queries_ =
      counter("strata_prefix_cache_queries_total", "Prompt KV blocks looked up in the cache");
  prefix_hits_ = counter("strata_prefix_cache_hits_total", "Prompt KV blocks found in the cache");
  engine_busy_ = counter("strata_engine_busy_seconds_total",
                         "Seconds the engine spent in steps that ran a batch (its utilisation: "
                         "the rate of this counter)");
  requests_ = &prometheus::BuildCounter()
                   .Name("strata_requests_total")
                   .Help("Requests ended, by finish reason")
                   .Register(*registry_);
  errors_ = &prometheus::BuildCounter()
                 .Name("strata_request_errors_total")
                 .Help("Requests refused or failed, by gRPC status code")
                 .Register(*registry_);
  key_requests_ = &prometheus::BuildCounter()
                       .Name("strata_api_key_requests_total")
                       .Help("Calls admitted, by API key name")
                       .Register(*registry_);
  key_tokens_ =
      &prometheus::BuildCounter()
           .Name("strata_api_key_tokens_total")
           .Help("Tokens of generation calls, by API key name and kind (prompt, completion)")
           .Register(*registry_);
  key_refusals_ = &prometheus::BuildCounter()
                       .Name("strata_api_key_rate_limited_total")
                       .Help(
                           "Calls refused by a per-key limit, by API key name and limit "
                           "(requests, tokens, streams)")
                       .Register(*registry_);

  trace_spans_ = &prometheus::BuildCounter()
                      .Name("strata_trace_spans_total")
                      .Help("Trace spans, by result (exported, dropped, failed)")
                      .Register(*registry_);

  batch_jobs_ = &prometheus::BuildGauge()
                     .Name("strata_batch_jobs")
                     .Help("Batch jobs, by state")
                     .Register(*registry_);
  batch_lines_ = &prometheus::BuildCounter()
                      .Name("strata_batch_lines_total")
                      .Help("Batch lines that ended with a result, by result (completed, failed)")
                      .Register(*registry_);
  connections_ = &prometheus::BuildGauge()
                      .Name("strata_connections")
                      .Help("Client connections a port holds now, by port (grpc, http)")
                      .Register(*registry_);
  connections_full_ =
      &prometheus::BuildCounter()
           .Name("strata_connections_full_total")
           .Help(
               "New connections that found their port at --max-connections and waited in the "
               "listen backlog, by port (grpc, http)")
           .Register(*registry_);

  cache_requests_ = &prometheus::BuildCounter()
                         .Name("strata_cache_requests_total")
                         .Help("Response-cache lookups, by cache, tier and result")
                         .Register(*registry_);
  cache_lookup_ = &prometheus::BuildHistogram()
                       .Name("strata_cache_lookup_seconds")
                       .Help("Time of one response-cache lookup, by cache and tier")
                       .Register(*registry_);
  cache_tokens_ = &prometheus::BuildCounter()
                       .Name("strata_cache_tokens_served_total")
                       .Help("Completion tokens served from a cache instead of computed")
                       .Register(*registry_);
  cache_errors_ = &prometheus::BuildCounter()
                       .Name("strata_cache_errors_total")
                       .Help("Cache tier failures (the request was served uncached)")
                       .Register(*registry_);
  cache_entries_ = &prometheus::BuildGauge()
                        .Name("strata_cache_entries")
                        .Help("Entries held, by cache and tier")
                        .Register(*registry_);
  cache_bytes_ = &prometheus::BuildGauge()
                      .Name("strata_cache_bytes")
                      .Help("Bytes held, by cache and tier")
                      .Register(*registry_);

  embedding_requests_ = &prometheus::BuildCounter()
                             .Name("strata_embedding_requests_total")
                             .Help("Embedding calls ended, by transport and gRPC status code")
                             .Register(*registry_);
  embedding_texts_ = counter("strata_embedding_texts_total", "Texts embedded");
  embedding_tokens_ =
      counter("strata_embedding_tokens_total", "Tokens of the texts embedded ([CLS]/[SEP] in)");
  embedding_batch_texts_ =
      &prometheus::BuildHistogram()
           .Name("strata_embedding_batch_texts")
           .Help("Texts per embedding encoder pass (concurrent calls share passes)")
           .Register(*registry_)
           .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64, 128, 256, 512,
                                                            1024, 2048, 4096});
  embedding_ =
      AddLatency("embedding", "Time of one embedding call, from its arrival to its answer");

  auto gauge = [&](const std::string& name, const std::string& help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(*registry_).Add({});
  };
  running_ = gauge("strata_requests_running", "Requests being generated");
  waiting_ = gauge("strata_requests_waiting", "Requests waiting for their first step");
  kv_usage_ = gauge("strata_kv_cache_usage_ratio", "KV cache blocks in use over all blocks");
  kv_free_blocks_ = gauge("strata_kv_cache_free_blocks",
                          "KV cache blocks no request holds (prefix-cached ones included)");
  kv_total_blocks_ = gauge("strata_kv_cache_blocks", "KV cache blocks in the pool");
  batch_size_ = gauge("strata_batch_size", "Sequences in the last engine step");
  tokens_per_second_ = gauge("strata_generation_tokens_per_second",
                             "Tokens generated per second over the last 10 seconds");
  iteration_tokens_ =
      &prometheus::BuildHistogram()
           .Name("strata_iteration_tokens")
           .Help("Tokens computed per engine step")
           .Register(*registry_)
           .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64, 128, 256, 512,
                                                            1024, 2048, 4096, 8192});
  prometheus::BuildGauge()
      .Name("strata_build_info")
      .Help("Version and configuration of this server (always 1)")
      .Register(*registry_)
      .Add({{"version", build.version},
            {"commit", build.commit},
            {"backend", build.backend},
            {"model", build.model}})
      .Set(1);

  auto family = [&](const std::string& name, const std::string& help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(*registry_);
  };
  spec_verifications_ = family("strata_speculative_verifications_total",
                               "Speculative drafts verified (one per sequence and step), by "
                               "proposer");
  spec_proposed_ =
      family("strata_speculative_proposed_tokens_total", "Draft tokens verified, by proposer");
  spec_accepted_ = family("strata_speculative_accepted_tokens_total",
                          "Draft tokens accepted (kept as generated), by proposer");
  spec_accepted_length_ = &prometheus::BuildHistogram()
                               .Name("strata_speculative_acceptance_length")
                               .Help("Draft tokens accepted per verification, by proposer")
                               .Register(*registry_);
  spec_tokens_per_step_ = &prometheus::BuildHistogram()
                               .Name("strata_speculative_tokens_per_step")
                               .Help(
                                   "Tokens a sequence gained in one speculative step (the "
                                   "accepted draft tokens and the one sampled after them), "
                                   "by proposer")
                               .Register(*registry_);
}

ServerMetrics::~ServerMetrics() = default;

void ServerMetrics::ObserveRequest(const RequestRecord& r) {
  requests_->Add({{"finish_reason", r.finish_reason}}).Increment();
  prompt_tokens_->Increment(static_cast<double>(r.prompt_tokens));
  if (r.queue_seconds >= 0) queue_.Observe(r.queue_seconds);
  if (r.time_to_first_token_seconds >= 0) {
    ttft_.Observe(r.time_to_first_token_seconds);
    if (r.queue_seconds >= 0) {
      prefill_.Observe(std::max(0.0, r.time_to_first_token_seconds - r.queue_seconds));
    }
  }
  if (r.e2e_seconds >= 0) e2e_.Observe(r.e2e_seconds);
}

void ServerMetrics::ObserveInterTokenLatency(double seconds) { itl_.Observe(seconds); }

void ServerMetrics::CountGeneratedTokens(int64_t n) {
  if (n <= 0) return;
  generation_tokens_->Increment(static_cast<double>(n));
  UpdateTokensPerSecond(n);
}

void ServerMetrics::UpdateTokensPerSecond(int64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  UpdateTokensPerSecondLocked(n, Clock::now());
}

void ServerMetrics::UpdateTokensPerSecondLocked(int64_t n, Clock::time_point now) {
  if (n > 0) {
    recent_.emplace_back(now, n);
    recent_tokens_ += n;
  }
  while (!recent_.empty() && now - recent_.front().first > kRateWindow) {
    recent_tokens_ -= recent_.front().second;
    recent_.pop_front();
  }
  tokens_per_second_->Set(static_cast<double>(recent_tokens_) /
                          std::chrono::duration<double>(kRateWindow).count());
}

void ServerMetrics::CountError(std::string_view code) {
  errors_->Add({{"code", std::string(code)}}).Increment();
}

void ServerMetrics::CountKeyRequest(std::string_view key) {
  key_requests_->Add({{"key", std::string(key)}}).Increment();
}

void ServerMetrics::CountKeyTokens(std::string_view key, int64_t prompt_tokens,
                                   int64_t completion_tokens) {
  key_tokens_->Add({{"key", std::string(key)}, {"kind", "prompt"}})
      .Increment(static_cast<double>(prompt_tokens));
  key_tokens_->Add({{"key", std::string(key)}, {"kind", "completion"}})
      .Increment(static_cast<double>(completion_tokens));
}

void ServerMetrics::CountKeyRefusal(std::string_view key, std::string_view limit) {
  key_refusals_->Add({{"key", std::string(key)}, {"limit", std::string(limit)}}).Increment();
}

void ServerMetrics::CountTraceSpans(std::string_view result, int64_t spans) {
  trace_spans_->Add({{"result", std::string(result)}}).Increment(static_cast<double>(spans));
}

void ServerMetrics::SetBatchJobs(std::string_view state, int64_t jobs) {
  batch_jobs_->Add({{"state", std::string(state)}}).Set(static_cast<double>(jobs));
}

void ServerMetrics::CountBatchLines(std::string_view result) {
  batch_lines_->Add({{"result", std::string(result)}}).Increment();
}

void ServerMetrics::SetConnections(std::string_view port, int64_t open) {
  connections_->Add({{"port", std::string(port)}}).Set(static_cast<double>(open));
}

void ServerMetrics::CountConnectionsFull(std::string_view port) {
  connections_full_->Add({{"port", std::string(port)}}).Increment();
}

void ServerMetrics::ObserveStep(const StepRecord& step) {
  running_->Set(static_cast<double>(step.running));
  waiting_->Set(static_cast<double>(step.waiting));
  kv_usage_->Set(step.kv_usage_ratio);
  kv_free_blocks_->Set(static_cast<double>(step.kv_free_blocks));
  kv_total_blocks_->Set(static_cast<double>(step.kv_total_blocks));
  batch_size_->Set(static_cast<double>(step.batch_sequences));
  if (step.batch_tokens > 0) iteration_tokens_->Observe(static_cast<double>(step.batch_tokens));
  std::lock_guard<std::mutex> lock(mutex_);
  auto grow = [](prometheus::Counter* counter, int64_t now, int64_t before) {
    if (now > before) counter->Increment(static_cast<double>(now - before));
  };
  grow(preemptions_, step.preemptions_total, last_step_.preemptions_total);
  grow(prefix_queries_, step.prefix_queries_total, last_step_.prefix_queries_total);
  grow(prefix_hits_, step.prefix_hits_total, last_step_.prefix_hits_total);
  if (step.busy_seconds_total > last_step_.busy_seconds_total) {
    engine_busy_->Increment(step.busy_seconds_total - last_step_.busy_seconds_total);
  }
  if (!step.proposer.empty()) ObserveSpeculationLocked(step);
  last_step_ = step;
  // Lets the tokens-per-second gauge fall back to 0 once generation stops.
  UpdateTokensPerSecondLocked(0, Clock::now());
}

void ServerMetrics::ObserveSpeculationLocked(const StepRecord& step) {
  const prometheus::Labels labels = {{"proposer", step.proposer}};
  const bool same = last_step_.proposer == step.proposer;
  auto grow = [&](prometheus::Family<prometheus::Counter>* family, int64_t now, int64_t before) {
    if (now > before) family->Add(labels).Increment(static_cast<double>(now - before));
  };
  grow(spec_verifications_, step.speculative_verifications_total,
       same ? last_step_.speculative_verifications_total : 0);
  grow(spec_proposed_, step.speculative_proposed_total,
       same ? last_step_.speculative_proposed_total : 0);
  grow(spec_accepted_, step.speculative_accepted_total,
       same ? last_step_.speculative_accepted_total : 0);
  // A bucket at every count a draft can have: the histograms are exact.
  static const prometheus::Histogram::BucketBoundaries kCounts = [] {
    prometheus::Histogram::BucketBoundaries b;
    for (int i = 0; i <= 17; ++i) b.push_back(i);
    return b;
  }();
  prometheus::Histogram& length = spec_accepted_length_->Add(labels, kCounts);
  prometheus::Histogram& per_step = spec_tokens_per_step_->Add(labels, kCounts);
  const std::vector<int64_t>& now = step.speculative_accepted_lengths;
  const std::vector<int64_t>& before = last_step_.speculative_accepted_lengths;
  for (size_t n = 0; n < now.size(); ++n) {
    const int64_t was = same && n < before.size() ? before[n] : 0;
    for (int64_t i = was; i < now[n]; ++i) {
      length.Observe(static_cast<double>(n));
      per_step.Observe(static_cast<double>(n + 1));
    }
  }
}

std::vector<std::weak_ptr<prometheus::Collectable>> ServerMetrics::collectables() const {
  return {registry_, process_};
}

std::string ServerMetrics::Serialize() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  std::vector<prometheus::MetricFamily> process = process_->Collect();
  families.insert(families.end(), std::make_move_iterator(process.begin()),
                  std::make_move_iterator(process.end()));
  return prometheus::TextSerializer().Serialize(families);
}

void ServerMetrics::ObserveCacheLookup(std::string_view cache, std::string_view tier,
                                       std::string_view result, double seconds) {
  const std::string c(cache);
  const std::string t(tier);
  cache_requests_->Add({{"cache", c}, {"tier", t}, {"result", std::string(result)}}).Increment();
  // From 10 us (memory) to 1 s (a slow network tier).
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0};
  cache_lookup_->Add({{"cache", c}, {"tier", t}}, kBuckets).Observe(seconds);
}

void ServerMetrics::CountCacheTokensServed(std::string_view cache, int64_t tokens) {
  if (tokens > 0) {
    cache_tokens_->Add({{"cache", std::string(cache)}}).Increment(static_cast<double>(tokens));
  }
}

void ServerMetrics::CountCacheError(std::string_view cache, std::string_view tier) {
  cache_errors_->Add({{"cache", std::string(cache)}, {"tier", std::string(tier)}}).Increment();
}

void ServerMetrics::SetCacheSize(std::string_view cache, std::string_view tier, int64_t entries,
                                 int64_t bytes) {
  const prometheus::Labels labels = {{"cache", std::string(cache)}, {"tier", std::string(tier)}};
  cache_entries_->Add(labels).Set(static_cast<double>(entries));
  cache_bytes_->Add(labels).Set(static_cast<double>(bytes));
}

void ServerMetrics::ObserveEmbeddingCall(std::string_view transport, std::string_view code,
                                         int64_t texts, int64_t tokens, double seconds) {
  embedding_requests_->Add({{"transport", std::string(transport)}, {"code", std::string(code)}})
      .Increment();
  if (code != "OK") return;
  embedding_texts_->Increment(static_cast<double>(texts));
  embedding_tokens_->Increment(static_cast<double>(tokens));
  embedding_.Observe(seconds);
}

void ServerMetrics::ObserveEmbeddingPass(int64_t texts) {
  embedding_batch_texts_->Observe(static_cast<double>(texts));
}

}  // namespace strata::metrics
