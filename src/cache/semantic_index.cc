#include "strata/cache/semantic_index.h"

#include <hnswlib/hnswlib.h>

#include <algorithm>
#include <exception>

#include "strata/common/check.h"

namespace strata::cache {
namespace {

constexpr size_t kInitialCapacity = 64;
constexpr size_t kGraphDegree = 16;      // hnswlib's M
constexpr size_t kEfConstruction = 100;  // build-time beam
constexpr size_t kMinEfSearch = 64;      // search-time beam (recall near 1 at these sizes)

}  // namespace

struct SemanticIndex::Slot {
  std::string key;
  std::string text;
  EntryLabels labels;
  std::vector<float> embedding;  // kept for rebuilds
  uint64_t serial = 0;
  bool live = false;
};

struct SemanticIndex::Graph {
  explicit Graph(int dimension, size_t capacity)
      : space(static_cast<size_t>(dimension)),
        hnsw(&space, capacity, kGraphDegree, kEfConstruction) {}
  hnswlib::InnerProductSpace space;
  hnswlib::HierarchicalNSW<float> hnsw;
  std::vector<Slot> slots;  // by hnswlib label
  std::unordered_map<std::string, size_t> by_key;
  size_t live = 0;
};

SemanticIndex::SemanticIndex(int dimension, size_t max_entries)
    : dimension_(dimension), max_entries_(std::max<size_t>(max_entries, 1)) {
  STRATA_CHECK(dimension > 0);
}

SemanticIndex::~SemanticIndex() = default;

std::vector<SemanticMatch> SemanticIndex::Search(const std::string& context,
                                                 std::span<const float> embedding, size_t k,
                                                 float min_similarity) const {
  STRATA_CHECK(embedding.size() == static_cast<size_t>(dimension_));
  std::vector<SemanticMatch> out;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = graphs_.find(context);
  if (it == graphs_.end() || it->second->live == 0 || k == 0) return out;
  Graph& g = *it->second;
  g.hnsw.setEf(std::max(kMinEfSearch, k));
  auto found = g.hnsw.searchKnn(embedding.data(), std::min(k, g.live));
  // hnswlib's inner-product "distance" is 1 - dot; the queue pops the farthest first.
  while (!found.empty()) {
    const auto [distance, label] = found.top();
    found.pop();
    const float similarity = 1.0f - distance;
    if (label < g.slots.size() && g.slots[label].live && similarity >= min_similarity) {
      out.push_back({g.slots[label].key, g.slots[label].text, similarity});
    }
  }
  std::reverse(out.begin(), out.end());
  return out;
}

void SemanticIndex::Add(const std::string& context, std::span<const float> embedding,
                        const std::string& key, const std::string& text,
                        const EntryLabels& labels) {
  STRATA_CHECK(embedding.size() == static_cast<size_t>(dimension_));
  std::lock_guard<std::mutex> lock(mutex_);
  std::unique_ptr<Graph>& slot = graphs_[context];
  if (slot == nullptr) slot = std::make_unique<Graph>(dimension_, kInitialCapacity);
  Graph& g = *slot;
  if (g.by_key.count(key) != 0) return;
  const size_t label = g.slots.size();
  try {
    if (label >= g.hnsw.max_elements_) g.hnsw.resizeIndex(2 * g.hnsw.max_elements_);
    g.hnsw.addPoint(embedding.data(), label);
  } catch (const std::exception&) {
    return;  // out of memory: the entry is simply not indexed (a later miss, never a wrong hit)
  }
  Slot s;
  s.key = key;
  s.text = text;
  s.labels = labels;
  s.embedding.assign(embedding.begin(), embedding.end());
  s.serial = next_serial_++;
  s.live = true;
  order_.push_back({context, key, s.serial});
  g.slots.push_back(std::move(s));
  g.by_key.emplace(key, label);
  ++g.live;
  ++live_;
  EvictLocked();
}

void SemanticIndex::Remove(const std::string& context, const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = graphs_.find(context);
  if (it == graphs_.end()) return;
  auto k = it->second->by_key.find(key);
  if (k == it->second->by_key.end()) return;
  RemoveLocked(*it->second, k->second);
  MaybeRebuildLocked(context);
}

int64_t SemanticIndex::Invalidate(const CacheSelector& selector) {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t removed = 0;
  std::vector<std::string> touched;
  for (auto& [context, graph] : graphs_) {
    bool any = false;
    for (size_t label = 0; label < graph->slots.size(); ++label) {
      if (graph->slots[label].live && selector.Selects(graph->slots[label].labels)) {
        RemoveLocked(*graph, label);
        ++removed;
        any = true;
      }
    }
    if (any) touched.push_back(context);
  }
  for (const std::string& context : touched) MaybeRebuildLocked(context);
  return removed;
}

size_t SemanticIndex::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_;
}

void SemanticIndex::RemoveLocked(Graph& graph, size_t label) {
  Slot& s = graph.slots[label];
  if (!s.live) return;
  graph.hnsw.markDelete(label);
  graph.by_key.erase(s.key);
  s.live = false;
  s.embedding = {};
  s.text = {};
  --graph.live;
  --live_;
}

void SemanticIndex::EvictLocked() {
  while (live_ > max_entries_ && !order_.empty()) {
    const Order o = order_.front();
    order_.pop_front();
    auto it = graphs_.find(o.context);
    if (it == graphs_.end()) continue;
    Graph& g = *it->second;
    auto k = g.by_key.find(o.key);
    if (k != g.by_key.end() && g.slots[k->second].serial == o.serial) {
      RemoveLocked(g, k->second);
      MaybeRebuildLocked(o.context);
    }
  }
  // Entries already removed leave stale records behind; drop them once they dominate.
  if (order_.size() > 2 * live_ + 1024) {
    std::deque<Order> kept;
    for (const Order& o : order_) {
      auto it = graphs_.find(o.context);
      if (it == graphs_.end()) continue;
      auto k = it->second->by_key.find(o.key);
      if (k != it->second->by_key.end() && it->second->slots[k->second].serial == o.serial) {
        kept.push_back(o);
      }
    }
    order_.swap(kept);
  }
}

void SemanticIndex::MaybeRebuildLocked(const std::string& context) {
  auto it = graphs_.find(context);
  if (it == graphs_.end()) return;
  Graph& old = *it->second;
  if (old.live == 0) {
    graphs_.erase(it);
    return;
  }
  const size_t deleted = old.slots.size() - old.live;
  if (deleted <= old.live) return;
  std::unique_ptr<Graph> rebuilt;
  try {
    rebuilt = std::make_unique<Graph>(dimension_, std::max(kInitialCapacity, 2 * old.live));
    size_t label = 0;
    for (const Slot& s : old.slots) {
      if (s.live) rebuilt->hnsw.addPoint(s.embedding.data(), label++);
    }
  } catch (const std::exception&) {
    return;  // out of memory: keep the old graph, deleted points and all
  }
  for (Slot& s : old.slots) {
    if (!s.live) continue;
    const size_t label = rebuilt->slots.size();
    rebuilt->by_key.emplace(s.key, label);
    rebuilt->slots.push_back(std::move(s));
    ++rebuilt->live;
  }
  it->second = std::move(rebuilt);
}

}  // namespace strata::cache
