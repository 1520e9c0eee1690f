// CachingSubmitter: a RequestSubmitter that answers deterministic requests from a response
// cache and otherwise passes them to the one it wraps (the Engine), so every transport gets
// caching without knowing about it.
//
// A request whose CachePolicy says cacheable is keyed (ResponseKey: model digest, epoch,
// namespace, prompt tokens, sampling fields). Then:
//   - an identical request already being computed: the new one joins it (single-flight) and
//     receives the same chunks from the start;
//   - an entry in a tier (checked in order; a hit in a later tier is copied into the earlier
//     ones): replayed as one chunk with every token, the text, the finish reason, usage and
//     timing, marked from_cache;
//   - otherwise it is submitted to the wrapped submitter; when it finishes with kStop or
//     kLength (not cancelled, not failed) its answer is stored in every tier (a blocking
//     tier's store is queued for this object's writer thread: the engine's thread never waits
//     on the network).
// Other requests go straight through. A tier that fails is counted and skipped: the request is
// served uncached, never failed because of the cache.
//
// Ids: streams this class creates get ids from 2^62 up (the Engine's count from 1), so Cancel
// knows which are its own; others go to the wrapped submitter. Cancelling a request that
// shares a computation detaches only that request (its stream ends kCancelled); the
// computation is cancelled when no request is left on it.
//
// Thread rules: Submit and Cancel from any thread. The wrapped submitter, the tiers and the
// observer must outlive this object, and the wrapped submitter must stop pushing (be stopped)
// before this object is destroyed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "strata/cache/cache_observer.h"
#include "strata/cache/response_store.h"
#include "strata/engine/request_submitter.h"

namespace strata::cache {

struct CachingOptions {
  std::string model_digest;                // Sha256Hex of the served model file
  std::chrono::seconds default_ttl{3600};  // an entry's lifetime; a request may shorten it
};

class CachingSubmitter final : public engine::RequestSubmitter {
 public:
  // `tiers`: fastest first (e.g. memory, then Redis); none of them blocks on the calling thread
  // for long (a network tier bounds its calls with timeouts).
  CachingSubmitter(engine::RequestSubmitter* inner, std::vector<ResponseStore*> tiers,
                   CachingOptions options, CacheObserver* observer);
  ~CachingSubmitter() override;

  StatusOr<std::shared_ptr<engine::RequestStream>> Submit(engine::Request request) override;
  void Cancel(engine::RequestId id) override;

  // Makes every earlier entry unreachable (the epoch is part of the key); returns the new one.
  uint64_t BumpEpoch();
  uint64_t epoch() const { return epoch_.load(); }
  // Drops every entry of every tier. OK, or the first tier's error.
  Status Clear();

  // Identical requests being computed now (tests).
  size_t flights_in_progress() const;

  static constexpr engine::RequestId kFirstId = engine::RequestId{1} << 62;
  // Stores waiting for a blocking tier at most; more are dropped (and counted as errors).
  static constexpr size_t kMaxPendingWrites = 1024;

 private:
  struct Flight;
  struct Member;
  struct PendingWrite {
    ResponseStore* tier = nullptr;
    std::string key;
    CachedResponse value;
    std::chrono::seconds ttl{0};
  };
  void WriterLoop();

  std::shared_ptr<engine::RequestStream> Replay(const engine::Request& request,
                                                const CachedResponse& hit, double lookup_s);
  // Runs on the wrapped submitter's pushing thread (the engine thread): fans chunks out.
  void OnChunks(const std::shared_ptr<Flight>& flight);
  // Under mutex_: non-blocking tiers at once, blocking ones queued for the writer.
  void Store(const Flight& flight);
  engine::RequestId NextId() { return next_id_.fetch_add(1); }

  engine::RequestSubmitter* inner_;
  std::vector<ResponseStore*> tiers_;
  CachingOptions options_;
  CacheObserver* observer_;
  std::atomic<uint64_t> epoch_{0};
  std::atomic<engine::RequestId> next_id_{kFirstId};

  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<Flight>> flights_;        // by key
  std::unordered_map<engine::RequestId, std::shared_ptr<Flight>> members_;  // by outer id

  // Stores into blocking tiers run here, never on the engine's thread.
  std::mutex writer_mutex_;
  std::condition_variable writer_wake_;
  std::deque<PendingWrite> writes_;
  bool stopping_ = false;
  std::thread writer_;  // started when a tier blocks
};

}  // namespace strata::cache
