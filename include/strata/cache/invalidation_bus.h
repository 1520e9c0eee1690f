// InvalidationBus: how replicas that share a response-cache tier (Redis) tell each other about
// an operator's invalidations, so each drops the selected entries from its own in-process tier
// and semantic index, and how they agree on the cache epoch.
//
// An invalidation is published after the shared tier has dropped its entries; every replica
// subscribed (the publisher too) receives it once per publish, in publish order, on the bus's
// own thread. A replica that was disconnected misses what was published meanwhile: its
// in-process entries then live until their TTL (the docs say so); on reconnecting it re-reads
// the epoch.
//
// Thread rules: every method from any thread; the handler runs on the bus's thread and must not
// call back into the bus.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "strata/cache/cache_selector.h"
#include "strata/common/status.h"

namespace strata::cache {

struct InvalidationEvent {
  enum class Kind { kSelector, kEpoch };
  Kind kind = Kind::kSelector;
  CacheSelector selector;  // kSelector
  uint64_t epoch = 0;      // kEpoch: the epoch now in force
};

// The wire form of an event (a short text: "tag:<t>", "ns:<n>", "all", "epoch:<n>"), and its
// parse: INVALID_ARGUMENT for anything else (a replica ignores such a message).
std::string EncodeInvalidationEvent(const InvalidationEvent& event);
StatusOr<InvalidationEvent> DecodeInvalidationEvent(std::string_view text);

class InvalidationBus {
 public:
  using Handler = std::function<void(const InvalidationEvent&)>;
  virtual ~InvalidationBus() = default;

  // Starts delivering events to `handler` (once, before the first Publish).
  virtual void Subscribe(Handler handler) = 0;
  virtual Status Publish(const InvalidationEvent& event) = 0;

  // The shared epoch (0 when none was ever bumped), or UNAVAILABLE.
  virtual StatusOr<uint64_t> Epoch() = 0;
  // Moves the shared epoch on by one and returns it, or UNAVAILABLE. (The caller publishes a
  // kEpoch event with it.)
  virtual StatusOr<uint64_t> IncrementEpoch() = 0;
};

}  // namespace strata::cache
