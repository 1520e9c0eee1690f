// RedisResponseStore: the shared tier (L2) of the response cache, in a Redis server every
// replica reaches (hiredis, the C client). Values are EncodeCachedResponse bytes under
// "<key_prefix><ResponseKey>", set with their TTL (SET ... PX), so Redis expires them itself.
//
// Failure behaviour: every call is bounded by `timeout` (connect and each command); a failed
// call returns UNAVAILABLE (the caller serves the request uncached), drops the connection, and
// no new connection is tried for `retry_after`, so a Redis that is down costs one timeout per
// retry period, not one per request. A value that does not decode is deleted and reported as
// DATA_LOSS.
//
// Thread rules: any thread; connections come from a small pool (one per concurrent caller, at
// most `max_connections`; beyond that callers wait for one).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "strata/cache/response_store.h"

struct redisContext;

namespace strata::cache {

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::chrono::milliseconds timeout{50};
  std::chrono::milliseconds retry_after{1000};
  std::string key_prefix = "strata:";
  int max_connections = 8;
};

class RedisResponseStore final : public ResponseStore {
 public:
  explicit RedisResponseStore(RedisOptions options);
  ~RedisResponseStore() override;
  RedisResponseStore(const RedisResponseStore&) = delete;
  RedisResponseStore& operator=(const RedisResponseStore&) = delete;

  std::string_view tier() const override { return "l2"; }
  bool blocking() const override { return true; }
  StatusOr<CachedResponse> Get(const std::string& key) override;
  Status Put(const std::string& key, const CachedResponse& value,
             std::chrono::seconds ttl) override;
  Status Clear() override;            // deletes every key under the prefix (SCAN + UNLINK)
  StoreStats stats() const override;  // entries under the prefix are not counted: {0, 0}

 private:
  // A connected context, or UNAVAILABLE (down, or within retry_after of the last failure).
  StatusOr<redisContext*> Acquire();
  // Returns `ctx` to the pool, or frees it when `broken` (and starts the retry period).
  void Release(redisContext* ctx, bool broken);

  RedisOptions options_;
  std::mutex mutex_;
  std::condition_variable available_;
  std::vector<redisContext*> idle_;
  int open_ = 0;  // connections handed out or idle
  std::chrono::steady_clock::time_point down_until_{};
};

}  // namespace strata::cache
