#include "strata/backend/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace strata::backend::cpu {
namespace {

using std::chrono::microseconds;

TEST(ThreadPool, DefaultsToTheHardwareConcurrency) {
  ThreadPool pool;
  EXPECT_EQ(pool.num_threads(), std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(ThreadPool(3).num_threads(), 3);
}

TEST(ThreadPool, CoversEveryIndexExactlyOnceInGrainAlignedRanges) {
  ThreadPool pool(4);
  for (int64_t n : {0, 1, 2, 3, 7, 16, 100, 1000, 12345}) {
    for (int64_t grain : {1, 3, 64}) {
      std::vector<int> hits(n, 0);  // plain ints: ranges are disjoint, so no two threads share one
      std::atomic<bool> misaligned{false};
      pool.ParallelFor(n, grain, [&](int64_t begin, int64_t end) {
        if (begin % grain != 0 || ((end - begin) % grain != 0 && end != n) || begin >= end) {
          misaligned = true;
        }
        for (int64_t i = begin; i < end; ++i) ++hits[i];
      });
      EXPECT_FALSE(misaligned) << "n=" << n << " grain=" << grain;
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(hits[i], 1) << "index " << i << " of n=" << n << " grain=" << grain;
      }
    }
  }
}

TEST(ThreadPool, ManyRapidRegionsEachSeeAllTheirWork) {
  // Spinning workers, parked workers (no spin) and a mix: every region must complete in full
  // and its writes must be visible when ParallelFor returns.
  for (int spin_us : {200, 0, 5}) {
    ThreadPool pool({.num_threads = 3, .spin = microseconds(spin_us)});
    std::vector<int64_t> out(64);
    for (int64_t region = 0; region < 20000; ++region) {
      pool.ParallelFor(static_cast<int64_t>(out.size()), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) out[i] = region + i;
      });
      for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
        ASSERT_EQ(out[i], region + i) << "spin " << spin_us << "us, region " << region;
      }
    }
  }
}

TEST(ThreadPool, WorkersTakePartAfterParking) {
  ThreadPool pool({.num_threads = 4, .spin = microseconds(0)});
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let every worker park
  std::mutex mu;
  std::set<std::thread::id> ids;
  pool.ParallelFor(64, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_GT(ids.size(), 1u);
}

// A region opened before a worker thread has started running is that worker's to join too: each
// range waits (up to 10 s) until a second thread has taken one.
TEST(ThreadPool, AWorkerThatStartsLateJoinsTheFirstRegion) {
  ThreadPool pool(2);  // the region below usually opens before the worker runs
  std::mutex mu;
  std::set<std::thread::id> ids;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  pool.ParallelFor(8, [&](int64_t, int64_t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    }
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (ids.size() >= 2) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  EXPECT_EQ(ids.size(), 2u);
}

TEST(ThreadPool, NestedCallsRunInlineOnTheCallingThread) {
  ThreadPool pool(4);
  std::atomic<int64_t> total{0};
  std::atomic<bool> moved{false};
  pool.ParallelFor(32, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const std::thread::id outer = std::this_thread::get_id();
      int calls = 0;
      pool.ParallelFor(10, [&](int64_t b, int64_t e) {
        ++calls;
        if (std::this_thread::get_id() != outer || b != 0 || e != 10) moved = true;
        total += e - b;
      });
      if (calls != 1) moved = true;
    }
  });
  EXPECT_EQ(total.load(), 320);
  EXPECT_FALSE(moved);
}

TEST(ThreadPool, SingleThreadPoolRunsOneRangeOnTheCaller) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.num_threads(), 1);
  int calls = 0;
  pool.ParallelFor(1000, 7, [&](int64_t begin, int64_t end) {
    ++calls;
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 1000);
  });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPool, DestroysCleanlyWhileIdle) {
  for (int i = 0; i < 50; ++i) {
    ThreadPool pool({.num_threads = 3, .spin = microseconds(i % 2 == 0 ? 0 : 1000)});
    if (i % 3 == 0) std::this_thread::sleep_for(microseconds(200));  // parked or spinning
    if (i % 5 == 0) {
      std::atomic<int> n{0};
      pool.ParallelFor(100, [&](int64_t b, int64_t e) { n += static_cast<int>(e - b); });
      ASSERT_EQ(n.load(), 100);
    }
  }
}

}  // namespace
}  // namespace strata::backend::cpu
