#include "strata/embedding/pooling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace strata::embedding {
namespace {

TEST(Pooling, MeanPoolAveragesEachDimensionOverTokens) {
  const std::vector<float> hidden = {1, 2, 3,  //
                                     3, 4, 5,  //
                                     5, 0, 1};
  std::vector<float> out(3);
  MeanPool(hidden.data(), 3, 3, out.data());
  EXPECT_EQ(out, (std::vector<float>{3, 2, 3}));
  MeanPool(hidden.data(), 1, 3, out.data());
  EXPECT_EQ(out, (std::vector<float>{1, 2, 3}));
  MeanPool(hidden.data(), 0, 3, out.data());
  EXPECT_EQ(out, (std::vector<float>{0, 0, 0}));
}

TEST(Pooling, L2NormalizeGivesUnitLengthAndLeavesZeroAlone) {
  std::vector<float> v = {3, 4};
  L2Normalize(v.data(), 2);
  EXPECT_FLOAT_EQ(v[0], 0.6f);
  EXPECT_FLOAT_EQ(v[1], 0.8f);
  std::vector<float> zero = {0, 0, 0};
  L2Normalize(zero.data(), 3);
  EXPECT_EQ(zero, (std::vector<float>{0, 0, 0}));
  std::vector<float> tiny = {1e-30f, 0};
  L2Normalize(tiny.data(), 2);
  EXPECT_FLOAT_EQ(tiny[0], 1e-18f);  // torch's eps: divided by 1e-12, not by the norm
}

}  // namespace
}  // namespace strata::embedding
