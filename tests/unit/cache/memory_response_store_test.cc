#include "strata/cache/memory_response_store.h"

#include <gtest/gtest.h>

#include <string>

namespace strata::cache {
namespace {

using std::chrono::seconds;
using std::chrono::steady_clock;

CachedResponse Entry(size_t text_bytes) {
  CachedResponse r;
  r.token_ids = {1, 2, 3};
  r.text = std::string(text_bytes, 'x');
  return r;
}

TEST(MemoryResponseStore, GetsWhatWasPut) {
  MemoryResponseStore store(1 << 20);
  EXPECT_EQ(store.Get("k").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(store.Put("k", Entry(10), seconds(60), {}).ok());
  StatusOr<CachedResponse> got = store.Get("k");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->text, std::string(10, 'x'));
  EXPECT_EQ(store.stats().entries, 1);
  EXPECT_GT(store.stats().bytes, 10);
  EXPECT_EQ(store.tier(), "l1");
}

TEST(MemoryResponseStore, EvictsTheLeastRecentlyUsedToStayUnderItsBytes) {
  const size_t one = CachedResponseBytes(Entry(1000)) + 2;  // + 2 x a one-byte key
  MemoryResponseStore store(3 * one);
  ASSERT_TRUE(store.Put("a", Entry(1000), seconds(60), {}).ok());
  ASSERT_TRUE(store.Put("b", Entry(1000), seconds(60), {}).ok());
  ASSERT_TRUE(store.Put("c", Entry(1000), seconds(60), {}).ok());
  ASSERT_TRUE(store.Get("a").ok());  // b is now the least recently used
  ASSERT_TRUE(store.Put("d", Entry(1000), seconds(60), {}).ok());
  EXPECT_TRUE(store.Get("a").ok());
  EXPECT_FALSE(store.Get("b").ok());
  EXPECT_TRUE(store.Get("c").ok());
  EXPECT_TRUE(store.Get("d").ok());
  EXPECT_LE(store.stats().bytes, static_cast<int64_t>(3 * one));
}

TEST(MemoryResponseStore, EntriesExpireAfterTheirTtl) {
  steady_clock::time_point now = steady_clock::now();
  MemoryResponseStore store(1 << 20, [&] { return now; });
  ASSERT_TRUE(store.Put("short", Entry(1), seconds(5), {}).ok());
  ASSERT_TRUE(store.Put("long", Entry(1), seconds(50), {}).ok());
  now += seconds(4);
  EXPECT_TRUE(store.Get("short").ok());
  now += seconds(1);
  EXPECT_EQ(store.Get("short").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store.Get("long").ok());
  EXPECT_EQ(store.stats().entries, 1);
}

TEST(MemoryResponseStore, AnEntryLargerThanTheStoreIsNotKept) {
  MemoryResponseStore store(100);
  ASSERT_TRUE(store.Put("big", Entry(1000), seconds(60), {}).ok());
  EXPECT_FALSE(store.Get("big").ok());
  EXPECT_EQ(store.stats().bytes, 0);
}

TEST(MemoryResponseStore, PutReplacesAndClearEmpties) {
  MemoryResponseStore store(1 << 20);
  ASSERT_TRUE(store.Put("k", Entry(1), seconds(60), {}).ok());
  ASSERT_TRUE(store.Put("k", Entry(2), seconds(60), {}).ok());
  EXPECT_EQ(store.Get("k")->text.size(), 2u);
  EXPECT_EQ(store.stats().entries, 1);
  ASSERT_TRUE(store.Clear().ok());
  EXPECT_EQ(store.stats().entries, 0);
  EXPECT_EQ(store.stats().bytes, 0);
  EXPECT_FALSE(store.Get("k").ok());
}

}  // namespace
}  // namespace strata::cache
