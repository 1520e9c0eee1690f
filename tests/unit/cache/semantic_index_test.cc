#include "strata/cache/semantic_index.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace strata::cache {
namespace {

std::vector<float> Unit(std::vector<float> v) {
  float norm = 0;
  for (float x : v) norm += x * x;
  for (float& x : v) x /= std::sqrt(norm);
  return v;
}

std::string Key(int i) {
  std::string key = "k";
  key += std::to_string(i);
  return key;
}

std::vector<float> Random(std::mt19937& rng, int dim) {
  std::normal_distribution<float> n;
  std::vector<float> v(dim);
  for (float& x : v) x = n(rng);
  return Unit(v);
}

TEST(SemanticIndex, FindsTheNearestAboveTheThresholdBestFirst) {
  SemanticIndex index(3, 100);
  index.Add("ctx", Unit({1, 0, 0}), "k1", "one", {});
  index.Add("ctx", Unit({1, 0.3f, 0}), "k2", "two", {});
  index.Add("ctx", Unit({0, 1, 0}), "k3", "three", {});
  std::vector<SemanticMatch> m = index.Search("ctx", Unit({1, 0.05f, 0}), 3, 0.9f);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].key, "k1");
  EXPECT_EQ(m[0].text, "one");
  EXPECT_EQ(m[1].key, "k2");
  EXPECT_GT(m[0].similarity, m[1].similarity);
  EXPECT_TRUE(index.Search("other context", Unit({1, 0, 0}), 3, 0.5f).empty());
}

TEST(SemanticIndex, RemoveInvalidateAndTheBoundDropEntries) {
  SemanticIndex index(2, 3);
  index.Add("a", Unit({1, 0}), "k1", "t", {"", {"x"}});
  index.Add("a", Unit({1, 0.1f}), "k2", "t", {"ns", {}});
  index.Add("b", Unit({1, 0}), "k3", "t", {});
  index.Add("b", Unit({1, 0}), "k3", "t", {});  // already there
  EXPECT_EQ(index.size(), 3u);
  index.Add("b", Unit({0, 1}), "k4", "t", {});  // over the bound: k1 (the oldest) leaves
  EXPECT_EQ(index.size(), 3u);
  for (const SemanticMatch& m : index.Search("a", Unit({1, 0}), 5, 0.5f)) EXPECT_NE(m.key, "k1");
  EXPECT_EQ(index.Invalidate(CacheSelector::Namespace("ns")), 1);
  EXPECT_TRUE(index.Search("a", Unit({1, 0}), 5, 0.5f).empty());
  index.Remove("b", "k3");
  EXPECT_EQ(index.size(), 1u);
  EXPECT_EQ(index.Invalidate(CacheSelector::All()), 1);
  EXPECT_EQ(index.size(), 0u);
}

TEST(SemanticIndex, ManyEntriesChurnWithoutLosingRecall) {
  // Adds and removes many entries (forcing resizes and rebuilds); every live entry is still
  // its own nearest neighbour.
  std::mt19937 rng(7);
  SemanticIndex index(16, 400);
  std::vector<std::vector<float>> vectors;
  for (int i = 0; i < 1000; ++i) {
    vectors.push_back(Random(rng, 16));
    index.Add("c", vectors.back(), Key(i), "t", {});
    if (i % 3 == 0) index.Remove("c", Key(i / 2));
  }
  EXPECT_LE(index.size(), 400u);
  int found = 0;
  int live = 0;
  for (int i = 600; i < 1000; ++i) {
    std::vector<SemanticMatch> m = index.Search("c", vectors[i], 1, 0.99f);
    if (m.empty()) continue;  // evicted or removed
    ++live;
    if (m[0].key == Key(i)) ++found;
  }
  EXPECT_GT(live, 200);
  EXPECT_EQ(found, live);
}

}  // namespace
}  // namespace strata::cache
