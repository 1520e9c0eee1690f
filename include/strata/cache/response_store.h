// ResponseStore: one tier of the response cache (in-process memory, or a shared store such as
// Redis), keyed by ResponseKey. CachingSubmitter consults its tiers in order.
//
// Thread rules: every method may be called from any thread concurrently. Get and Put may block
// (a network tier bounds that with its own timeouts) but are never called on the engine thread
// by CachingSubmitter for a tier that says it blocks.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "strata/cache/cache_selector.h"
#include "strata/cache/cached_response.h"
#include "strata/common/status.h"

namespace strata::cache {

struct StoreStats {
  int64_t entries = 0;
  int64_t bytes = 0;
};

class ResponseStore {
 public:
  virtual ~ResponseStore() = default;

  // The tier's label in metrics and logs: "l1", "l2".
  virtual std::string_view tier() const = 0;

  // True when calls may wait on the network: CachingSubmitter then never calls Put on the
  // engine's thread (it hands stores to its writer thread).
  virtual bool blocking() const { return false; }

  // The entry, NOT_FOUND for a miss (or an expired entry), another error when the tier failed
  // (the caller serves the request uncached and counts it).
  virtual StatusOr<CachedResponse> Get(const std::string& key) = 0;

  // Stores `value` for at most `ttl` (> 0), labelled with `labels` so that Invalidate can
  // select it. An entry the tier cannot hold (larger than the tier) is not stored (OK). An
  // error means the tier failed.
  virtual Status Put(const std::string& key, const CachedResponse& value, std::chrono::seconds ttl,
                     const EntryLabels& labels) = 0;

  // Drops the entries `selector` selects; returns how many were found (a shared tier may count
  // entries that had already expired). An error means the tier failed part way.
  virtual StatusOr<int64_t> Invalidate(const CacheSelector& selector) = 0;

  // Drops every entry.
  virtual Status Clear() = 0;

  virtual StoreStats stats() const = 0;
};

}  // namespace strata::cache
