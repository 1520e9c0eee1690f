// The Redis tier against a real redis-server on loopback (tests/support/redis_server.h).
#include "strata/cache/redis_response_store.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "support/redis_server.h"
#include "support/silent_server.h"

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

// Runs one command on its own connection and renders the reply: an integer in decimal, a
// string or status as is, "(nil)", "(error) <message>", an array as "[a,b]".
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
    auto render = [](const redisReply* x) -> std::string {
      switch (x->type) {
        case REDIS_REPLY_INTEGER:
          return std::to_string(x->integer);
        case REDIS_REPLY_NIL:
          return "(nil)";
        case REDIS_REPLY_ERROR: {
          std::string error = "(error) ";  // (not "..." + ...: GCC 12's -Wrestrict false positive)
          error.append(x->str, x->len);
          return error;
        }
        case REDIS_REPLY_STRING:
        case REDIS_REPLY_STATUS:
          return std::string(x->str, x->len);
        default:
          return "?";
      }
    };
    if (r->type == REDIS_REPLY_ARRAY) {
      out = "[";
      for (size_t i = 0; i < r->elements; ++i) {
        if (i > 0) out += ',';
        out += render(r->element[i]);
      }
      out += "]";
    } else {
      out = render(r);
    }
    freeReplyObject(r);
  }
  redisFree(c);
  return out;
}

int64_t Integer(int port, const std::vector<std::string>& args) {
  return std::stoll(RawCommand(port, args));
}

EntryLabels Labels(std::string ns, std::vector<std::string> tags) {
  return EntryLabels{std::move(ns), std::move(tags)};
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(RedisResponseStore, StoresAndReadsEntries) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running()) << "redis-server did not start (scripts/setup installs it)";
  RedisResponseStore store(Options(redis));
  EXPECT_EQ(store.tier(), "l2");
  EXPECT_TRUE(store.blocking());
  EXPECT_EQ(store.Get("k").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(store.Put("k", Entry("hello"), seconds(60), {}).ok());
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
  ASSERT_TRUE(a.Put("shared", Entry("from a"), seconds(60), {}).ok());
  EXPECT_EQ(b.Get("shared")->text, "from a");
}

TEST(RedisResponseStore, EntriesExpireInRedis) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  RedisResponseStore store(Options(redis));
  ASSERT_TRUE(store.Put("brief", Entry("x"), seconds(1), {}).ok());
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
    ASSERT_TRUE(store.Put(key, Entry("v"), seconds(60), {}).ok());
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
  ASSERT_TRUE(store.Put("k", Entry("v"), seconds(60), {}).ok());
  redis.Kill();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(store.Get("k").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store.Put("k", Entry("v"), seconds(60), {}).code(), StatusCode::kUnavailable);
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(store.Get("k").ok());
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 2.0) << "a dead Redis must cost at most a timeout per retry period";
  ASSERT_TRUE(redis.Start());
  std::this_thread::sleep_for(milliseconds(250));  // past retry_after
  EXPECT_EQ(store.Get("k").status().code(), StatusCode::kNotFound) << "reconnected (empty)";
  EXPECT_TRUE(store.Put("k", Entry("again"), seconds(60), {}).ok());
  EXPECT_EQ(store.Get("k")->text, "again");
}

TEST(RedisResponseStore, NoServerAtAllIsUnavailable) {
  RedisOptions o;
  o.port = 1;  // nothing listens there
  o.timeout = milliseconds(100);
  RedisResponseStore store(o);
  EXPECT_EQ(store.Get("k").status().code(), StatusCode::kUnavailable);
}

// Five entries: a {x, y}, b {y}, c {x} in the default namespace; d {x}, e {} in "other".
void PutFive(RedisResponseStore& store) {
  ASSERT_TRUE(store.Put("a", Entry("a"), seconds(60), Labels("", {"x", "y"})).ok());
  ASSERT_TRUE(store.Put("b", Entry("b"), seconds(60), Labels("", {"y"})).ok());
  ASSERT_TRUE(store.Put("c", Entry("c"), seconds(60), Labels("", {"x"})).ok());
  ASSERT_TRUE(store.Put("d", Entry("d"), seconds(60), Labels("other", {"x"})).ok());
  ASSERT_TRUE(store.Put("e", Entry("e"), seconds(60), Labels("other", {})).ok());
}

// The keys of PutFive's entries that are still there, e.g. "abe".
std::string Present(RedisResponseStore& store) {
  std::string out;
  for (const char* key : {"a", "b", "c", "d", "e"}) {
    if (store.Get(key).ok()) out += key;
  }
  return out;
}

TEST(RedisResponseStore, InvalidatingATagDropsExactlyTheEntriesCarryingIt) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  RedisResponseStore store(Options(redis));
  PutFive(store);
  ASSERT_EQ(Present(store), "abcde");
  StatusOr<int64_t> dropped = store.Invalidate(CacheSelector::Tag("x"));
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  EXPECT_EQ(*dropped, 3);
  EXPECT_EQ(Present(store), "be") << "a, c and d carried x, in either namespace";
  EXPECT_EQ(RawCommand(redis.port(), {"EXISTS", "strata:tag:x"}), "0") << "the index went too";
  // y's index still names a, which is gone already: counted, as the interface allows.
  EXPECT_EQ(*store.Invalidate(CacheSelector::Tag("y")), 2);
  EXPECT_EQ(Present(store), "e");
  EXPECT_EQ(*store.Invalidate(CacheSelector::Tag("x")), 0) << "nothing tagged x any more";
  EXPECT_EQ(*store.Invalidate(CacheSelector::Tag("never")), 0);
}

TEST(RedisResponseStore, InvalidatingANamespaceDropsExactlyItsEntries) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  RedisResponseStore store(Options(redis));
  PutFive(store);
  EXPECT_EQ(*store.Invalidate(CacheSelector::Namespace("other")), 2);
  EXPECT_EQ(Present(store), "abc");
  EXPECT_EQ(*store.Invalidate(CacheSelector::Namespace("")), 3) << "the default namespace";
  EXPECT_EQ(Present(store), "");
}

TEST(RedisResponseStore, TagsAndNamespacesAreMatchedWholeWhateverTheirBytes) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  RedisResponseStore store(Options(redis));
  const std::string odd("a:b\0*?[\n\xff", 9);
  ASSERT_TRUE(store.Put("1", Entry("1"), seconds(60), Labels("n:s", {"a:b"})).ok());
  ASSERT_TRUE(store.Put("2", Entry("2"), seconds(60), Labels("n", {"a"})).ok());
  ASSERT_TRUE(store.Put("3", Entry("3"), seconds(60), Labels(odd, {odd})).ok());
  EXPECT_EQ(*store.Invalidate(CacheSelector::Tag("a")), 1);
  EXPECT_FALSE(store.Get("2").ok());
  EXPECT_TRUE(store.Get("1").ok()) << "tag a:b is not tag a";
  EXPECT_EQ(*store.Invalidate(CacheSelector::Namespace("n")), 1) << "2, gone already";
  EXPECT_TRUE(store.Get("1").ok()) << "namespace n:s is not n";
  EXPECT_EQ(*store.Invalidate(CacheSelector::Tag(odd)), 1);
  EXPECT_FALSE(store.Get("3").ok());
  EXPECT_TRUE(store.Get("1").ok());
  EXPECT_EQ(*store.Invalidate(CacheSelector::Namespace("n:s")), 1);
  EXPECT_FALSE(store.Get("1").ok());
}

TEST(RedisResponseStore, InvalidatingAllDropsEveryEntryButKeepsTheEpoch) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  RedisResponseStore store(Options(redis));
  PutFive(store);
  Raw(redis.port(), "strata:epoch", "7");
  Raw(redis.port(), "other:key", "kept");
  StatusOr<int64_t> dropped = store.Invalidate(CacheSelector::All());
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  EXPECT_EQ(*dropped, 5) << "entries only, not the index sets";
  EXPECT_EQ(Present(store), "");
  EXPECT_EQ(RawCommand(redis.port(), {"KEYS", "strata:*"}), "[strata:epoch]")
      << "index sets gone, the epoch kept";
  EXPECT_EQ(RawCommand(redis.port(), {"GET", "strata:epoch"}), "7");
  EXPECT_EQ(RawCommand(redis.port(), {"GET", "other:key"}), "kept");
  PutFive(store);
  ASSERT_TRUE(store.Clear().ok());
  EXPECT_EQ(RawCommand(redis.port(), {"KEYS", "strata:*"}), "[strata:epoch]") << "Clear too";
}

TEST(RedisResponseStore, APrefixWithGlobCharactersClearsOnlyItself) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  RedisOptions star = Options(redis);
  star.key_prefix = "s*:";
  RedisResponseStore store(star);
  ASSERT_TRUE(store.Put("k", Entry("v"), seconds(60), {}).ok());
  Raw(redis.port(), "sx:k", "not ours");
  EXPECT_EQ(*store.Invalidate(CacheSelector::All()), 1);
  EXPECT_EQ(RawCommand(redis.port(), {"GET", "sx:k"}), "not ours");
}

TEST(RedisResponseStore, IndexSetsExpireNoEarlierThanTheirLongestLivedEntry) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  RedisResponseStore store(Options(redis));
  ASSERT_TRUE(store.Put("a", Entry("a"), seconds(60), Labels("n", {"t"})).ok());
  for (const char* set : {"strata:tag:t", "strata:ns:n"}) {
    const int64_t ttl = Integer(redis.port(), {"TTL", set});
    EXPECT_GT(ttl, 55) << set;
    EXPECT_LE(ttl, 60) << set;
  }
  ASSERT_TRUE(store.Put("b", Entry("b"), seconds(600), Labels("n", {"t"})).ok());
  EXPECT_GT(Integer(redis.port(), {"TTL", "strata:tag:t"}), 590) << "raised to the longer TTL";
  ASSERT_TRUE(store.Put("c", Entry("c"), seconds(5), Labels("n", {"t"})).ok());
  EXPECT_GT(Integer(redis.port(), {"TTL", "strata:tag:t"}), 590) << "never lowered";
  EXPECT_GT(Integer(redis.port(), {"TTL", "strata:ns:n"}), 590);
  EXPECT_EQ(Integer(redis.port(), {"TTL", "strata:ns:"}), -2) << "unused namespace: no set";
  EXPECT_EQ(Integer(redis.port(), {"SCARD", "strata:tag:t"}), 3);
}

TEST(RedisResponseStore, IndexSetsVanishWithTheirEntries) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  RedisResponseStore store(Options(redis));
  ASSERT_TRUE(store.Put("brief", Entry("x"), seconds(1), Labels("", {"t"})).ok());
  EXPECT_EQ(RawCommand(redis.port(), {"EXISTS", "strata:tag:t", "strata:ns:"}), "2");
  std::this_thread::sleep_for(milliseconds(1100));
  EXPECT_EQ(RawCommand(redis.port(), {"EXISTS", "strata:brief", "strata:tag:t", "strata:ns:"}),
            "0");
}

TEST(RedisResponseStore, AnEntryStoredAfterAnInvalidationIsIndexedAfresh) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  RedisResponseStore store(Options(redis));
  ASSERT_TRUE(store.Put("a", Entry("a"), seconds(60), Labels("", {"t"})).ok());
  EXPECT_EQ(*store.Invalidate(CacheSelector::Tag("t")), 1);
  ASSERT_TRUE(store.Put("a", Entry("a2"), seconds(60), Labels("", {"t"})).ok());
  EXPECT_EQ(store.Get("a")->text, "a2");
  EXPECT_EQ(*store.Invalidate(CacheSelector::Tag("t")), 1);
  EXPECT_FALSE(store.Get("a").ok());
  EXPECT_EQ(RawCommand(redis.port(), {"KEYS", "strata:purge:*"}), "[]") << "no set left aside";
}

TEST(RedisResponseStore, InvalidatingAThousandEntriesTakesSeveralBatches) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  RedisResponseStore store(Options(redis));
  for (int i = 0; i < 1200; ++i) {
    std::string key = "k";
    key += std::to_string(i);
    ASSERT_TRUE(store.Put(key, Entry("v"), seconds(60), Labels("", {"bulk"})).ok());
  }
  ASSERT_TRUE(store.Put("kept", Entry("v"), seconds(60), Labels("", {"other"})).ok());
  EXPECT_EQ(*store.Invalidate(CacheSelector::Tag("bulk")), 1200);
  EXPECT_EQ(Integer(redis.port(), {"DBSIZE"}), 3) << "kept, and its two index sets";
}

TEST(RedisResponseStore, AnIndexKeyThatIsNotASetIsDeletedAndReported) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  RedisResponseStore store(Options(redis));
  Raw(redis.port(), "strata:tag:bad", "a string, not a set");
  EXPECT_EQ(store.Put("k", Entry("v"), seconds(60), Labels("", {"bad"})).code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(store.Invalidate(CacheSelector::Tag("bad")).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(RawCommand(redis.port(), {"KEYS", "strata:*:bad*"}), "[]");
  EXPECT_TRUE(store.Put("k", Entry("v"), seconds(60), Labels("", {"bad"})).ok())
      << "the connection stayed usable and no retry period started";
  EXPECT_EQ(*store.Invalidate(CacheSelector::Tag("bad")), 1);
}

TEST(RedisResponseStore, InvalidatingOnADeadRedisIsUnavailableWithinTheTimeout) {
  test::RedisServer redis;
  ASSERT_TRUE(redis.running());
  RedisResponseStore store(Options(redis));
  PutFive(store);
  redis.Kill();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(store.Invalidate(CacheSelector::Tag("x")).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store.Invalidate(CacheSelector::Namespace("")).status().code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(store.Invalidate(CacheSelector::All()).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store.Clear().code(), StatusCode::kUnavailable);
  EXPECT_LT(SecondsSince(t0), 1.0);
}

TEST(RedisResponseStore, InvalidatingOnAHungRedisGivesUpAfterTheTimeout) {
  test::SilentServer hung;
  RedisOptions o;
  o.port = hung.port();
  o.timeout = milliseconds(200);
  for (const CacheSelector& selector :
       {CacheSelector::Tag("x"), CacheSelector::Namespace("n"), CacheSelector::All()}) {
    RedisResponseStore store(o);  // a fresh one each time: no retry period to hide behind
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(store.Invalidate(selector).status().code(), StatusCode::kUnavailable);
    EXPECT_EQ(store.Put("k", Entry("v"), seconds(60), Labels("", {"x"})).code(),
              StatusCode::kUnavailable)
        << "within the retry period";
    const double took = SecondsSince(t0);
    EXPECT_GE(took, 0.15) << "it did wait for a reply";
    EXPECT_LT(took, 1.0);
  }
}

}  // namespace
}  // namespace strata::cache
