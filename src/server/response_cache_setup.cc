#include "strata/server/response_cache_setup.h"

#include <string>

#include "strata/common/logging.h"

namespace strata::server {

CacheMetricsObserver::CacheMetricsObserver(metrics::ServerMetrics* metrics,
                                           const cache::ResponseStore* l1)
    : metrics_(metrics), l1_(l1) {}

void CacheMetricsObserver::OnLookup(std::string_view tier, cache::LookupResult result,
                                    double seconds) {
  const char* name = result == cache::LookupResult::kHit    ? "hit"
                     : result == cache::LookupResult::kMiss ? "miss"
                                                            : "error";
  metrics_->ObserveCacheLookup("response", tier, name, seconds);
  const cache::StoreStats stats = l1_->stats();
  metrics_->SetCacheSize("response", l1_->tier(), stats.entries, stats.bytes);
}

void CacheMetricsObserver::OnTokensServed(int64_t tokens) {
  metrics_->CountCacheTokensServed("response", tokens);
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
                                                           metrics::ServerMetrics* metrics) {
  auto rc = std::make_unique<ResponseCache>();
  rc->l1 = std::make_unique<cache::MemoryResponseStore>(
      static_cast<size_t>(config.response_cache_bytes));
  rc->observer = std::make_unique<CacheMetricsObserver>(metrics, rc->l1.get());
  std::vector<cache::ResponseStore*> tiers = {rc->l1.get()};
  if (!config.response_cache_redis.empty()) {
    STRATA_ASSIGN_OR_RETURN(auto endpoint, ParseHostPort(config.response_cache_redis));
    cache::RedisOptions redis;
    redis.host = endpoint.first;
    redis.port = endpoint.second;
    redis.timeout = std::chrono::milliseconds(config.response_cache_redis_timeout_ms);
    rc->l2 = std::make_unique<cache::RedisResponseStore>(std::move(redis));
    tiers.push_back(rc->l2.get());
  }
  cache::CachingOptions options;
  options.model_digest = std::move(model_digest);
  options.default_ttl = std::chrono::seconds(config.response_cache_ttl_seconds);
  rc->submitter = std::make_unique<cache::CachingSubmitter>(engine, std::move(tiers),
                                                            std::move(options), rc->observer.get());
  metrics->SetCacheSize("response", "l1", 0, 0);
  return rc;
}

}  // namespace strata::server
