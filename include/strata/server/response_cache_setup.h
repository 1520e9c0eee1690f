// The server's response cache (--response-cache): the in-process tier, the metrics adapter of
// the cache's observer, and the CachingSubmitter around the engine, built from the config.
//
// Thread rules: built once at start-up; afterwards the CachingSubmitter's rules apply.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "strata/cache/cache_observer.h"
#include "strata/cache/caching_submitter.h"
#include "strata/cache/memory_response_store.h"
#include "strata/cache/redis_invalidation_bus.h"
#include "strata/cache/redis_response_store.h"
#include "strata/cache/semantic_index.h"
#include "strata/common/status.h"
#include "strata/embedding/text_embedder.h"
#include "strata/metrics/server_metrics.h"
#include "strata/server/server_config.h"

namespace strata::server {

// Cache facts into ServerMetrics (cache="response"); a tier failure is also logged, at most
// once a minute per tier.
class CacheMetricsObserver final : public cache::CacheObserver {
 public:
  // `index`: null without a semantic cache.
  CacheMetricsObserver(metrics::ServerMetrics* metrics, const cache::ResponseStore* l1,
                       const cache::SemanticIndex* index);
  void OnLookup(std::string_view cache, std::string_view tier, cache::LookupResult result,
                double seconds) override;
  void OnTokensServed(std::string_view cache, int64_t tokens) override;
  void OnTierError(std::string_view tier, std::string_view what) override;

 private:
  metrics::ServerMetrics* metrics_;
  const cache::ResponseStore* l1_;
  const cache::SemanticIndex* index_;
  std::mutex log_mutex_;
  std::chrono::steady_clock::time_point last_log_{};
};

// Members are destroyed bottom up: the bus (which calls into the submitter) first.
struct ResponseCache {
  std::unique_ptr<cache::MemoryResponseStore> l1;
  std::unique_ptr<cache::RedisResponseStore> l2;         // null without --response-cache-redis
  std::unique_ptr<cache::SemanticIndex> semantic_index;  // null without --semantic-cache
  std::unique_ptr<CacheMetricsObserver> observer;
  std::unique_ptr<cache::CachingSubmitter> submitter;
  std::unique_ptr<cache::RedisInvalidationBus> bus;  // with l2: invalidations across replicas
};

// "host:port" -> (host, port); INVALID_ARGUMENT naming response_cache_redis otherwise.
StatusOr<std::pair<std::string, int>> ParseHostPort(const std::string& text);

// The response cache around `engine` for a model whose file digest is `model_digest`, with a
// semantic cache over `embedder` when config.semantic_cache (FAILED_PRECONDITION when it is
// null then):
// INVALID_ARGUMENT for a malformed --response-cache-redis (an unreachable Redis is not an
// error: requests are then served uncached until it answers).
StatusOr<std::unique_ptr<ResponseCache>> MakeResponseCache(const ServerConfig& config,
                                                           engine::RequestSubmitter* engine,
                                                           std::string model_digest,
                                                           metrics::ServerMetrics* metrics,
                                                           embedding::TextEmbedder* embedder);

}  // namespace strata::server
