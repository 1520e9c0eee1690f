#include "strata/engine/submission_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace strata::engine {
namespace {

using namespace std::chrono_literals;

Submission Make(RequestId id, int32_t priority) {
  Submission s;
  s.id = id;
  s.request.prompt = {1, 2, 3};
  s.request.priority = priority;
  s.stream = std::make_shared<RequestStream>(id);
  return s;
}

std::vector<RequestId> PopIds(SubmissionQueue& q, size_t max) {
  std::vector<Submission> out;
  q.Pop(max, &out);
  std::vector<RequestId> ids;
  for (const Submission& s : out) ids.push_back(s.id);
  return ids;
}

TEST(SubmissionQueue, PopsHighestPriorityFirstAndFifoWithinAPriority) {
  SubmissionQueue q(16);
  ASSERT_TRUE(q.Push(Make(1, 0)).ok());
  ASSERT_TRUE(q.Push(Make(2, 5)).ok());
  ASSERT_TRUE(q.Push(Make(3, 0)).ok());
  ASSERT_TRUE(q.Push(Make(4, 5)).ok());
  ASSERT_TRUE(q.Push(Make(5, -1)).ok());
  EXPECT_EQ(PopIds(q, 3), std::vector<RequestId>({2, 4, 1}));
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(PopIds(q, 10), std::vector<RequestId>({3, 5}));
  EXPECT_EQ(q.size(), 0u);
}

TEST(SubmissionQueue, FullQueueRefusesWithResourceExhausted) {
  SubmissionQueue q(2);
  ASSERT_TRUE(q.Push(Make(1, 0)).ok());
  ASSERT_TRUE(q.Push(Make(2, 0)).ok());
  Status full = q.Push(Make(3, 9));
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("queue is full"), std::string::npos) << full.message();
  EXPECT_EQ(PopIds(q, 1), std::vector<RequestId>({1}));
  // 1 waits in the scheduler, which had no free slot: it still holds its place.
  EXPECT_EQ(q.Push(Make(3, 0)).code(), StatusCode::kResourceExhausted);
  q.SetSchedulerRoom(0);                 // the engine's report once 1 has started
  EXPECT_TRUE(q.Push(Make(3, 0)).ok());  // room again
}

TEST(SubmissionQueue, TheSchedulersRoomAddsToTheCapacity) {
  SubmissionQueue q(1);
  q.SetSchedulerRoom(2);
  for (RequestId id = 1; id <= 3; ++id) ASSERT_TRUE(q.Push(Make(id, 0)).ok()) << id;
  EXPECT_EQ(q.Push(Make(4, 0)).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(PopIds(q, 2), std::vector<RequestId>({1, 2}));
  // The two taken filled the scheduler's two slots: only the backlog's place is left.
  EXPECT_EQ(q.Push(Make(4, 0)).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(PopIds(q, 1), std::vector<RequestId>({3}));
  // Taken beyond the two slots, 3 waits in the scheduler and still holds the backlog's place.
  EXPECT_EQ(q.Push(Make(4, 0)).code(), StatusCode::kResourceExhausted);
  q.SetSchedulerRoom(-1);  // the engine's report: one more waiting than its slots take
  EXPECT_EQ(q.Push(Make(4, 0)).code(), StatusCode::kResourceExhausted);
  q.SetSchedulerRoom(0);  // it has started
  EXPECT_TRUE(q.Push(Make(4, 0)).ok());
  EXPECT_EQ(q.Push(Make(5, 0)).code(), StatusCode::kResourceExhausted);
}

TEST(SubmissionQueue, RemoveTakesOutOneQueuedRequest) {
  SubmissionQueue q(4);
  ASSERT_TRUE(q.Push(Make(1, 0)).ok());
  ASSERT_TRUE(q.Push(Make(2, 0)).ok());
  Submission removed;
  ASSERT_TRUE(q.Remove(1, &removed));
  EXPECT_EQ(removed.id, 1);
  ASSERT_NE(removed.stream, nullptr);
  EXPECT_FALSE(q.Remove(1, &removed));
  EXPECT_FALSE(q.Remove(99, &removed));
  EXPECT_EQ(PopIds(q, 4), std::vector<RequestId>({2}));
}

TEST(SubmissionQueue, ClosedQueueRefusesButKeepsWhatIsQueued) {
  SubmissionQueue q(4);
  ASSERT_TRUE(q.Push(Make(1, 0)).ok());
  q.Close();
  EXPECT_EQ(q.Push(Make(2, 0)).code(), StatusCode::kUnavailable);
  EXPECT_EQ(PopIds(q, 4), std::vector<RequestId>({1}));
}

TEST(SubmissionQueue, WaitForWorkWakesOnPushAndOnWake) {
  SubmissionQueue q(4);
  EXPECT_FALSE(q.WaitForWork(1ms));
  std::thread pusher([&] {
    std::this_thread::sleep_for(5ms);
    ASSERT_TRUE(q.Push(Make(1, 0)).ok());
  });
  EXPECT_TRUE(q.WaitForWork(60s));
  pusher.join();
  PopIds(q, 1);
  std::thread waker([&] {
    std::this_thread::sleep_for(5ms);
    q.Wake();
  });
  EXPECT_FALSE(q.WaitForWork(60s));  // woken, nothing queued
  waker.join();
}

TEST(SubmissionQueue, ConcurrentProducersNeverExceedTheCapacity) {
  constexpr size_t kCapacity = 64;
  SubmissionQueue q(kCapacity);
  std::atomic<int> accepted{0};
  std::vector<std::thread> producers;
  for (int t = 0; t < 4; ++t) {
    producers.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        if (q.Push(Make(t * 1000 + i, i % 3)).ok()) ++accepted;
      }
    });
  }
  for (std::thread& p : producers) p.join();
  EXPECT_EQ(accepted.load(), static_cast<int>(kCapacity));
  EXPECT_EQ(q.size(), kCapacity);
}

}  // namespace
}  // namespace strata::engine
