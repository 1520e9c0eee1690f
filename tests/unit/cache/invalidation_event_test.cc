// EncodeInvalidationEvent / DecodeInvalidationEvent (include/strata/cache/invalidation_bus.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "strata/cache/invalidation_bus.h"

namespace strata::cache {
namespace {

InvalidationEvent Selector(CacheSelector selector) {
  InvalidationEvent e;
  e.selector = std::move(selector);
  return e;
}

InvalidationEvent Epoch(uint64_t epoch) {
  InvalidationEvent e;
  e.kind = InvalidationEvent::Kind::kEpoch;
  e.epoch = epoch;
  return e;
}

void ExpectRoundTrip(const InvalidationEvent& event, const std::string& wire) {
  EXPECT_EQ(EncodeInvalidationEvent(event), wire);
  StatusOr<InvalidationEvent> back = DecodeInvalidationEvent(wire);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->kind, event.kind);
  if (event.kind == InvalidationEvent::Kind::kEpoch) {
    EXPECT_EQ(back->epoch, event.epoch);
  } else {
    EXPECT_EQ(back->selector.kind, event.selector.kind);
    EXPECT_EQ(back->selector.value, event.selector.value);
  }
}

TEST(InvalidationEvent, SelectorsRoundTripWhateverTheirBytes) {
  ExpectRoundTrip(Selector(CacheSelector::Tag("docs")), "tag:docs");
  ExpectRoundTrip(Selector(CacheSelector::Tag("a:b:")), "tag:a:b:");
  ExpectRoundTrip(Selector(CacheSelector::Tag("tag:x")), "tag:tag:x");
  ExpectRoundTrip(Selector(CacheSelector::Tag("all")), "tag:all");
  const std::string odd("\0\n\xff:ns:\x01 \xc3\xa9", 11);
  ExpectRoundTrip(Selector(CacheSelector::Tag(odd)), "tag:" + odd);
  ExpectRoundTrip(Selector(CacheSelector::Namespace("team:a")), "ns:team:a");
  ExpectRoundTrip(Selector(CacheSelector::Namespace(odd)), "ns:" + odd);
  ExpectRoundTrip(Selector(CacheSelector::Namespace("")), "ns:");
  ExpectRoundTrip(Selector(CacheSelector::All()), "all");
}

TEST(InvalidationEvent, EpochsRoundTripOverTheWholeRange) {
  ExpectRoundTrip(Epoch(0), "epoch:0");
  ExpectRoundTrip(Epoch(1), "epoch:1");
  ExpectRoundTrip(Epoch(std::numeric_limits<uint64_t>::max()), "epoch:18446744073709551615");
}

TEST(InvalidationEvent, MalformedTextIsRejected) {
  for (const std::string& bad : std::vector<std::string>{
           "",
           "tag:",  // a tag is never empty
           "tag",
           "tags:x",
           "TAG:x",
           "ns",
           "all ",
           "ALL",
           "all:",
           " all",
           "epoch",
           "epoch:",
           "epoch:-1",
           "epoch:+1",
           "epoch: 1",
           "epoch:1 ",
           "epoch:1x",
           "epoch:0x10",
           "epoch:1e3",
           "epoch:18446744073709551616",  // 2^64
           "epoch:99999999999999999999999",
           std::string("epoch:1\0", 8),
           "nope",
       }) {
    StatusOr<InvalidationEvent> got = DecodeInvalidationEvent(bad);
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace strata::cache
