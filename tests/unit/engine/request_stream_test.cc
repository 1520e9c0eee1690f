#include "strata/engine/request_stream.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace strata::engine {
namespace {

using namespace std::chrono_literals;

StreamChunk Tokens(std::vector<int32_t> ids, std::string text) {
  StreamChunk c;
  c.token_ids = std::move(ids);
  c.text = std::move(text);
  return c;
}

TEST(RequestStream, DeliversEveryChunkInOrderThenEnds) {
  RequestStream stream(7);
  EXPECT_EQ(stream.id(), 7);
  stream.Push(Tokens({1}, "a"));
  stream.Push(Tokens({2, 3}, "bc"));
  StreamChunk last = Tokens({4}, "d");
  last.finish_reason = sampling::FinishReason::kLength;
  stream.Push(last);
  EXPECT_TRUE(stream.finished());

  StreamChunk c;
  ASSERT_TRUE(stream.Next(&c, 0s));
  EXPECT_EQ(c.token_ids, std::vector<int32_t>({1}));
  ASSERT_TRUE(stream.Next(&c, 0s));
  EXPECT_EQ(c.text, "bc");
  ASSERT_TRUE(stream.Next(&c, 0s));
  ASSERT_TRUE(c.finish_reason.has_value());
  EXPECT_EQ(*c.finish_reason, sampling::FinishReason::kLength);
  EXPECT_FALSE(stream.Next(&c, 0s));
  EXPECT_FALSE(stream.timed_out());  // ended, not timed out
}

TEST(RequestStream, NextTimesOutWhenNothingArrives) {
  RequestStream stream(1);
  StreamChunk c;
  EXPECT_FALSE(stream.Next(&c, 1ms));
  EXPECT_TRUE(stream.timed_out());
  EXPECT_FALSE(stream.finished());
}

TEST(RequestStream, ConsumerOnAnotherThreadSeesEveryToken) {
  RequestStream stream(1);
  constexpr int kTokens = 2000;
  std::thread producer([&] {
    for (int i = 0; i < kTokens; ++i) {
      StreamChunk c = Tokens({i}, "");
      if (i == kTokens - 1) c.finish_reason = sampling::FinishReason::kStop;
      stream.Push(std::move(c));
    }
  });
  std::vector<int32_t> seen;
  StreamChunk c;
  while (stream.Next(&c)) seen.insert(seen.end(), c.token_ids.begin(), c.token_ids.end());
  producer.join();
  ASSERT_EQ(seen.size(), static_cast<size_t>(kTokens));
  for (int i = 0; i < kTokens; ++i) ASSERT_EQ(seen[i], i);
}

TEST(RequestStream, ListenerHearsEveryPushAndWhatWasQueuedBeforeIt) {
  RequestStream stream(1);
  stream.Push(Tokens({1}, "a"));
  int calls = 0;
  stream.SetListener([&] { ++calls; });
  EXPECT_EQ(calls, 1);  // a chunk was already waiting
  StreamChunk c;
  ASSERT_TRUE(stream.Next(&c, 0s));
  stream.Push(Tokens({2}, "b"));
  stream.Push(Tokens({3}, "c"));
  EXPECT_EQ(calls, 3);
  // The listener may take chunks itself (it runs outside the stream's lock).
  std::vector<int32_t> taken;
  stream.SetListener([&] {
    StreamChunk chunk;
    while (stream.Next(&chunk, 0s)) taken.push_back(chunk.token_ids[0]);
  });
  EXPECT_EQ(taken, std::vector<int32_t>({2, 3}));
  StreamChunk last = Tokens({4}, "d");
  last.finish_reason = sampling::FinishReason::kStop;
  stream.Push(last);
  EXPECT_EQ(taken, std::vector<int32_t>({2, 3, 4}));
}

// An event-driven consumer: the listener, run on the producer's thread, drains the stream;
// nothing is lost or seen twice while the listener is installed mid-stream.
TEST(RequestStream, ListenerInstalledMidStreamSeesEveryTokenOnce) {
  RequestStream stream(1);
  constexpr int kTokens = 2000;
  std::mutex mutex;
  std::vector<int32_t> seen;
  auto drain = [&] {
    std::lock_guard<std::mutex> lock(mutex);  // Next from one consumer at a time
    StreamChunk chunk;
    while (stream.Next(&chunk, 0s)) seen.push_back(chunk.token_ids[0]);
  };
  std::thread producer([&] {
    for (int i = 0; i < kTokens; ++i) {
      StreamChunk c = Tokens({i}, "");
      if (i == kTokens - 1) c.finish_reason = sampling::FinishReason::kStop;
      stream.Push(std::move(c));
    }
  });
  std::this_thread::sleep_for(1ms);
  stream.SetListener(drain);
  producer.join();
  drain();  // whatever arrived before the listener and was not drained by it
  ASSERT_EQ(seen.size(), static_cast<size_t>(kTokens));
  for (int i = 0; i < kTokens; ++i) ASSERT_EQ(seen[i], i);
}

TEST(RequestStream, PushAfterTheLastChunkIsAProgrammerError) {
  RequestStream stream(1);
  StreamChunk last;
  last.finish_reason = sampling::FinishReason::kCancelled;
  stream.Push(last);
  EXPECT_DEATH(stream.Push(Tokens({1}, "x")), "");
}

}  // namespace
}  // namespace strata::engine
