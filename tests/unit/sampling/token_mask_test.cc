#include "strata/sampling/token_mask.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace strata::sampling {
namespace {

TEST(TokenMask, WordsCoverTheVocabulary) {
  EXPECT_EQ(TokenMaskWords(1), 1u);
  EXPECT_EQ(TokenMaskWords(32), 1u);
  EXPECT_EQ(TokenMaskWords(33), 2u);
  EXPECT_EQ(TokenMaskWords(262144), 8192u);
}

TEST(TokenMask, ClearedBitsBecomeMinusInfinityAndSetBitsKeepTheirLogit) {
  std::vector<float> logits(70);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i) * 0.5f - 3.0f;
  const std::vector<float> before = logits;
  std::vector<uint32_t> allowed(TokenMaskWords(70), 0);
  for (const int id : {0, 31, 32, 45, 69}) allowed[id / 32] |= 1u << (id % 32);
  ApplyTokenMask(allowed, logits);
  for (size_t i = 0; i < logits.size(); ++i) {
    const bool kept = i == 0 || i == 31 || i == 32 || i == 45 || i == 69;
    if (kept) {
      EXPECT_EQ(logits[i], before[i]) << i;
    } else {
      EXPECT_TRUE(std::isinf(logits[i]) && logits[i] < 0) << i;
    }
  }
}

TEST(TokenMask, AFullWordIsLeftAloneAndIdsBeyondTheMaskAreCut) {
  std::vector<float> logits(40, 1.0f);
  const std::vector<uint32_t> allowed = {~uint32_t{0}};  // covers ids 0..31 only
  ApplyTokenMask(allowed, logits);
  for (size_t i = 0; i < 32; ++i) EXPECT_EQ(logits[i], 1.0f) << i;
  for (size_t i = 32; i < 40; ++i) EXPECT_TRUE(std::isinf(logits[i])) << i;
}

TEST(TokenMask, AnyTokenAllowedSeesASingleBit) {
  std::vector<uint32_t> allowed(4, 0);
  EXPECT_FALSE(AnyTokenAllowed(allowed));
  EXPECT_FALSE(AnyTokenAllowed({}));
  allowed[3] = 1u << 31;
  EXPECT_TRUE(AnyTokenAllowed(allowed));
}

}  // namespace
}  // namespace strata::sampling
