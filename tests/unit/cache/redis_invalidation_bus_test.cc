// The Redis invalidation bus against a real redis-server on loopback
// (tests/support/redis_server.h).
#include "strata/cache/redis_invalidation_bus.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "support/redis_server.h"
#include "support/silent_server.h"

namespace strata::cache {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

RedisInvalidationBusOptions Options(int port) {
  RedisInvalidationBusOptions o;
  o.port = port;
  o.timeout = milliseconds(200);
  o.reconnect_backoff = milliseconds(100);
  return o;
}

// Runs one command on its own connection; the reply as text ("(nil)", "(error) ...") or an
// integer in decimal.
std::string RawCommand(int port, const std::vector<std::string>& args) {
  redisContext* c = redisConnect("127.0.0.1", port);
  if (c == nullptr || c->err != 0) {
    if (c != nullptr) redisFree(c);
    return "(no connection)";
  }
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lengths.data()));
  std::string out = "(no reply)";
  if (r != nullptr) {
    if (r->type == REDIS_REPLY_INTEGER) {
      out = std::to_string(r->integer);
    } else if (r->type == REDIS_REPLY_NIL) {
      out = "(nil)";
    } else if (r->type == REDIS_REPLY_ERROR) {
      out = "(error) ";  // (not "..." + ...: GCC 12's -Wrestrict false positive)
      out.append(r->str, r->len);
    } else if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
      out = std::string(r->str, r->len);
    }
    freeReplyObject(r);
  }
  redisFree(c);
  return out;
}

// What a handler received, for the test thread to wait on.
class Received {
 public:
  InvalidationBus::Handler Handler() {
    return [this](const InvalidationEvent& e) {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back(e.kind == InvalidationEvent::Kind::kEpoch
                            ? "epoch " + std::to_string(e.epoch)
                            : EncodeInvalidationEvent(e));
      changed_.notify_all();
    };
  }
  // True once `count` events arrived (within 3 s).
  bool WaitFor(size_t count) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(3),
                             [&] { return events_.size() >= count; });
  }
  std::vector<std::string> events() {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> events_;
};

using Events = std::vector<std::string>;

InvalidationEvent TagEvent(std::string tag) {
  InvalidationEvent e;
  e.selector = CacheSelector::Tag(std::move(tag));
  return e;
}

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

TEST(RedisInvalidationBus, EveryBusOnTheRedisReceivesAPublishedEventThePublisherToo) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running()) << "redis-server did not start (scripts/setup installs it)";
  Received got_a, got_b;
  RedisInvalidationBus a(Options(redis.port()));
  RedisInvalidationBus b(Options(redis.port()));
  a.Subscribe(got_a.Handler());
  b.Subscribe(got_b.Handler());
  ASSERT_TRUE(got_a.WaitFor(1) && got_b.WaitFor(1));
  EXPECT_EQ(got_a.events(), Events{"epoch 0"}) << "the catch-up event comes first";
  ASSERT_TRUE(a.Publish(TagEvent("team:docs")).ok());
  InvalidationEvent all;
  ASSERT_TRUE(b.Publish(all).ok());
  ASSERT_TRUE(got_a.WaitFor(3) && got_b.WaitFor(3));
  const Events expected = {"epoch 0", "tag:team:docs", "all"};
  EXPECT_EQ(got_a.events(), expected);
  EXPECT_EQ(got_b.events(), expected);
  EXPECT_EQ(a.subscriptions(), 1);
}

TEST(RedisInvalidationBus, BusesWithAnotherPrefixDoNotHearEachOther) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  Received got_a, got_b;
  RedisInvalidationBusOptions other = Options(redis.port());
  other.key_prefix = "other:";
  RedisInvalidationBus a(Options(redis.port()));
  RedisInvalidationBus b(other);
  a.Subscribe(got_a.Handler());
  b.Subscribe(got_b.Handler());
  ASSERT_TRUE(got_a.WaitFor(1) && got_b.WaitFor(1));
  ASSERT_TRUE(b.Publish(TagEvent("t")).ok());
  ASSERT_TRUE(got_b.WaitFor(2));
  ASSERT_TRUE(a.Publish(TagEvent("u")).ok());
  ASSERT_TRUE(got_a.WaitFor(2));
  EXPECT_EQ(got_a.events(), (Events{"epoch 0", "tag:u"}));
  EXPECT_EQ(got_b.events(), (Events{"epoch 0", "tag:t"}));
  ASSERT_TRUE(a.IncrementEpoch().ok());
  EXPECT_EQ(*b.Epoch(), 0u);
}

TEST(RedisInvalidationBus, TheEpochIsSharedByEveryReplica) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  RedisInvalidationBus a(Options(redis.port()));
  RedisInvalidationBus b(Options(redis.port()));
  EXPECT_EQ(*a.Epoch(), 0u) << "never bumped";
  EXPECT_EQ(*a.IncrementEpoch(), 1u);
  EXPECT_EQ(*b.Epoch(), 1u);
  EXPECT_EQ(*b.IncrementEpoch(), 2u);
  EXPECT_EQ(*a.Epoch(), 2u);
  EXPECT_EQ(RawCommand(redis.port(), {"GET", "strata:epoch"}), "2");
}

TEST(RedisInvalidationBus, AnEpochKeyThatIsNotANumberReadsAsZero) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  RedisInvalidationBus bus(Options(redis.port()));
  for (const std::string garbage : {"abc", "-3", "18446744073709551616", ""}) {
    RawCommand(redis.port(), {"SET", "strata:epoch", garbage});
    StatusOr<uint64_t> epoch = bus.Epoch();
    ASSERT_TRUE(epoch.ok()) << garbage;
    EXPECT_EQ(*epoch, 0u) << garbage;
  }
  RawCommand(redis.port(), {"SET", "strata:epoch", "abc"});
  EXPECT_EQ(bus.IncrementEpoch().status().code(), StatusCode::kUnavailable);
  RawCommand(redis.port(), {"DEL", "strata:epoch"});
  RawCommand(redis.port(), {"SADD", "strata:epoch", "a set"});
  EXPECT_EQ(*bus.Epoch(), 0u) << "a key of another type";
  RawCommand(redis.port(), {"SET", "strata:epoch", "-3"});
  EXPECT_EQ(bus.IncrementEpoch().status().code(), StatusCode::kUnavailable) << "INCR gives -2";
}

TEST(RedisInvalidationBus, MessagesThatAreNotEventsAreIgnored) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  Received got;
  RedisInvalidationBus bus(Options(redis.port()));
  bus.Subscribe(got.Handler());
  ASSERT_TRUE(got.WaitFor(1));
  RawCommand(redis.port(), {"PUBLISH", "strata:invalidate", "bogus"});
  RawCommand(redis.port(), {"PUBLISH", "strata:invalidate", "epoch:-1"});
  ASSERT_TRUE(bus.Publish(TagEvent("t")).ok());
  ASSERT_TRUE(got.WaitFor(2));
  EXPECT_EQ(got.events(), (Events{"epoch 0", "tag:t"}));
  EXPECT_EQ(bus.ignored_messages(), 2);
}

TEST(RedisInvalidationBus, ABusSurvivesARedisRestartAndCatchesUpOnTheEpoch) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  Received got;
  RedisInvalidationBusOptions o = Options(redis.port());
  o.reconnect_backoff = milliseconds(500);  // the epoch below is planted before it reconnects
  RedisInvalidationBus bus(o);
  bus.Subscribe(got.Handler());
  ASSERT_TRUE(got.WaitFor(1));
  redis.Kill();
  EXPECT_EQ(bus.Publish(TagEvent("lost")).code(), StatusCode::kUnavailable);
  EXPECT_EQ(bus.Epoch().status().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(redis.Start());
  // The restarted server is empty (no persistence): plant the epoch another replica bumped.
  RawCommand(redis.port(), {"SET", "strata:epoch", "41"});
  ASSERT_TRUE(got.WaitFor(2)) << "resubscribed within the backoff";
  EXPECT_EQ(got.events().back(), "epoch 41") << "the catch-up event on reconnecting";
  EXPECT_EQ(bus.subscriptions(), 2);
  EXPECT_EQ(*bus.IncrementEpoch(), 42u) << "commands reconnect too";
  RedisInvalidationBus other(Options(redis.port()));
  ASSERT_TRUE(other.Publish(TagEvent("after")).ok());
  ASSERT_TRUE(got.WaitFor(3));
  EXPECT_EQ(got.events(), (Events{"epoch 0", "epoch 41", "tag:after"}));
}

// The server's process id, from INFO.
pid_t ServerPid(int port) {
  const std::string info = RawCommand(port, {"INFO", "server"});
  const size_t at = info.find("process_id:");
  return at == std::string::npos ? 0 : std::stoi(info.substr(at + 11));
}

TEST(RedisInvalidationBus, AServerThatStopsAnsweringIsNoticedByTheHealthCheck) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  const pid_t pid = ServerPid(redis.port());
  ASSERT_GT(pid, 0);
  // Continues the server whatever happens, so that the RedisServer can stop it.
  std::unique_ptr<const pid_t, std::function<void(const pid_t*)>> resume(
      &pid, [](const pid_t* p) { ::kill(*p, SIGCONT); });
  Received got;
  RedisInvalidationBusOptions o = Options(redis.port());
  o.health_check_interval = milliseconds(100);
  RedisInvalidationBus bus(o);
  bus.Subscribe(got.Handler());
  ASSERT_TRUE(got.WaitFor(1));
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);  // hung, with every connection still open
  std::this_thread::sleep_for(milliseconds(600));
  ASSERT_EQ(::kill(pid, SIGCONT), 0);
  ASSERT_TRUE(got.WaitFor(2)) << "the silent connection was given up and replaced";
  EXPECT_EQ(got.events(), (Events{"epoch 0", "epoch 0"}));
  EXPECT_GE(bus.subscriptions(), 2);
}

TEST(RedisInvalidationBus, DestroyingABusWhileRedisIsDownIsPrompt) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  Received got;
  RedisInvalidationBusOptions o = Options(redis.port());
  o.reconnect_backoff = milliseconds(10000);  // waiting in the backoff when destroyed
  auto bus = std::make_unique<RedisInvalidationBus>(o);
  bus->Subscribe(got.Handler());
  ASSERT_TRUE(got.WaitFor(1));
  redis.Kill();
  std::this_thread::sleep_for(milliseconds(100));
  const auto t0 = Clock::now();
  bus.reset();
  EXPECT_LT(SecondsSince(t0), 0.5);
}

TEST(RedisInvalidationBus, DestroyingABusThatWaitsOnAHungServerIsPrompt) {
  test::SilentServer hung;
  Received got;
  RedisInvalidationBusOptions o = Options(hung.port());
  o.timeout = milliseconds(5000);  // the SUBSCRIBE reply would be waited for that long
  auto bus = std::make_unique<RedisInvalidationBus>(o);
  bus->Subscribe(got.Handler());
  std::this_thread::sleep_for(milliseconds(200));
  const auto t0 = Clock::now();
  bus.reset();
  EXPECT_LT(SecondsSince(t0), 0.5);
  EXPECT_TRUE(got.events().empty());
}

TEST(RedisInvalidationBus, DestroyingAnIdleSubscribedBusIsPrompt) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  Received got;
  auto bus = std::make_unique<RedisInvalidationBus>(Options(redis.port()));
  bus->Subscribe(got.Handler());
  ASSERT_TRUE(got.WaitFor(1));
  const auto t0 = Clock::now();
  bus.reset();
  EXPECT_LT(SecondsSince(t0), 0.5);
}

TEST(RedisInvalidationBus, CommandsOnAHungOrMissingRedisAreUnavailableWithinTheTimeout) {
  test::SilentServer hung;
  RedisInvalidationBus bus(Options(hung.port()));
  auto t0 = Clock::now();
  EXPECT_EQ(bus.Publish(TagEvent("t")).code(), StatusCode::kUnavailable);
  EXPECT_EQ(bus.Epoch().status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(bus.IncrementEpoch().status().code(), StatusCode::kUnavailable);
  EXPECT_LT(SecondsSince(t0), 1.0) << "one timeout (200 ms) each";
  RedisInvalidationBusOptions none = Options(1);  // nothing listens there
  RedisInvalidationBus nowhere(none);
  t0 = Clock::now();
  EXPECT_EQ(nowhere.Publish(TagEvent("t")).code(), StatusCode::kUnavailable);
  EXPECT_LT(SecondsSince(t0), 0.5);
}

}  // namespace
}  // namespace strata::cache
