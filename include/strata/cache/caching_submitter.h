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
//   - with a semantic cache (CachingOptions::semantic) and a request that asks for it
//     (CachePolicy::semantic): its text is embedded and the SemanticIndex searched within its
//     context; the nearest stored answer at or above the similarity threshold whose entry is
//     still in a tier is replayed the same way;
//   - otherwise it is submitted to the wrapped submitter; when it finishes with kStop or
//     kLength (not cancelled, not failed) its answer is stored in every tier (a blocking
//     tier's store is queued for this object's writer thread: the engine's thread never waits
//     on the network).
// Other requests go straight through. A tier that fails is counted and skipped: the request is
// served uncached, never failed because of the cache (so is a failed embedding).
//
// Invalidation: Invalidate drops what a selector (tag, namespace, all) selects from every tier
// and the semantic index, then publishes it on the InvalidationBus (when there is one) so that
// replicas sharing the shared tier drop it from their own in-process tier. A computation that
// was running when an invalidation came is not stored (it may have been made from data the
// invalidation meant to retire). The epoch is part of every key; BumpEpoch moves it on (on the
// bus: for every replica).
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
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "strata/cache/cache_observer.h"
#include "strata/cache/cache_selector.h"
#include "strata/cache/invalidation_bus.h"
#include "strata/cache/response_store.h"
#include "strata/cache/semantic_index.h"
#include "strata/embedding/text_embedder.h"
#include "strata/engine/request_submitter.h"

namespace strata::cache {

struct SemanticOptions {
  embedding::TextEmbedder* embedder = nullptr;  // null: no semantic cache
  SemanticIndex* index = nullptr;               // of embedder->dimension()
  float min_similarity = 0.95f;                 // cosine at or above which a stored answer is used
  size_t candidates = 4;                        // nearest entries tried, best first
  // Must also allow the pair (new text, stored text) for a hit: a lexical check of what
  // embeddings blur (numbers, names, direction, negation). Null: similarity alone decides.
  std::function<bool(std::string_view, std::string_view)> guard;
};

struct CachingOptions {
  std::string model_digest;                // Sha256Hex of the served model file
  std::chrono::seconds default_ttl{3600};  // an entry's lifetime; a request may shorten it
  SemanticOptions semantic;
  InvalidationBus* bus = nullptr;  // null: invalidations stay in this process
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
  // With a bus, the shared epoch is moved on and published (UNAVAILABLE when the bus fails:
  // nothing changed).
  StatusOr<uint64_t> BumpEpoch();
  uint64_t epoch() const { return epoch_.load(); }
  // Drops what `selector` selects in every tier and the semantic index, then publishes it.
  // Returns the entries dropped here; UNAVAILABLE naming the tier or the bus that failed (what
  // the others held was dropped all the same).
  StatusOr<int64_t> Invalidate(const CacheSelector& selector);
  // Drops every entry of every tier. OK, or the first tier's error.
  Status Clear();
  // Applies an event another replica published (also called for this replica's own): drops
  // what it selects from the non-shared tiers and the semantic index, or adopts a later epoch.
  void OnInvalidationEvent(const InvalidationEvent& event);

  // Identical requests being computed now (tests).
  size_t flights_in_progress() const;

  static constexpr engine::RequestId kFirstId = engine::RequestId{1} << 62;
  // Stores waiting for a blocking tier at most; more are dropped (and counted as errors).
  static constexpr size_t kMaxPendingWrites = 1024;

 private:
  struct Flight;
  struct Member;
  struct SemanticLookup;
  void WriterLoop();
  // Queues `task` for the writer thread; false when the queue is full (the task is dropped).
  bool Defer(std::function<void()> task);

  std::shared_ptr<engine::RequestStream> Replay(const engine::Request& request,
                                                const CachedResponse& hit, double lookup_s);
  // Looks `key` up in every tier (copying a later tier's hit into the earlier ones, for `ttl`);
  // reports each tier's result under `cache` ("response"; "" reports nothing but failures).
  // `all_missed`: every tier answered NOT_FOUND; `hit_tier`: the tier that had it.
  std::optional<CachedResponse> Lookup(const std::string& key, std::string_view cache,
                                       std::chrono::seconds ttl, bool* all_missed,
                                       std::string_view* hit_tier = nullptr);
  // The semantic cache's answer for `request`, if it has one; fills `lookup` (the embedding and
  // context, kept for storing this request's answer) either way.
  std::optional<CachedResponse> SemanticHit(const engine::Request& request, SemanticLookup* lookup);
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
  // Moves on at every invalidation; a computation started under another value is not stored.
  std::atomic<uint64_t> generation_{0};
  std::atomic<engine::RequestId> next_id_{kFirstId};

  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<Flight>> flights_;        // by key
  std::unordered_map<engine::RequestId, std::shared_ptr<Flight>> members_;  // by outer id

  // Stores into blocking tiers and semantic-index inserts run here, never on the engine's
  // thread.
  std::mutex writer_mutex_;
  std::condition_variable writer_wake_;
  std::deque<std::function<void()>> writes_;
  bool stopping_ = false;
  std::thread writer_;  // started when a tier blocks or the semantic cache is on
};

}  // namespace strata::cache
