// SemanticIndex: the semantic cache's nearest-neighbour index: unit-length text embeddings,
// each pointing at the response-cache key of the answer computed for that text, grouped by
// context (SemanticContextKey: model, epoch, namespace, sampling fields, earlier chat turns), so
// a search only ever finds entries whose non-text parameters match. Each context is its own
// hnswlib graph (inner product = cosine on unit vectors).
//
// Bounds: at most `max_entries` live entries in all; past that the oldest are dropped. Entries
// removed (Remove, Invalidate, eviction) are marked deleted in their graph, and a graph whose
// deleted points outnumber its live ones is rebuilt from the live ones, so memory stays
// proportional to the live entries.
//
// An entry may outlive the answer it points at (the answer's TTL ran out, or another replica
// dropped it): the caller removes it when the key is not found.
//
// Thread rules: every method from any thread (one internal mutex; searches are sub-millisecond
// at these sizes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "strata/cache/cache_selector.h"

namespace strata::cache {

struct SemanticMatch {
  std::string key;   // the response-cache key of the stored answer
  std::string text;  // the text that answer was computed for
  float similarity = 0;
};

class SemanticIndex {
 public:
  SemanticIndex(int dimension, size_t max_entries);
  ~SemanticIndex();
  SemanticIndex(const SemanticIndex&) = delete;
  SemanticIndex& operator=(const SemanticIndex&) = delete;

  // The live entries of `context` nearest to `embedding` with similarity >= min_similarity,
  // best first, at most k. `embedding` has dimension() floats.
  std::vector<SemanticMatch> Search(const std::string& context, std::span<const float> embedding,
                                    size_t k, float min_similarity) const;

  // Adds an entry: the embedding of `text`, whose answer is stored under `key` (nothing when
  // `key` is already in `context`).
  void Add(const std::string& context, std::span<const float> embedding, const std::string& key,
           const std::string& text, const EntryLabels& labels);
  void Remove(const std::string& context, const std::string& key);
  // Removes the entries `selector` selects; returns how many.
  int64_t Invalidate(const CacheSelector& selector);

  int dimension() const { return dimension_; }
  size_t size() const;

 private:
  struct Graph;
  struct Slot;

  void RemoveLocked(Graph& graph, size_t label);
  void EvictLocked();
  void MaybeRebuildLocked(const std::string& context);

  const int dimension_;
  const size_t max_entries_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::unique_ptr<Graph>> graphs_;  // by context
  // Insertion order, for eviction; a record whose entry is gone (or was re-added: another
  // serial) is skipped.
  struct Order {
    std::string context;
    std::string key;
    uint64_t serial;
  };
  std::deque<Order> order_;
  size_t live_ = 0;
  uint64_t next_serial_ = 1;
};

}  // namespace strata::cache
