#include "bench/load/workload.h"

#include <gtest/gtest.h>

#include <set>

namespace strata::bench {
namespace {

TEST(ParseIntRange, AcceptsFixedValuesAndRanges) {
  const auto fixed = ParseIntRange("--prompt-tokens", "128", 1);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->min, 128);
  EXPECT_EQ(fixed->max, 128);
  const auto range = ParseIntRange("--prompt-tokens", "64:256", 1);
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(range->min, 64);
  EXPECT_EQ(range->max, 256);
}

TEST(ParseIntRange, RejectsBadRangesNamingTheFlag) {
  for (const char* bad : {"", "abc", "0", "5:4", "1:", ":5", "1:2:3", "12x", "-3"}) {
    const auto r = ParseIntRange("--output-tokens", bad, 1);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--output-tokens"), std::string::npos);
  }
}

TEST(Workload, RandomRequestsAreReproducibleDistinctAndWithinRanges) {
  const Workload w = Workload::Random({64, 256}, {16, 16}, {1000, 29999}, 42);
  std::set<std::vector<int32_t>> first_blocks;
  std::set<size_t> lengths;
  for (int64_t i = 0; i < 200; ++i) {
    const RequestSpec a = w.Request(i);
    EXPECT_EQ(a.prompt_token_ids, w.Request(i).prompt_token_ids);  // a function of (seed, i)
    EXPECT_FALSE(a.has_text);
    EXPECT_EQ(a.output_tokens, 16);
    ASSERT_GE(a.prompt_token_ids.size(), 64u);
    ASSERT_LE(a.prompt_token_ids.size(), 256u);
    lengths.insert(a.prompt_token_ids.size());
    for (int32_t id : a.prompt_token_ids) {
      ASSERT_GE(id, 1000);
      ASSERT_LE(id, 29999);
    }
    // No two requests share even their first 16 tokens (a prefix-cache block).
    first_blocks.emplace(a.prompt_token_ids.begin(), a.prompt_token_ids.begin() + 16);
  }
  EXPECT_EQ(first_blocks.size(), 200u);
  EXPECT_GT(lengths.size(), 50u);  // lengths really vary
  // Another seed gives other prompts.
  EXPECT_NE(Workload::Random({64, 256}, {16, 16}, {1000, 29999}, 43).Request(0).prompt_token_ids,
            w.Request(0).prompt_token_ids);
}

TEST(Workload, SampledRequestsEachGetTheirOwnSeed) {
  Workload w = Workload::Random({8, 8}, {4, 4}, {1000, 29999}, 42);
  EXPECT_EQ(w.Request(0).temperature, 0);  // greedy unless asked
  w.SetSampling(1.0, 0.95);
  std::set<uint64_t> seeds;
  for (int64_t i = 0; i < 100; ++i) {
    const RequestSpec r = w.Request(i);
    EXPECT_EQ(r.temperature, 1.0);
    EXPECT_EQ(r.top_p, 0.95);
    EXPECT_EQ(r.seed, w.Request(i).seed);  // a function of (seed, i)
    EXPECT_LT(r.seed, uint64_t{1} << 31);  // every server takes it
    seeds.insert(r.seed);
  }
  EXPECT_EQ(seeds.size(), 100u);
  RequestSpec entry;
  entry.prompt_token_ids = {1};
  Workload d = Workload::FromDataset({entry});
  d.SetSampling(0.7, 1.0);
  EXPECT_EQ(d.Request(3).temperature, 0.7);
  EXPECT_EQ(d.Request(3).top_k, -1);  // not given: not sent
  d.SetSampling(0.7, 1.0, 40, 0.05);
  EXPECT_EQ(d.Request(3).top_k, 40);
  EXPECT_EQ(d.Request(3).min_p, 0.05);
  EXPECT_NE(d.Request(3).seed, d.Request(4).seed);
  Workload other = Workload::FromDataset({entry}, 7);  // another --seed: other sampling seeds
  other.SetSampling(0.7, 1.0);
  EXPECT_NE(other.Request(3).seed, d.Request(3).seed);
}

TEST(Workload, DatasetEntriesCycle) {
  RequestSpec a, b;
  a.prompt_token_ids = {1};
  b.prompt_token_ids = {2};
  const Workload w = Workload::FromDataset({a, b});
  EXPECT_TRUE(w.from_dataset());
  EXPECT_EQ(w.Request(0).prompt_token_ids, a.prompt_token_ids);
  EXPECT_EQ(w.Request(1).prompt_token_ids, b.prompt_token_ids);
  EXPECT_EQ(w.Request(4).prompt_token_ids, a.prompt_token_ids);
}

}  // namespace
}  // namespace strata::bench
