#include "strata/server/connection_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace strata::server {
namespace {

using std::chrono::milliseconds;

// Whether `done` becomes true within `ms`.
bool BecomesTrue(const std::atomic<bool>& done, int ms) {
  const auto until = std::chrono::steady_clock::now() + milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
    if (done.load()) return true;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return done.load();
}

TEST(ConnectionGateTest, CountsPlacesAndReportsEveryChange) {
  std::vector<int64_t> seen;
  ConnectionGate::Hooks hooks;
  hooks.on_change = [&seen](int64_t open) { seen.push_back(open); };
  ConnectionGate gate(3, hooks);
  gate.Acquire();
  gate.Acquire();
  gate.Release();
  EXPECT_EQ(gate.open(), 1);
  EXPECT_EQ(gate.limit(), 3);
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 2, 1}));
  EXPECT_EQ(gate.times_full(), 0);
}

TEST(ConnectionGateTest, AFullPortWaitsUntilAConnectionCloses) {
  int full = 0;
  ConnectionGate::Hooks hooks;
  hooks.on_full = [&full] { ++full; };
  ConnectionGate gate(2, hooks);
  gate.Acquire();
  gate.Acquire();
  std::atomic<bool> third{false};
  std::thread waiter([&] {
    gate.Acquire();
    third = true;
  });
  EXPECT_FALSE(BecomesTrue(third, 100));
  gate.Release();
  EXPECT_TRUE(BecomesTrue(third, 5000));
  waiter.join();
  EXPECT_EQ(gate.open(), 2);
  EXPECT_EQ(full, 1);
  EXPECT_EQ(gate.times_full(), 1);
}

TEST(ConnectionGateTest, PollFindsClosesNobodySignals) {
  ConnectionGate gate(1);
  gate.Acquire();
  std::atomic<int> polls{0};
  std::atomic<bool> closed{false};
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    gate.Acquire(
        [&] {
          ++polls;
          if (closed.exchange(false)) gate.Release();
        },
        milliseconds(5));
    acquired = true;
  });
  EXPECT_FALSE(BecomesTrue(acquired, 100));
  EXPECT_GE(polls.load(), 2);  // polled again and again while full
  closed = true;
  EXPECT_TRUE(BecomesTrue(acquired, 5000));
  waiter.join();
  EXPECT_EQ(gate.open(), 1);
}

TEST(ConnectionGateTest, ShutStopsTheWaitAndLaterAcquiresDoNotWait) {
  ConnectionGate gate(1);
  gate.Acquire();
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    gate.Acquire();
    acquired = true;
  });
  EXPECT_FALSE(BecomesTrue(acquired, 50));
  gate.Shut();
  EXPECT_TRUE(BecomesTrue(acquired, 5000));
  waiter.join();
  gate.Acquire();  // would wait forever if Shut did not hold
  EXPECT_EQ(gate.open(), 3);
}

TEST(ConnectionGateTest, NoLimitNeverWaits) {
  ConnectionGate gate(0);
  for (int i = 0; i < 1000; ++i) gate.Acquire();
  EXPECT_EQ(gate.open(), 1000);
  EXPECT_EQ(gate.times_full(), 0);
}

TEST(ConnectionGateTest, ReleaseNeverGoesBelowZero) {
  ConnectionGate gate(1);
  gate.Release();
  EXPECT_EQ(gate.open(), 0);
  gate.Acquire();
  EXPECT_EQ(gate.open(), 1);
}

}  // namespace
}  // namespace strata::server
