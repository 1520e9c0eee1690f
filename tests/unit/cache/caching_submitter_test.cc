#include "strata/cache/caching_submitter.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "strata/cache/memory_response_store.h"

namespace strata::cache {
namespace {

using engine::Request;
using engine::RequestId;
using engine::RequestStream;
using engine::StreamChunk;
using sampling::FinishReason;

// Stands in for the Engine: hands out streams the test pushes into (as the engine thread).
class FakeEngine final : public engine::RequestSubmitter {
 public:
  StatusOr<std::shared_ptr<RequestStream>> Submit(Request request) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!refuse.ok()) return refuse;
    auto stream = std::make_shared<RequestStream>(next_id_++);
    streams.push_back(stream);
    requests.push_back(std::move(request));
    return stream;
  }
  void Cancel(RequestId id) override {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelled.push_back(id);
  }
  size_t submitted() {
    std::lock_guard<std::mutex> lock(mutex_);
    return streams.size();
  }

  Status refuse;
  std::vector<std::shared_ptr<RequestStream>> streams;
  std::vector<Request> requests;
  std::vector<RequestId> cancelled;

 private:
  std::mutex mutex_;
  RequestId next_id_ = 1;
};

class CountingObserver final : public CacheObserver {
 public:
  // Response-cache lookups count as "tier/result", others as "cache:tier/result".
  void OnLookup(std::string_view cache, std::string_view tier, LookupResult result,
                double) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string prefix = cache == "response" ? "" : std::string(cache) + ":";
    ++lookups[prefix + std::string(tier) + "/" + Name(result)];
  }
  void OnTokensServed(std::string_view, int64_t tokens) override { served += tokens; }
  void OnTierError(std::string_view, std::string_view) override { ++errors; }
  int Count(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    return lookups[what];
  }

  std::atomic<int64_t> served{0};
  std::atomic<int> errors{0};

 private:
  static std::string Name(LookupResult r) {
    return r == LookupResult::kHit ? "hit" : r == LookupResult::kMiss ? "miss" : "error";
  }
  std::mutex mutex_;
  std::map<std::string, int> lookups;
};

// A tier that always fails.
class BrokenStore final : public ResponseStore {
 public:
  std::string_view tier() const override { return "l2"; }
  StatusOr<CachedResponse> Get(const std::string&) override { return UnavailableError("down"); }
  Status Put(const std::string&, const CachedResponse&, std::chrono::seconds,
             const EntryLabels&) override {
    return UnavailableError("down");
  }
  StatusOr<int64_t> Invalidate(const CacheSelector&) override { return UnavailableError("down"); }
  Status Clear() override { return UnavailableError("down"); }
  StoreStats stats() const override { return {}; }
};

CachingOptions Options(const std::string& digest) {
  CachingOptions options;
  options.model_digest = digest;
  options.default_ttl = std::chrono::seconds(60);
  return options;
}

Request Greedy(std::vector<int32_t> prompt = {1, 2, 3}) {
  Request r;
  r.prompt = std::move(prompt);
  r.params.temperature = 0.0f;
  r.cache.cacheable = true;
  return r;
}

StreamChunk Tokens(std::vector<int32_t> ids, std::string text) {
  StreamChunk c;
  c.token_ids = std::move(ids);
  c.text = std::move(text);
  return c;
}

StreamChunk Last(FinishReason reason, std::vector<int32_t> ids = {}, std::string text = "") {
  StreamChunk c = Tokens(std::move(ids), std::move(text));
  c.finish_reason = reason;
  c.usage.prompt_tokens = 3;
  c.usage.completion_tokens = 3;
  return c;
}

// Everything a stream delivers, merged.
struct Drained {
  std::vector<int32_t> tokens;
  std::string text;
  std::optional<FinishReason> reason;
  bool from_cache = false;         // on the last chunk
  bool every_chunk_cached = true;  // from_cache on every chunk
  Status error;
};

Drained Drain(RequestStream& s) {
  Drained d;
  StreamChunk c;
  while (s.Next(&c, std::chrono::seconds(5))) {
    d.every_chunk_cached = d.every_chunk_cached && c.from_cache;
    d.tokens.insert(d.tokens.end(), c.token_ids.begin(), c.token_ids.end());
    d.text += c.text;
    if (c.finish_reason) {
      d.reason = c.finish_reason;
      d.from_cache = c.from_cache;
      d.error = c.error;
    }
  }
  return d;
}

struct Harness {
  FakeEngine engine;
  MemoryResponseStore l1{1 << 20};
  CountingObserver observer;
  CachingSubmitter cache{&engine, {&l1}, Options("digest"), &observer};

  // Computes `request` once through the fake engine: tokens 10 11 12, "abc", kStop.
  Drained Compute(Request request) {
    auto out = cache.Submit(std::move(request));
    EXPECT_TRUE(out.ok());
    std::shared_ptr<RequestStream> inner = engine.streams.back();
    inner->Push(Tokens({10, 11}, "ab"));
    inner->Push(Last(FinishReason::kStop, {12}, "c"));
    return Drain(**out);
  }
};

TEST(CachingSubmitter, RequestsThatAreNotCacheablePassStraightThrough) {
  Harness h;
  Request r = Greedy();
  r.cache.cacheable = false;
  auto out = h.cache.Submit(r);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)->id(), 1);  // the engine's own stream
  EXPECT_EQ(h.engine.submitted(), 1u);
  h.cache.Cancel(1);
  EXPECT_EQ(h.engine.cancelled, std::vector<RequestId>{1});
}

TEST(CachingSubmitter, ASecondIdenticalRequestIsAnsweredFromTheCache) {
  Harness h;
  const Drained first = h.Compute(Greedy());
  EXPECT_EQ(first.tokens, (std::vector<int32_t>{10, 11, 12}));
  EXPECT_FALSE(first.from_cache);
  EXPECT_EQ(h.observer.Count("l1/miss"), 1);

  auto again = h.cache.Submit(Greedy());
  ASSERT_TRUE(again.ok());
  EXPECT_GE((*again)->id(), CachingSubmitter::kFirstId);
  StreamChunk c;
  ASSERT_TRUE((*again)->Next(&c, std::chrono::seconds(1)));
  EXPECT_EQ(c.token_ids, first.tokens);
  EXPECT_EQ(c.text, "abc");
  EXPECT_EQ(c.finish_reason, FinishReason::kStop);
  EXPECT_TRUE(c.from_cache);
  EXPECT_EQ(c.usage.prompt_tokens, 3);
  EXPECT_EQ(c.usage.completion_tokens, 3);
  EXPECT_EQ(h.engine.submitted(), 1u) << "the engine computed it once";
  EXPECT_EQ(h.observer.Count("l1/hit"), 1);
  EXPECT_EQ(h.observer.served.load(), 3);
}

TEST(CachingSubmitter, DifferentPromptsOrParamsMiss) {
  Harness h;
  h.Compute(Greedy({1, 2, 3}));
  h.Compute(Greedy({1, 2, 4}));
  Request longer = Greedy();
  longer.params.max_tokens = 5;
  h.Compute(longer);
  Request other_ns = Greedy();
  other_ns.cache.cache_namespace = "tenant-b";
  h.Compute(other_ns);
  EXPECT_EQ(h.engine.submitted(), 4u);
}

TEST(CachingSubmitter, IdenticalRequestsInFlightComputeOnce) {
  Harness h;
  constexpr int kClients = 32;
  std::vector<std::shared_ptr<RequestStream>> outs(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto out = h.cache.Submit(Greedy());
      ASSERT_TRUE(out.ok());
      outs[i] = *out;
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(h.engine.submitted(), 1u);
  EXPECT_EQ(h.cache.flights_in_progress(), 1u);
  std::shared_ptr<RequestStream> inner = h.engine.streams[0];
  inner->Push(Tokens({10, 11}, "ab"));
  inner->Push(Last(FinishReason::kStop, {12}, "c"));
  int leaders = 0;
  for (const auto& out : outs) {
    const Drained d = Drain(*out);
    EXPECT_EQ(d.tokens, (std::vector<int32_t>{10, 11, 12}));
    EXPECT_EQ(d.text, "abc");
    EXPECT_EQ(d.reason, FinishReason::kStop);
    if (!d.from_cache) ++leaders;
  }
  EXPECT_EQ(leaders, 1);
  EXPECT_EQ(h.observer.Count("inflight/hit"), kClients - 1);
  EXPECT_EQ(h.cache.flights_in_progress(), 0u);
  EXPECT_EQ(h.observer.served.load(), (kClients - 1) * 3);
}

TEST(CachingSubmitter, ALateJoinerGetsWhatWasAlreadyProduced) {
  Harness h;
  auto first = h.cache.Submit(Greedy());
  std::shared_ptr<RequestStream> inner = h.engine.streams[0];
  inner->Push(Tokens({10, 11}, "ab"));
  auto late = h.cache.Submit(Greedy());
  ASSERT_TRUE(late.ok());
  inner->Push(Last(FinishReason::kStop, {12}, "c"));
  const Drained d = Drain(**late);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{10, 11, 12}));
  EXPECT_EQ(d.text, "abc");
  EXPECT_TRUE(d.from_cache);
  EXPECT_TRUE(d.every_chunk_cached) << "a joiner's tokens are not its own generation";
  const Drained leader = Drain(**first);
  EXPECT_EQ(leader.tokens, d.tokens);
  EXPECT_FALSE(leader.from_cache);
}

TEST(CachingSubmitter, CancellingOneSharerLeavesTheOthersAndCancellingAllStopsTheWork) {
  Harness h;
  auto a = h.cache.Submit(Greedy());
  auto b = h.cache.Submit(Greedy());
  ASSERT_TRUE(a.ok() && b.ok());
  std::shared_ptr<RequestStream> inner = h.engine.streams[0];
  h.cache.Cancel((*a)->id());
  EXPECT_EQ(Drain(**a).reason, FinishReason::kCancelled);
  EXPECT_TRUE(h.engine.cancelled.empty()) << "b still wants it";
  h.cache.Cancel((*b)->id());
  EXPECT_EQ(Drain(**b).reason, FinishReason::kCancelled);
  EXPECT_EQ(h.engine.cancelled, std::vector<RequestId>{inner->id()});
  inner->Push(Last(FinishReason::kCancelled));
  // Nothing was stored: the next identical request computes again.
  auto again = h.cache.Submit(Greedy());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(h.engine.submitted(), 2u);
}

TEST(CachingSubmitter, FailedOrCutShortAnswersAreNotStored) {
  for (FinishReason reason : {FinishReason::kError, FinishReason::kCancelled}) {
    Harness h;
    auto out = h.cache.Submit(Greedy());
    StreamChunk last = Last(reason, {10}, "a");
    if (reason == FinishReason::kError) last.error = InternalError("device");
    h.engine.streams[0]->Push(last);
    EXPECT_EQ(Drain(**out).reason, reason);
    h.Compute(Greedy());
    EXPECT_EQ(h.engine.submitted(), 2u);
  }
}

TEST(CachingSubmitter, ARefusedSubmitFailsTheLeaderAndItsJoiners) {
  Harness h;
  h.engine.refuse = ResourceExhaustedError("queue full");
  auto out = h.cache.Submit(Greedy());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(h.cache.flights_in_progress(), 0u);
  h.engine.refuse = OkStatus();
  EXPECT_EQ(h.Compute(Greedy()).reason, FinishReason::kStop);
}

TEST(CachingSubmitter, BumpingTheEpochOrClearingMakesEntriesUnreachable) {
  Harness h;
  h.Compute(Greedy());
  EXPECT_EQ(h.cache.BumpEpoch().value(), 1u);
  h.Compute(Greedy());
  EXPECT_EQ(h.engine.submitted(), 2u);
  ASSERT_TRUE(h.cache.Clear().ok());
  h.Compute(Greedy());
  EXPECT_EQ(h.engine.submitted(), 3u);
}

TEST(CachingSubmitter, AFailingTierIsSkippedAndCounted) {
  FakeEngine engine;
  BrokenStore l2;
  MemoryResponseStore l1(1 << 20);
  CountingObserver observer;
  CachingSubmitter cache(&engine, {&l1, &l2}, Options("d"), &observer);
  auto out = cache.Submit(Greedy());
  ASSERT_TRUE(out.ok());
  engine.streams[0]->Push(Last(FinishReason::kStop, {10}, "a"));
  EXPECT_EQ(Drain(**out).tokens, std::vector<int32_t>{10});
  EXPECT_EQ(observer.Count("l2/error"), 1);
  EXPECT_GE(observer.errors.load(), 2);  // the Get and the Put
  auto again = cache.Submit(Greedy());   // served by l1 before l2 is asked
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(Drain(**again).from_cache);
  EXPECT_EQ(engine.submitted(), 1u);
}

TEST(CachingSubmitter, AHitInALaterTierIsCopiedIntoTheFasterOnes) {
  FakeEngine engine;
  MemoryResponseStore l1(1 << 20);
  MemoryResponseStore shared(1 << 20);
  CountingObserver observer;
  CachingSubmitter a(&engine, {&l1, &shared}, Options("d"), &observer);
  auto out = a.Submit(Greedy());
  engine.streams[0]->Push(Last(FinishReason::kStop, {10}, "a"));
  Drain(**out);
  // Another replica with its own empty l1 and the same shared tier.
  MemoryResponseStore other_l1(1 << 20);
  CachingSubmitter b(&engine, {&other_l1, &shared}, Options("d"), &observer);
  auto hit = b.Submit(Greedy());
  ASSERT_TRUE(hit.ok());
  EXPECT_TRUE(Drain(**hit).from_cache);
  EXPECT_EQ(engine.submitted(), 1u);
  EXPECT_EQ(other_l1.stats().entries, 1);
}

TEST(CachingSubmitter, ARequestTtlShortensTheDefault) {
  FakeEngine engine;
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
  MemoryResponseStore l1(1 << 20, [&] { return now; });
  CountingObserver observer;
  CachingSubmitter cache(&engine, {&l1}, Options("d"), &observer);
  Request r = Greedy();
  r.cache.ttl_seconds = 5;
  auto out = cache.Submit(r);
  engine.streams[0]->Push(Last(FinishReason::kStop, {10}, "a"));
  Drain(**out);
  now += std::chrono::seconds(6);
  auto again = cache.Submit(r);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(engine.submitted(), 2u) << "the 5 s entry expired";
}

}  // namespace
}  // namespace strata::cache
