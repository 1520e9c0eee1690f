#include "strata/server/response_cache_setup.h"

#include <string>

#include "strata/common/logging.h"
#include "strata/embedding/semantic_guard.h"

namespace strata::server {

CacheMetricsObserver::CacheMetricsObserver(metrics::ServerMetrics* metrics,
                                           const cache::ResponseStore* l1,
                                           const cache::SemanticIndex* index)
    : metrics_(metrics), l1_(l1), index_(index) {}

void CacheMetricsObserver::OnLookup(std::string_view cache, std::string_view tier,
                                    cache::LookupResult result, double seconds) {
  const char* name = result == cache::LookupResult::kHit    ? "hit"
                     : result == cache::LookupResult::kMiss ? "miss"
                                                            : "error";
  metrics_->ObserveCacheLookup(cache, tier, name, seconds);
  const cache::StoreStats stats = l1_->stats();
  metrics_->SetCacheSize("response", l1_->tier(), stats.entries, stats.bytes);
  if (index_ != nullptr) {
    const auto entries = static_cast<int64_t>(index_->size());
    // Each entry: its embedding twice (the graph's copy and the one kept for rebuilds).
    metrics_->SetCacheSize("semantic", "l1", entries,
                           entries * 2 * index_->dimension() * static_cast<int64_t>(sizeof(float)));
  }
}

void CacheMetricsObserver::OnTokensServed(std::string_view cache, int64_t tokens) {
  metrics_->CountCacheTokensServed(cache, tokens);
}

void CacheMetricsObserver::OnTierError(std::string_view tier, std::string_view what) {
  metrics_->CountCacheError("response", tier);
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(log_mutex_);
  if (now - last_log_ < std::chrono::minutes(1)) return;
  last_log_ = now;
  Log(LogLevel::kWarn, "response cache tier failed; requests are served uncached",
      {{"tier", std::string(tier)}, {"error", std::string(what)}});
}

StatusOr<std::pair<std::string, int>> ParseHostPort(const std::string& text) {
  const size_t colon = text.rfind(':');
  const std::string bad = "response_cache_redis must be host:port, got '" + text + "'";
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return InvalidArgumentError(bad);
  }
  int port = 0;
  for (size_t i = colon + 1; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9' || port > 65535) return InvalidArgumentError(bad);
    port = port * 10 + (text[i] - '0');
  }
  if (port < 1 || port > 65535) return InvalidArgumentError(bad);
  return std::make_pair(text.substr(0, colon), port);
}

StatusOr<std::unique_ptr<ResponseCache>> MakeResponseCache(const ServerConfig& config,
                                                           engine::RequestSubmitter* engine,
                                                           std::string model_digest,
                                                           metrics::ServerMetrics* metrics,
                                                           embedding::TextEmbedder* embedder) {
  if (config.semantic_cache && embedder == nullptr) {
    return FailedPreconditionError("semantic_cache needs an embedding model");
  }
  auto rc = std::make_unique<ResponseCache>();
  rc->l1 = std::make_unique<cache::MemoryResponseStore>(
      static_cast<size_t>(config.response_cache_bytes));
  cache::CachingOptions options;
  if (config.semantic_cache) {
    rc->semantic_index = std::make_unique<cache::SemanticIndex>(
        embedder->dimension(), static_cast<size_t>(config.semantic_cache_max_entries));
    options.semantic.embedder = embedder;
    options.semantic.index = rc->semantic_index.get();
    options.semantic.min_similarity = static_cast<float>(config.semantic_cache_threshold);
    // What embeddings blur (numbers, names, direction, negation, a swapped word) must agree.
    options.semantic.guard = [](std::string_view a, std::string_view b) {
      return embedding::SemanticGuardAllows(a, b);
    };
  }
  rc->observer =
      std::make_unique<CacheMetricsObserver>(metrics, rc->l1.get(), rc->semantic_index.get());
  std::vector<cache::ResponseStore*> tiers = {rc->l1.get()};
  if (!config.response_cache_redis.empty()) {
    STRATA_ASSIGN_OR_RETURN(auto endpoint, ParseHostPort(config.response_cache_redis));
    cache::RedisOptions redis;
    redis.host = endpoint.first;
    redis.port = endpoint.second;
    redis.timeout = std::chrono::milliseconds(config.response_cache_redis_timeout_ms);
    rc->l2 = std::make_unique<cache::RedisResponseStore>(redis);
    tiers.push_back(rc->l2.get());
    cache::RedisInvalidationBusOptions bus;
    bus.host = redis.host;
    bus.port = redis.port;
    bus.key_prefix = redis.key_prefix;
    rc->bus = std::make_unique<cache::RedisInvalidationBus>(std::move(bus));
    options.bus = rc->bus.get();
  }
  options.model_digest = std::move(model_digest);
  options.default_ttl = std::chrono::seconds(config.response_cache_ttl_seconds);
  rc->submitter = std::make_unique<cache::CachingSubmitter>(engine, std::move(tiers),
                                                            std::move(options), rc->observer.get());
  metrics->SetCacheSize("response", "l1", 0, 0);
  if (rc->semantic_index != nullptr) metrics->SetCacheSize("semantic", "l1", 0, 0);
  return rc;
}

}  // namespace strata::server
