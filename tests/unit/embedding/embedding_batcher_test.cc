#include "strata/embedding/embedding_batcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tiny_bert.h"

namespace strata::embedding {
namespace {

using namespace std::chrono_literals;
using testing::TinyBert;
using testing::TinyBertSpec;

const std::vector<std::string> kTexts = {
    "the cat sat on the mat",
    "a big red car is fast!",
    "",
    "dogs ran and played",
    "green tree, blue house. unknown words",
    "the",
    "small blue car and a big green house",
    "playing is fun",
};

// Holds the worker in on_pass after a pass, so tests can fill the queue behind it.
class PassGate {
 public:
  // The on_pass callback: records the pass; blocks while closed.
  void OnPass(const EmbeddingPass& pass) {
    std::unique_lock<std::mutex> lock(mutex_);
    passes_.push_back(pass);
    ++entered_;
    cv_.notify_all();
    cv_.wait(lock, [this] { return open_; });
  }
  void Close() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = false;
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    cv_.notify_all();
  }
  void WaitEntered(int n) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return entered_ >= n; });
  }
  std::vector<EmbeddingPass> passes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return passes_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = true;
  int entered_ = 0;
  std::vector<EmbeddingPass> passes_;
};

std::unique_ptr<EmbeddingBatcher> LoadBatcher(const std::string& dir,
                                              EmbeddingBatcherOptions options) {
  SentenceEncoderOptions encoder_options;
  encoder_options.num_threads = 2;
  auto batcher = EmbeddingBatcher::Load(dir, encoder_options, std::move(options));
  EXPECT_TRUE(batcher.ok()) << batcher.status().ToString();
  return batcher.ok() ? std::move(batcher).value() : nullptr;
}

// Polls until `done` holds (the queue is filled by other threads).
template <typename F>
bool Eventually(F done) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(EmbeddingBatcher, ConcurrentCallersGetTheVectorsOfADirectEncode) {
  const TinyBert model{TinyBertSpec{}};
  const std::string dir = model.Write("batcher_concurrent");
  auto reference = SentenceEncoder::Load(dir);
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  auto want = (*reference)->Encode(kTexts);
  ASSERT_TRUE(want.ok());
  PassGate gate;
  EmbeddingBatcherOptions options;
  options.max_batch_texts = 16;
  options.max_wait = 20ms;  // long enough that the threads below share passes
  options.on_pass = [&gate](const EmbeddingPass& p) { gate.OnPass(p); };
  auto batcher = LoadBatcher(dir, options);
  ASSERT_NE(batcher, nullptr);
  EXPECT_EQ(batcher->dimension(), 12);

  constexpr int kThreads = 16;
  constexpr int kRounds = 4;
  std::atomic<int> ready{0};
  std::vector<std::string> failures(kThreads);
  std::vector<double> worst(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int round = 0; round < kRounds; ++round) {
        // Each caller sends 1..3 texts, a different choice per thread and round.
        std::vector<size_t> picks;
        for (int k = 0; k <= (t + round) % 3; ++k) picks.push_back((t * 3 + round + k) % 8);
        std::vector<std::string> texts;
        int64_t want_tokens = 0;
        for (size_t p : picks) {
          texts.push_back(kTexts[p]);
          want_tokens += static_cast<int64_t>(
              (*reference)->tokenizer().Encode(kTexts[p], (*reference)->max_tokens())->size());
        }
        StatusOr<Embeddings> got = batcher->Embed(texts);
        if (!got.ok()) {
          failures[t] = got.status().ToString();
          return;
        }
        int64_t counted = 0;
        for (const int32_t n : got->token_counts) counted += n;
        if (got->vectors.size() != texts.size() || got->tokens != want_tokens ||
            got->token_counts.size() != texts.size() || counted != want_tokens) {
          failures[t] = "wrong count of vectors or tokens";
          return;
        }
        for (size_t k = 0; k < picks.size(); ++k) {
          const std::vector<float>& w = (*want)[picks[k]];
          if (got->vectors[k].size() != w.size()) {
            failures[t] = "wrong dimension";
            return;
          }
          for (size_t d = 0; d < w.size(); ++d) {
            worst[t] = std::max(worst[t], double(std::abs(got->vectors[k][d] - w[d])));
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[t], "") << "thread " << t;
    EXPECT_LE(worst[t], 1e-5) << "thread " << t;
  }
  // Every text went through one pass, the callers shared passes, and no pass went over its
  // size.
  int64_t want_texts = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int round = 0; round < kRounds; ++round) want_texts += (t + round) % 3 + 1;
  }
  auto passed_texts = [&gate] {
    int64_t texts = 0;
    for (const EmbeddingPass& p : gate.passes()) texts += p.texts;
    return texts;
  };
  EXPECT_EQ(passed_texts(), want_texts);
  int64_t most_calls = 0;
  for (const EmbeddingPass& p : gate.passes()) {
    EXPECT_LE(p.texts, 16);
    EXPECT_GT(p.tokens, 0);
    most_calls = std::max(most_calls, p.calls);
  }
  EXPECT_GT(most_calls, 1);
  EXPECT_EQ(batcher->queued_texts(), 0);
}

TEST(EmbeddingBatcher, ACallerWithBadUtf8FailsAlone) {
  const TinyBert model{TinyBertSpec{}};
  EmbeddingBatcherOptions options;
  options.max_wait = 20ms;
  auto batcher = LoadBatcher(model.Write("batcher_utf8"), options);
  ASSERT_NE(batcher, nullptr);
  const std::vector<std::string> good = {"the cat sat", "a red car"};
  const std::vector<std::string> bad = {"the cat", std::string("bad \xC3\x28 byte"), "ok"};
  StatusOr<Embeddings> good_result = InternalError("not run");
  StatusOr<Embeddings> good_result_2 = InternalError("not run");
  StatusOr<Embeddings> bad_result = InternalError("not run");
  std::thread a([&] { good_result = batcher->Embed(good); });
  std::thread b([&] { bad_result = batcher->Embed(bad); });
  std::thread c([&] { good_result_2 = batcher->Embed(good); });
  a.join();
  b.join();
  c.join();
  ASSERT_TRUE(good_result.ok()) << good_result.status().ToString();
  ASSERT_TRUE(good_result_2.ok()) << good_result_2.status().ToString();
  EXPECT_EQ(good_result->vectors.size(), 2u);
  EXPECT_EQ(good_result->vectors, good_result_2->vectors);
  ASSERT_FALSE(bad_result.ok());
  EXPECT_EQ(bad_result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_result.status().message().find("texts[1]"), std::string::npos)
      << bad_result.status().message();
  EXPECT_NE(bad_result.status().message().find("UTF-8"), std::string::npos);
}

TEST(EmbeddingBatcher, AFullQueueRefusesWithResourceExhausted) {
  const TinyBert model{TinyBertSpec{}};
  PassGate gate;
  EmbeddingBatcherOptions options;
  options.max_wait = 0us;
  options.max_queued_texts = 4;
  options.on_pass = [&gate](const EmbeddingPass& p) { gate.OnPass(p); };
  auto batcher = LoadBatcher(model.Write("batcher_queue"), options);
  ASSERT_NE(batcher, nullptr);

  // A first call's pass holds the worker in on_pass.
  gate.Close();
  const std::vector<std::string> one = {"the cat"};
  std::thread first([&] { EXPECT_TRUE(batcher->Embed(one).ok()); });
  gate.WaitEntered(1);
  // Four texts fill the queue behind it; one more text does not fit.
  const std::vector<std::string> four = {"a", "big", "red", "car"};
  StatusOr<Embeddings> queued = InternalError("not run");
  std::thread waiter([&] { queued = batcher->Embed(four); });
  ASSERT_TRUE(Eventually([&] { return batcher->queued_texts() == 4; }));
  StatusOr<Embeddings> refused = batcher->Embed(one);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("full"), std::string::npos);
  // A call larger than the whole queue is refused whatever the load.
  const std::vector<std::string> five = {"a", "b", "c", "d", "e"};
  EXPECT_EQ(batcher->Embed(five).status().code(), StatusCode::kResourceExhausted);

  gate.Open();
  first.join();
  waiter.join();
  ASSERT_TRUE(queued.ok()) << queued.status().ToString();
  EXPECT_EQ(queued->vectors.size(), 4u);
  // Room again.
  EXPECT_TRUE(batcher->Embed(one).ok());
}

TEST(EmbeddingBatcher, LargeCallsAreSplitAndSmallOnesAreNotStuckBehindThem) {
  const TinyBert model{TinyBertSpec{}};
  const std::string dir = model.Write("batcher_split");
  auto reference = SentenceEncoder::Load(dir);
  ASSERT_TRUE(reference.ok());
  PassGate gate;
  EmbeddingBatcherOptions options;
  options.max_batch_texts = 4;
  options.max_wait = 0us;
  options.on_pass = [&gate](const EmbeddingPass& p) { gate.OnPass(p); };
  auto batcher = LoadBatcher(dir, options);
  ASSERT_NE(batcher, nullptr);

  gate.Close();
  const std::vector<std::string> one = {"the"};
  std::thread first([&] { EXPECT_TRUE(batcher->Embed(one).ok()); });
  gate.WaitEntered(1);
  std::vector<std::string> big;
  for (int i = 0; i < 10; ++i) big.push_back(kTexts[i % kTexts.size()]);
  StatusOr<Embeddings> big_result = InternalError("not run");
  StatusOr<Embeddings> small_result = InternalError("not run");
  std::thread big_caller([&] { big_result = batcher->Embed(big); });
  ASSERT_TRUE(Eventually([&] { return batcher->queued_texts() == 10; }));
  std::thread small_caller([&] { small_result = batcher->Embed(one); });
  ASSERT_TRUE(Eventually([&] { return batcher->queued_texts() == 11; }));
  gate.Open();
  first.join();
  big_caller.join();
  small_caller.join();

  ASSERT_TRUE(big_result.ok()) << big_result.status().ToString();
  ASSERT_TRUE(small_result.ok()) << small_result.status().ToString();
  const std::vector<EmbeddingPass> passes = gate.passes();
  // 1 (the first call), then 4 + 4 + 3 for the 11 queued texts.
  ASSERT_EQ(passes.size(), 4u);
  EXPECT_EQ(passes[1].texts, 4);
  EXPECT_EQ(passes[1].calls, 2);  // the small call rode along in the first pass after
  EXPECT_EQ(passes[2].texts, 4);
  EXPECT_EQ(passes[3].texts, 3);
  auto want = (*reference)->Encode(big);
  ASSERT_TRUE(want.ok());
  ASSERT_EQ(big_result->vectors.size(), big.size());
  for (size_t i = 0; i < big.size(); ++i) {
    for (size_t d = 0; d < (*want)[i].size(); ++d) {
      EXPECT_NEAR(big_result->vectors[i][d], (*want)[i][d], 1e-5) << "text " << i;
    }
  }
}

TEST(EmbeddingBatcher, ShutdownWakesQueuedCallersWithUnavailable) {
  const TinyBert model{TinyBertSpec{}};
  constexpr int kWaiters = 5;
  PassGate gate;
  EmbeddingBatcherOptions options;
  options.max_wait = 0us;
  // Full with the waiters below: a probe call is refused (never queued) until shutdown begins.
  options.max_queued_texts = kWaiters;
  options.on_pass = [&gate](const EmbeddingPass& p) { gate.OnPass(p); };
  auto batcher = LoadBatcher(model.Write("batcher_shutdown"), options);
  ASSERT_NE(batcher, nullptr);

  gate.Close();
  const std::vector<std::string> one = {"the cat"};
  std::thread first([&] { EXPECT_TRUE(batcher->Embed(one).ok()); });
  gate.WaitEntered(1);
  std::vector<StatusOr<Embeddings>> results(kWaiters, InternalError("not run"));
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&, i] { results[i] = batcher->Embed(one); });
  }
  ASSERT_TRUE(Eventually([&] { return batcher->queued_texts() == kWaiters; }));
  std::thread stopper([&] { batcher->Shutdown(); });
  // Once shutdown began, new calls are refused UNAVAILABLE at once (before: RESOURCE_EXHAUSTED).
  ASSERT_TRUE(Eventually([&] {
    const StatusCode code = batcher->Embed(one).status().code();
    EXPECT_NE(code, StatusCode::kOk);
    return code == StatusCode::kUnavailable;
  }));
  gate.Open();
  first.join();
  stopper.join();
  for (std::thread& t : waiters) t.join();
  for (int i = 0; i < kWaiters; ++i) {
    EXPECT_EQ(results[i].status().code(), StatusCode::kUnavailable) << "waiter " << i;
  }
  EXPECT_EQ(batcher->queued_texts(), 0);
  batcher.reset();  // the destructor after Shutdown is a no-op
}

TEST(EmbeddingBatcher, TheDestructorWakesWaiters) {
  const TinyBert model{TinyBertSpec{}};
  PassGate gate;
  EmbeddingBatcherOptions options;
  options.max_wait = 0us;
  options.on_pass = [&gate](const EmbeddingPass& p) { gate.OnPass(p); };
  auto batcher = LoadBatcher(model.Write("batcher_destructor"), options);
  ASSERT_NE(batcher, nullptr);
  gate.Close();
  const std::vector<std::string> one = {"the cat"};
  std::thread first([&] { EXPECT_TRUE(batcher->Embed(one).ok()); });
  gate.WaitEntered(1);
  StatusOr<Embeddings> result = InternalError("not run");
  std::thread waiter([&] { result = batcher->Embed(one); });
  ASSERT_TRUE(Eventually([&] { return batcher->queued_texts() == 1; }));
  std::thread destroyer([&] { batcher.reset(); });
  std::this_thread::sleep_for(10ms);  // lets the destructor start (either order is correct)
  gate.Open();
  first.join();
  destroyer.join();
  waiter.join();
  // Either the destructor's flag came first (UNAVAILABLE) or the worker took the call first.
  EXPECT_TRUE(result.ok() || result.status().code() == StatusCode::kUnavailable)
      << result.status().ToString();
}

TEST(EmbeddingBatcher, EmptyCallsNamesAndOptions) {
  const TinyBert model{TinyBertSpec{}};
  auto batcher = LoadBatcher(model.Write("batcher_misc") + "/", {});
  ASSERT_NE(batcher, nullptr);
  EXPECT_EQ(batcher->model_name().rfind("tiny_bert_batcher_misc_", 0), 0u) << batcher->model_name();
  StatusOr<Embeddings> empty = batcher->Embed({});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->vectors.empty());
  EXPECT_EQ(empty->tokens, 0);
  // "" is [CLS] [SEP].
  const std::vector<std::string> blank = {""};
  StatusOr<Embeddings> b = batcher->Embed(blank);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->tokens, 2);

  EmbeddingBatcherOptions bad;
  bad.max_batch_texts = 0;
  EXPECT_EQ(EmbeddingBatcher::Load(model.Write("batcher_bad"), {}, bad).status().code(),
            StatusCode::kInvalidArgument);
  bad = {};
  bad.max_queued_texts = 0;
  EXPECT_EQ(EmbeddingBatcher::Load(model.Write("batcher_bad"), {}, bad).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(EmbeddingBatcher::Load("/nonexistent/model", {}, {}).status().code(),
            StatusCode::kNotFound);
}

}  // namespace
}  // namespace strata::embedding
