#include "strata/cache/cache_selector.h"

#include <gtest/gtest.h>

namespace strata::cache {
namespace {

TEST(CacheSelector, ATagSelectsEntriesCarryingItInAnyNamespace) {
  const CacheSelector x = CacheSelector::Tag("x");
  EXPECT_TRUE(x.Selects({"", {"x"}}));
  EXPECT_TRUE(x.Selects({"other", {"a", "x"}}));
  EXPECT_FALSE(x.Selects({"", {"a", "y"}}));
  EXPECT_FALSE(x.Selects({"", {}}));
  EXPECT_FALSE(x.Selects({"x", {}})) << "a namespace named like the tag is not the tag";
  EXPECT_FALSE(x.Selects({"", {"x:y", "X"}})) << "whole, case-sensitive matches only";
}

TEST(CacheSelector, ANamespaceSelectsExactlyItsEntries) {
  EXPECT_TRUE(CacheSelector::Namespace("n").Selects({"n", {"t"}}));
  EXPECT_FALSE(CacheSelector::Namespace("n").Selects({"n:s", {}}));
  EXPECT_FALSE(CacheSelector::Namespace("n").Selects({"", {"n"}}));
  EXPECT_TRUE(CacheSelector::Namespace("").Selects({"", {}})) << "the default namespace";
  EXPECT_FALSE(CacheSelector::Namespace("").Selects({"n", {}}));
}

TEST(CacheSelector, AllSelectsEverything) {
  EXPECT_TRUE(CacheSelector::All().Selects({"", {}}));
  EXPECT_TRUE(CacheSelector::All().Selects({"n", {"t"}}));
  EXPECT_EQ(CacheSelector{}.kind, CacheSelector::Kind::kAll);
}

}  // namespace
}  // namespace strata::cache
