// RedisResponseStore: the shared tier (L2) of the response cache, in a Redis server every
// replica reaches (hiredis, the C client). Needs Redis 7.0 or later (EXPIRE ... NX / GT).
//
// Keys, all under `key_prefix` (see kRedis* below):
//   <prefix><ResponseKey>     an entry: EncodeCachedResponse bytes, SET with its TTL (PX), so
//                             Redis expires it itself.
//   <prefix>tag:<tag>         index sets: the full Redis keys of the entries stored with that
//   <prefix>ns:<namespace>    tag / in that namespace ("ns:" alone for the default namespace).
//                             Written in the same MULTI/EXEC as the entry, and their expiry is
//                             raised to the entry's TTL, so a set outlives none of its entries
//                             by more than that and vanishes with the last of them. A set may
//                             name entries that already expired or were dropped with another tag.
//   <prefix>purge:<random>    an index set while Invalidate works through it (it keeps the
//                             set's expiry, so one left by a failed call still vanishes).
//   <prefix>epoch             the cache epoch (RedisInvalidationBus), never deleted here.
//
// Invalidate(tag or namespace) renames the index set aside (so an entry stored meanwhile is
// indexed afresh, for the next invalidation, not lost with this one), then unlinks its members
// in batches (SSCAN ... COUNT 500) and the set; it returns the set's size. An index key that is
// not a set is deleted and reported as DATA_LOSS. Invalidate(all) and Clear delete every key
// under the prefix except the epoch (SCAN + UNLINK); Invalidate(all) returns how many of them
// were entries. The epoch stays on purpose: it is the replicas' shared counter, not an entry;
// setting it back to 0 would make later IncrementEpoch calls hand out epochs that replicas
// already used, whose entries they may still hold in their in-process tier.
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
#include <string_view>
#include <vector>

#include "strata/cache/response_store.h"

struct redisContext;
struct redisReply;

namespace strata::cache {

// The key families under a prefix (above). The epoch key is shared with RedisInvalidationBus.
inline constexpr std::string_view kRedisTagIndex = "tag:";
inline constexpr std::string_view kRedisNamespaceIndex = "ns:";
inline constexpr std::string_view kRedisPurgeIndex = "purge:";
inline constexpr std::string_view kRedisEpochKey = "epoch";

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
  Status Put(const std::string& key, const CachedResponse& value, std::chrono::seconds ttl,
             const EntryLabels& labels) override;
  // Each round trip is bounded by `timeout`; a large selection takes one per 500 entries.
  StatusOr<int64_t> Invalidate(const CacheSelector& selector) override;
  Status Clear() override;            // every key under the prefix but the epoch (SCAN + UNLINK)
  StoreStats stats() const override;  // entries under the prefix are not counted: {0, 0}

 private:
  // A connected context, or UNAVAILABLE (down, or within retry_after of the last failure).
  StatusOr<redisContext*> Acquire();
  // Returns `ctx` to the pool, or frees it when `broken` (and starts the retry period).
  void Release(redisContext* ctx, bool broken);
  // Releases `ctx` after `command` got `reply` (null: the connection failed) and returns the
  // UNAVAILABLE that reports it.
  Status Fail(redisContext* ctx, std::string_view command, const redisReply* reply);
  // Invalidate(tag or namespace): the index set `index`'s members and the set.
  StatusOr<int64_t> DropIndexed(const std::string& index);
  // Invalidate(all) and Clear: every key under the prefix but the epoch; returns the entries.
  StatusOr<int64_t> DropAll();

  RedisOptions options_;
  std::mutex mutex_;
  std::condition_variable available_;
  std::vector<redisContext*> idle_;
  int open_ = 0;  // connections handed out or idle
  std::chrono::steady_clock::time_point down_until_{};
};

}  // namespace strata::cache
