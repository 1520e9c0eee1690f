#include "strata/sampling/token_mask.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
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

// Every kind of word (empty, full, sparse, dense) at random over a vocabulary that does not end
// on a word, with a mask shorter than the vocabulary: each logit follows its own bit.
TEST(TokenMask, EveryLogitFollowsItsBitOverRandomMasks) {
  std::mt19937 rng(17);
  for (const double density : {0.002, 0.3, 0.5, 0.97}) {
    const size_t vocab = 32 * 200 + 13;
    std::vector<uint32_t> allowed(TokenMaskWords(vocab) - 2, 0);  // the last ids are not covered
    std::bernoulli_distribution bit(density);
    for (size_t w = 0; w < allowed.size(); ++w) {
      if (w % 7 == 0) allowed[w] = ~uint32_t{0};
      if (w % 7 == 1) continue;  // empty
      for (int j = 0; j < 32 && w % 7 != 0; ++j) allowed[w] |= (bit(rng) ? 1u : 0u) << j;
    }
    std::vector<float> logits(vocab);
    std::uniform_real_distribution<float> value(-8.0f, 8.0f);
    for (float& x : logits) x = value(rng);
    const std::vector<float> before = logits;
    ApplyTokenMask(allowed, logits);
    for (size_t i = 0; i < vocab; ++i) {
      const bool kept = i / 32 < allowed.size() && ((allowed[i / 32] >> (i % 32)) & 1u) != 0;
      if (kept) {
        ASSERT_EQ(logits[i], before[i]) << "density " << density << " id " << i;
      } else {
        ASSERT_TRUE(std::isinf(logits[i]) && logits[i] < 0) << "density " << density << " id " << i;
      }
    }
  }
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
