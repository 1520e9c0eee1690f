// CachingSubmitter: tags, namespaces, invalidation (local and from other replicas), the epoch on
// a bus, and the semantic cache (with a fake embedder whose vectors the test chooses).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "strata/cache/caching_submitter.h"
#include "strata/cache/memory_response_store.h"
#include "strata/cache/semantic_index.h"

namespace strata::cache {
namespace {

using engine::Request;
using engine::RequestStream;
using engine::StreamChunk;
using sampling::FinishReason;

class FakeEngine final : public engine::RequestSubmitter {
 public:
  StatusOr<std::shared_ptr<RequestStream>> Submit(Request) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto stream = std::make_shared<RequestStream>(next_id_++);
    streams.push_back(stream);
    return stream;
  }
  void Cancel(engine::RequestId) override {}
  size_t submitted() {
    std::lock_guard<std::mutex> lock(mutex_);
    return streams.size();
  }
  std::shared_ptr<RequestStream> last() {
    std::lock_guard<std::mutex> lock(mutex_);
    return streams.back();
  }

 private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<RequestStream>> streams;
  engine::RequestId next_id_ = 1;
};

class Observer final : public CacheObserver {
 public:
  void OnLookup(std::string_view cache, std::string_view tier, LookupResult result,
                double) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const char* r = result == LookupResult::kHit    ? "hit"
                    : result == LookupResult::kMiss ? "miss"
                                                    : "error";
    ++counts_[std::string(cache) + ":" + std::string(tier) + "/" + r];
  }
  void OnTokensServed(std::string_view, int64_t) override {}
  void OnTierError(std::string_view, std::string_view) override {}
  int Count(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    return counts_[what];
  }

 private:
  std::mutex mutex_;
  std::map<std::string, int> counts_;
};

// Embeddings the test sets per text (unit vectors in 4 dimensions); unknown texts fail.
class FakeEmbedder final : public embedding::TextEmbedder {
 public:
  StatusOr<embedding::Embeddings> Embed(std::span<const std::string> texts) override {
    std::lock_guard<std::mutex> lock(mutex_);
    embedding::Embeddings out;
    for (const std::string& t : texts) {
      auto it = vectors.find(t);
      if (it == vectors.end()) return InvalidArgumentError("unknown text");
      out.vectors.push_back(it->second);
      const int tokens = long_texts.count(t) != 0 ? max_tokens() : 5;
      out.token_counts.push_back(tokens);
      out.tokens += tokens;
    }
    ++calls;
    return out;
  }
  int dimension() const override { return 4; }
  int max_tokens() const override { return 16; }
  std::string_view model_name() const override { return "fake"; }

  void Set(const std::string& text, std::vector<float> v) {
    float norm = 0;
    for (float x : v) norm += x * x;
    for (float& x : v) x /= std::sqrt(norm);
    std::lock_guard<std::mutex> lock(mutex_);
    vectors[text] = std::move(v);
  }

  std::map<std::string, std::vector<float>> vectors;
  std::map<std::string, bool> long_texts;
  int calls = 0;

 private:
  std::mutex mutex_;
};

// Records what is published; Deliver hands an event to the subscriber (another replica's).
class FakeBus final : public InvalidationBus {
 public:
  void Subscribe(Handler handler) override { handler_ = std::move(handler); }
  Status Publish(const InvalidationEvent& event) override {
    published.push_back(event);
    return OkStatus();
  }
  StatusOr<uint64_t> Epoch() override { return epoch; }
  StatusOr<uint64_t> IncrementEpoch() override { return ++epoch; }
  void Deliver(const InvalidationEvent& event) { handler_(event); }

  uint64_t epoch = 7;
  std::vector<InvalidationEvent> published;

 private:
  Handler handler_;
};

Request Greedy(std::vector<int32_t> prompt, std::vector<std::string> tags = {},
               std::string ns = "") {
  Request r;
  r.prompt = std::move(prompt);
  r.params.temperature = 0.0f;
  r.cache.cacheable = true;
  r.cache.tags = std::move(tags);
  r.cache.cache_namespace = std::move(ns);
  return r;
}

Request Semantic(std::vector<int32_t> prompt, std::string text) {
  Request r = Greedy(std::move(prompt));
  r.cache.semantic = true;
  r.cache.semantic_text = std::move(text);
  r.cache.semantic_context = "text";
  return r;
}

struct Result {
  bool from_cache = false;
  std::vector<int32_t> tokens;
};

// Submits; when it goes to the engine, answers it with `answer` (one token).
Result Ask(CachingSubmitter& cache, FakeEngine& engine, Request r, int32_t answer = 10) {
  const size_t before = engine.submitted();
  auto out = cache.Submit(std::move(r));
  EXPECT_TRUE(out.ok());
  if (engine.submitted() > before) {
    StreamChunk last;
    last.token_ids = {answer};
    last.text = "x";
    last.finish_reason = FinishReason::kStop;
    engine.last()->Push(std::move(last));
  }
  Result res;
  StreamChunk c;
  while ((*out)->Next(&c, std::chrono::seconds(5))) {
    res.tokens.insert(res.tokens.end(), c.token_ids.begin(), c.token_ids.end());
    if (c.finish_reason) res.from_cache = c.from_cache;
  }
  return res;
}

bool WaitFor(const std::function<bool()>& done) {
  for (int i = 0; i < 500 && !done(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

struct Harness {
  explicit Harness(InvalidationBus* bus = nullptr, bool semantic = false) {
    CachingOptions options;
    options.model_digest = "digest";
    options.default_ttl = std::chrono::seconds(60);
    options.bus = bus;
    if (semantic) {
      options.semantic.embedder = &embedder;
      options.semantic.index = &index;
      options.semantic.min_similarity = 0.9f;
      options.semantic.guard = [this](std::string_view a, std::string_view b) {
        return !(a == "reject me" || b == "reject me");
      };
    }
    cache = std::make_unique<CachingSubmitter>(&engine, std::vector<ResponseStore*>{&l1}, options,
                                               &observer);
  }
  FakeEngine engine;
  MemoryResponseStore l1{1 << 20};
  Observer observer;
  FakeEmbedder embedder;
  SemanticIndex index{4, 100};
  std::unique_ptr<CachingSubmitter> cache;
};

TEST(CacheInvalidation, ByTagDropsOnlyTheTaggedEntries) {
  Harness h;
  Ask(*h.cache, h.engine, Greedy({1}, {"docs", "v1"}));
  Ask(*h.cache, h.engine, Greedy({2}, {"v2"}));
  Ask(*h.cache, h.engine, Greedy({3}));
  StatusOr<int64_t> removed = h.cache->Invalidate(CacheSelector::Tag("v1"));
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 1);
  EXPECT_FALSE(Ask(*h.cache, h.engine, Greedy({1}, {"docs", "v1"})).from_cache);
  EXPECT_TRUE(Ask(*h.cache, h.engine, Greedy({2}, {"v2"})).from_cache);
  EXPECT_TRUE(Ask(*h.cache, h.engine, Greedy({3})).from_cache);
}

TEST(CacheInvalidation, ByNamespaceAndAll) {
  Harness h;
  Ask(*h.cache, h.engine, Greedy({1}, {}, "tenant-a"));
  Ask(*h.cache, h.engine, Greedy({1}, {}, "tenant-b"));
  Ask(*h.cache, h.engine, Greedy({1}));
  EXPECT_EQ(h.cache->Invalidate(CacheSelector::Namespace("tenant-a")).value(), 1);
  EXPECT_FALSE(Ask(*h.cache, h.engine, Greedy({1}, {}, "tenant-a")).from_cache);
  EXPECT_TRUE(Ask(*h.cache, h.engine, Greedy({1}, {}, "tenant-b")).from_cache);
  EXPECT_TRUE(Ask(*h.cache, h.engine, Greedy({1})).from_cache);
  EXPECT_EQ(h.cache->Invalidate(CacheSelector::All()).value(), 3);
  EXPECT_EQ(h.l1.stats().entries, 0);
}

TEST(CacheInvalidation, AComputationRunningDuringAnInvalidationIsNotStored) {
  Harness h;
  auto out = h.cache->Submit(Greedy({1}, {"t"}));
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE(h.cache->Invalidate(CacheSelector::Tag("other")).ok());
  StreamChunk last;
  last.token_ids = {10};
  last.finish_reason = FinishReason::kStop;
  h.engine.last()->Push(std::move(last));
  StreamChunk c;
  while ((*out)->Next(&c, std::chrono::seconds(5))) {
  }
  EXPECT_EQ(h.l1.stats().entries, 0) << "it may hold data the invalidation meant to retire";
  Ask(*h.cache, h.engine, Greedy({1}, {"t"}));
  EXPECT_TRUE(Ask(*h.cache, h.engine, Greedy({1}, {"t"})).from_cache);
}

TEST(CacheInvalidation, InvalidationsArePublishedAndOtherReplicasApplyThem) {
  FakeBus bus;
  Harness h(&bus);
  EXPECT_EQ(h.cache->epoch(), 7u) << "the shared epoch is adopted at start";
  Ask(*h.cache, h.engine, Greedy({1}, {"t"}));
  Ask(*h.cache, h.engine, Greedy({2}));
  ASSERT_TRUE(h.cache->Invalidate(CacheSelector::Tag("nothing")).ok());
  ASSERT_EQ(bus.published.size(), 1u);
  EXPECT_EQ(bus.published[0].selector.value, "nothing");
  // Another replica invalidated tag t: this replica's in-process tier drops its entry.
  InvalidationEvent event;
  event.selector = CacheSelector::Tag("t");
  bus.Deliver(event);
  EXPECT_FALSE(Ask(*h.cache, h.engine, Greedy({1}, {"t"})).from_cache);
  EXPECT_TRUE(Ask(*h.cache, h.engine, Greedy({2})).from_cache);
}

TEST(CacheInvalidation, TheEpochIsSharedThroughTheBus) {
  FakeBus bus;
  Harness h(&bus);
  Ask(*h.cache, h.engine, Greedy({1}));
  StatusOr<uint64_t> bumped = h.cache->BumpEpoch();
  ASSERT_TRUE(bumped.ok());
  EXPECT_EQ(*bumped, 8u);
  ASSERT_EQ(bus.published.size(), 1u);
  EXPECT_EQ(bus.published[0].kind, InvalidationEvent::Kind::kEpoch);
  EXPECT_EQ(bus.published[0].epoch, 8u);
  EXPECT_FALSE(Ask(*h.cache, h.engine, Greedy({1})).from_cache);
  InvalidationEvent later;
  later.kind = InvalidationEvent::Kind::kEpoch;
  later.epoch = 12;
  bus.Deliver(later);
  EXPECT_EQ(h.cache->epoch(), 12u);
  later.epoch = 3;  // an older one never moves it back
  bus.Deliver(later);
  EXPECT_EQ(h.cache->epoch(), 12u);
}

TEST(SemanticCache, ASimilarTextGetsTheStoredAnswer) {
  Harness h(nullptr, /*semantic=*/true);
  h.embedder.Set("what is the capital of france", {1, 0.1f, 0, 0});
  h.embedder.Set("capital of france?", {1, 0.12f, 0, 0});
  h.embedder.Set("how do plants grow", {0, 0, 1, 0});
  EXPECT_FALSE(
      Ask(*h.cache, h.engine, Semantic({1, 2}, "what is the capital of france"), 42).from_cache);
  ASSERT_TRUE(WaitFor([&] { return h.index.size() == 1; }));
  Result similar = Ask(*h.cache, h.engine, Semantic({3, 4, 5}, "capital of france?"));
  EXPECT_TRUE(similar.from_cache);
  EXPECT_EQ(similar.tokens, std::vector<int32_t>{42});
  EXPECT_EQ(h.observer.Count("semantic:l1/hit"), 1);
  EXPECT_FALSE(Ask(*h.cache, h.engine, Semantic({6}, "how do plants grow")).from_cache);
  EXPECT_EQ(h.engine.submitted(), 2u);
}

TEST(SemanticCache, MissesWhenTheGuardRefusesTheContextDiffersOrTheTextWasCut) {
  Harness h(nullptr, /*semantic=*/true);
  h.embedder.Set("a question", {1, 0, 0, 0});
  h.embedder.Set("reject me", {1, 0, 0, 0});
  h.embedder.Set("a very long question", {1, 0, 0, 0});
  h.embedder.long_texts["a very long question"] = true;
  Ask(*h.cache, h.engine, Semantic({1}, "a question"));
  ASSERT_TRUE(WaitFor([&] { return h.index.size() == 1; }));
  EXPECT_FALSE(Ask(*h.cache, h.engine, Semantic({2}, "reject me")).from_cache);
  EXPECT_FALSE(Ask(*h.cache, h.engine, Semantic({3}, "a very long question")).from_cache);
  Request other_params = Semantic({4}, "a question");
  other_params.params.max_tokens = 7;  // a different context: never matched
  EXPECT_FALSE(Ask(*h.cache, h.engine, other_params).from_cache);
  Request opted_out = Semantic({5}, "a question");
  opted_out.cache.semantic = false;
  EXPECT_FALSE(Ask(*h.cache, h.engine, opted_out).from_cache);
  EXPECT_EQ(h.engine.submitted(), 5u);
}

TEST(SemanticCache, AnInvalidatedAnswerIsNotServedAndItsTextIsForgotten) {
  Harness h(nullptr, /*semantic=*/true);
  h.embedder.Set("q1", {1, 0, 0, 0});
  h.embedder.Set("q1 again", {1, 0.05f, 0, 0});
  Request first = Semantic({1}, "q1");
  first.cache.tags = {"faq"};
  Ask(*h.cache, h.engine, first);
  ASSERT_TRUE(WaitFor([&] { return h.index.size() == 1; }));
  ASSERT_TRUE(h.cache->Invalidate(CacheSelector::Tag("faq")).ok());
  EXPECT_EQ(h.index.size(), 0u);
  EXPECT_FALSE(Ask(*h.cache, h.engine, Semantic({2}, "q1 again")).from_cache);
  // The answer gone from the tiers some other way (expiry): the index entry is dropped on use.
  ASSERT_TRUE(WaitFor([&] { return h.index.size() == 1; }));
  ASSERT_TRUE(h.l1.Clear().ok());
  EXPECT_FALSE(Ask(*h.cache, h.engine, Semantic({1}, "q1")).from_cache);
  EXPECT_TRUE(WaitFor([&] { return h.index.size() == 1; })) << "re-indexed after recomputing";
}

TEST(SemanticCache, AFailedEmbeddingServesTheRequestUncached) {
  Harness h(nullptr, /*semantic=*/true);
  Result r = Ask(*h.cache, h.engine, Semantic({1}, "a text the embedder does not know"));
  EXPECT_FALSE(r.from_cache);
  EXPECT_EQ(r.tokens, std::vector<int32_t>{10});
  EXPECT_EQ(h.observer.Count("semantic:l1/error"), 1);
}

}  // namespace
}  // namespace strata::cache
