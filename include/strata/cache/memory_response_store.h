// MemoryResponseStore: the in-process tier (L1) of the response cache: byte-bounded, least
// recently used entries evicted first, each entry expiring after its TTL.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "strata/cache/response_store.h"

namespace strata::cache {

class MemoryResponseStore final : public ResponseStore {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // `max_bytes` bounds CachedResponseBytes() + key sizes of the entries held. `clock` (tests)
  // defaults to steady_clock::now.
  explicit MemoryResponseStore(size_t max_bytes, Clock clock = nullptr);

  std::string_view tier() const override { return "l1"; }
  StatusOr<CachedResponse> Get(const std::string& key) override;
  Status Put(const std::string& key, const CachedResponse& value, std::chrono::seconds ttl,
             const EntryLabels& labels) override;
  // Scans every entry: O(entries), under the tier's lock.
  StatusOr<int64_t> Invalidate(const CacheSelector& selector) override;
  Status Clear() override;
  StoreStats stats() const override;

 private:
  struct Entry {
    std::string key;
    CachedResponse value;
    EntryLabels labels;
    size_t bytes = 0;
    std::chrono::steady_clock::time_point expires;
  };
  using List = std::list<Entry>;  // most recently used first

  void EraseLocked(List::iterator it);

  const size_t max_bytes_;
  const Clock clock_;
  mutable std::mutex mutex_;
  List lru_;
  std::unordered_map<std::string, List::iterator> index_;
  size_t bytes_ = 0;
};

}  // namespace strata::cache
