#include "bench/load/load_runner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace strata::bench {
namespace {

// Answers each request from its own thread after `delay`, failing those whose index is in
// `fail`; records the most requests it saw in flight at once.
class FakeClient : public TargetClient {
 public:
  explicit FakeClient(std::chrono::milliseconds delay, std::vector<int64_t> fail = {})
      : delay_(delay), fail_(std::move(fail)) {}
  ~FakeClient() override {
    for (std::thread& t : threads_) t.join();
  }

  void Start(int64_t index, const RequestSpec& spec, DoneCallback done) override {
    const int now = ++in_flight_;
    int seen = max_in_flight_.load();
    while (now > seen && !max_in_flight_.compare_exchange_weak(seen, now)) {
    }
    started_.push_back(index);
    const bool fail = std::find(fail_.begin(), fail_.end(), index) != fail_.end();
    threads_.emplace_back([this, fail, tokens = spec.output_tokens, done = std::move(done)] {
      std::this_thread::sleep_for(delay_);
      RequestResult r;
      r.ok = !fail;
      r.error_kind = fail ? "UNAVAILABLE" : "";
      r.error_message = fail ? "UNAVAILABLE: down" : "";
      r.output_tokens = fail ? 0 : tokens;
      --in_flight_;
      done(std::move(r));
    });
  }
  StatusOr<std::string> ServerInfoJson(double) override { return std::string("{}"); }

  std::vector<int64_t> started_;  // written by the runner's thread only
  std::atomic<int> max_in_flight_{0};

 private:
  std::chrono::milliseconds delay_;
  std::vector<int64_t> fail_;
  std::atomic<int> in_flight_{0};
  std::vector<std::thread> threads_;
};

const Workload kWorkload = Workload::Random({4, 4}, {3, 3}, {10, 20}, 1);

TEST(RunLoad, ClosedLoopKeepsConcurrencyInFlightAndSendsAllRequests) {
  FakeClient client(std::chrono::milliseconds(20));
  LoadOptions o;
  o.concurrency = 3;
  o.num_requests = 12;
  o.first_index = 100;
  const LoadOutcome out = RunLoad(client, kWorkload, o);
  EXPECT_EQ(out.results.size(), 12u);
  EXPECT_EQ(client.max_in_flight_.load(), 3);
  EXPECT_FALSE(out.stopped_early);
  EXPECT_EQ(client.started_.front(), 100);
  EXPECT_EQ(client.started_.back(), 111);
  // 12 requests of 20 ms, 3 at a time: at least 4 rounds.
  EXPECT_GE(out.duration_s, 0.075);
}

TEST(RunLoad, StopsSendingOnceErrorsPassTheThreshold) {
  FakeClient client(std::chrono::milliseconds(1), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  LoadOptions o;
  o.concurrency = 1;
  o.num_requests = 50;
  o.max_errors = 2;
  const LoadOutcome out = RunLoad(client, kWorkload, o);
  EXPECT_TRUE(out.stopped_early);
  EXPECT_EQ(out.results.size(), 3u);  // the third failure ends it
  EXPECT_NE(out.stop_reason.find("--max-errors 2"), std::string::npos);
  EXPECT_EQ(out.first_error, "UNAVAILABLE: down");
}

TEST(RunLoad, OpenLoopPacesSendsByTheRate) {
  FakeClient client(std::chrono::milliseconds(1));
  LoadOptions o;
  o.concurrency = 0;
  o.request_rate = 200;  // mean gap 5 ms
  o.num_requests = 40;
  const auto start = std::chrono::steady_clock::now();
  const LoadOutcome out = RunLoad(client, kWorkload, o);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(out.results.size(), 40u);
  // 39 gaps of mean 5 ms: the sum is ~0.195 s; an unpaced loop would take ~0.001 s.
  EXPECT_GT(elapsed, 0.08);
}

TEST(RunLoad, DurationBoundsAnUnboundedRun) {
  FakeClient client(std::chrono::milliseconds(5));
  LoadOptions o;
  o.concurrency = 2;
  o.duration_s = 0.1;
  const LoadOutcome out = RunLoad(client, kWorkload, o);
  EXPECT_GT(out.results.size(), 4u);
  EXPECT_LT(out.results.size(), 200u);
  EXPECT_LT(out.duration_s, 1.0);
}

}  // namespace
}  // namespace strata::bench
