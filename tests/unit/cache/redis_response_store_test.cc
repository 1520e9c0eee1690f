// The Redis tier against a real redis-server on loopback (tests/support/redis_server.h).
#include "strata/cache/redis_response_store.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <chrono>
#include <string>
#include <thread>

#include "support/redis_server.h"

namespace strata::cache {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

CachedResponse Entry(std::string text) {
  CachedResponse r;
  r.token_ids = {7, 8, 9};
  r.text = std::move(text);
  r.prompt_tokens = 4;
  return r;
}

RedisOptions Options(const test::RedisServer& redis) {
  RedisOptions o;
  o.port = redis.port();
  o.timeout = milliseconds(200);
  o.retry_after = milliseconds(200);
  return o;
}

// Runs one command on its own connection (to plant values the store did not write).
void Raw(int port, const std::string& key, const std::string& value) {
  redisContext* c = redisConnect("127.0.0.1", port);
  ASSERT_TRUE(c != nullptr && c->err == 0);
  auto* r = static_cast<redisReply*>(
      redisCommand(c, "SET %b %b", key.data(), key.size(), value.data(), value.size()));
  ASSERT_NE(r, nullptr);
  freeReplyObject(r);
  redisFree(c);
}

TEST(RedisResponseStore, StoresAndReadsEntries) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running()) << "redis-server did not start (scripts/setup installs it)";
  RedisResponseStore store(Options(redis));
  EXPECT_EQ(store.tier(), "l2");
  EXPECT_TRUE(store.blocking());
  EXPECT_EQ(store.Get("k").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(store.Put("k", Entry("hello"), seconds(60)).ok());
  StatusOr<CachedResponse> got = store.Get("k");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->text, "hello");
  EXPECT_EQ(got->token_ids, (std::vector<int32_t>{7, 8, 9}));
}

TEST(RedisResponseStore, ASecondReplicaSeesTheFirstOnesEntries) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  RedisResponseStore a(Options(redis));
  RedisResponseStore b(Options(redis));
  ASSERT_TRUE(a.Put("shared", Entry("from a"), seconds(60)).ok());
  EXPECT_EQ(b.Get("shared")->text, "from a");
}

TEST(RedisResponseStore, EntriesExpireInRedis) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  RedisResponseStore store(Options(redis));
  ASSERT_TRUE(store.Put("brief", Entry("x"), seconds(1)).ok());
  EXPECT_TRUE(store.Get("brief").ok());
  std::this_thread::sleep_for(milliseconds(1100));
  EXPECT_EQ(store.Get("brief").status().code(), StatusCode::kNotFound);
}

TEST(RedisResponseStore, GarbageIsDroppedAndReportedAsDataLoss) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  RedisResponseStore store(Options(redis));
  Raw(redis.port(), "strata:bad", "not an entry");
  EXPECT_EQ(store.Get("bad").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(store.Get("bad").status().code(), StatusCode::kNotFound) << "deleted";
}

TEST(RedisResponseStore, ClearDeletesOnlyItsPrefix) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  RedisResponseStore store(Options(redis));
  for (int i = 0; i < 50; ++i) {
    std::string key = "k";
    key += std::to_string(i);  // (not "k" + ...: GCC 12's -Wrestrict false positive)
    ASSERT_TRUE(store.Put(key, Entry("v"), seconds(60)).ok());
  }
  Raw(redis.port(), "other:key", "kept");
  ASSERT_TRUE(store.Clear().ok());
  EXPECT_EQ(store.Get("k7").status().code(), StatusCode::kNotFound);
  RedisOptions other = Options(redis);
  other.key_prefix = "other:";
  RedisResponseStore other_store(other);
  EXPECT_EQ(other_store.Get("key").status().code(), StatusCode::kDataLoss)
      << "the other prefix's key is still there (and is not an entry)";
}

TEST(RedisResponseStore, ARedisThatDiesFailsFastAndIsReconnected) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  RedisResponseStore store(Options(redis));
  ASSERT_TRUE(store.Put("k", Entry("v"), seconds(60)).ok());
  redis.Kill();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(store.Get("k").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store.Put("k", Entry("v"), seconds(60)).code(), StatusCode::kUnavailable);
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(store.Get("k").ok());
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 2.0) << "a dead Redis must cost at most a timeout per retry period";
  ASSERT_TRUE(redis.Start());
  std::this_thread::sleep_for(milliseconds(250));  // past retry_after
  EXPECT_EQ(store.Get("k").status().code(), StatusCode::kNotFound) << "reconnected (empty)";
  EXPECT_TRUE(store.Put("k", Entry("again"), seconds(60)).ok());
  EXPECT_EQ(store.Get("k")->text, "again");
}

TEST(RedisResponseStore, NoServerAtAllIsUnavailable) {
  RedisOptions o;
  o.port = 1;  // nothing listens there
  o.timeout = milliseconds(100);
  RedisResponseStore store(o);
  EXPECT_EQ(store.Get("k").status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace strata::cache
