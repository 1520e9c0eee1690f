// CacheObserver: what the response cache reports, for metrics (the server adapts it to its
// Prometheus registry; the cache module does not depend on metrics).
//
// Thread rules: called from any thread, possibly concurrently; implementations must be cheap
// and must not block (some calls come from the engine thread).
#pragma once

#include <cstdint>
#include <string_view>

namespace strata::cache {

enum class LookupResult { kHit, kMiss, kError };

class CacheObserver {
 public:
  virtual ~CacheObserver() = default;
  // One lookup of `cache` ("response": the exact key; "semantic": a similar text's answer) in a
  // tier ("l1", "l2", or "inflight": joining an identical request already being computed), how
  // it ended and how long it took. A semantic lookup that finds no similar text is a miss in
  // "l1" (the index is in-process); one whose embedding failed is an error there.
  virtual void OnLookup(std::string_view cache, std::string_view tier, LookupResult result,
                        double seconds) = 0;
  // Completion tokens a request got without computing them (a stored answer or a join).
  virtual void OnTokensServed(std::string_view cache, int64_t tokens) = 0;
  // A tier failed (Get or Put); `what` says how. Logging is rate-limited by the observer.
  virtual void OnTierError(std::string_view tier, std::string_view what) = 0;
};

}  // namespace strata::cache
