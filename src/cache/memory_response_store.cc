#include "strata/cache/memory_response_store.h"

namespace strata::cache {

MemoryResponseStore::MemoryResponseStore(size_t max_bytes, Clock clock)
    : max_bytes_(max_bytes),
      clock_(clock ? std::move(clock) : [] { return std::chrono::steady_clock::now(); }) {}

StatusOr<CachedResponse> MemoryResponseStore::Get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = index_.find(key);
  if (found == index_.end()) return NotFoundError("no entry");
  List::iterator it = found->second;
  if (clock_() >= it->expires) {
    EraseLocked(it);
    return NotFoundError("entry expired");
  }
  lru_.splice(lru_.begin(), lru_, it);
  return it->value;
}

Status MemoryResponseStore::Put(const std::string& key, const CachedResponse& value,
                                std::chrono::seconds ttl, const EntryLabels& labels) {
  size_t bytes = CachedResponseBytes(value) + 2 * key.size() + labels.cache_namespace.size();
  for (const std::string& tag : labels.tags) bytes += sizeof(tag) + tag.size();
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto found = index_.find(key); found != index_.end()) EraseLocked(found->second);
  if (bytes > max_bytes_ || ttl.count() <= 0) return OkStatus();
  while (bytes_ + bytes > max_bytes_ && !lru_.empty()) EraseLocked(std::prev(lru_.end()));
  lru_.push_front(Entry{key, value, labels, bytes, clock_() + ttl});
  index_.emplace(key, lru_.begin());
  bytes_ += bytes;
  return OkStatus();
}

StatusOr<int64_t> MemoryResponseStore::Invalidate(const CacheSelector& selector) {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t removed = 0;
  for (auto it = lru_.begin(); it != lru_.end();) {
    const auto next = std::next(it);
    if (selector.Selects(it->labels)) {
      EraseLocked(it);
      ++removed;
    }
    it = next;
  }
  return removed;
}

Status MemoryResponseStore::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  lru_.clear();
  index_.clear();
  bytes_ = 0;
  return OkStatus();
}

StoreStats MemoryResponseStore::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return StoreStats{static_cast<int64_t>(index_.size()), static_cast<int64_t>(bytes_)};
}

void MemoryResponseStore::EraseLocked(List::iterator it) {
  bytes_ -= it->bytes;
  index_.erase(it->key);
  lru_.erase(it);
}

}  // namespace strata::cache
