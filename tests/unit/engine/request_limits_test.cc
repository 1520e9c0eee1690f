// CheckRequestFits: the one rule every admission path uses.
#include "strata/engine/request_limits.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace strata::engine {
namespace {

constexpr RequestCapacity kCapacity{/*context_tokens=*/64, /*kv_blocks=*/10, /*block_size=*/4};

TEST(CheckRequestFits, ExactlyFillingTheContextFitsAndOneMoreDoesNot) {
  EXPECT_TRUE(CheckRequestFits(10, 30, kCapacity).ok());  // 39 KV tokens: 10 blocks
  RequestCapacity roomy = kCapacity;
  roomy.kv_blocks = 100;
  EXPECT_TRUE(CheckRequestFits(10, 54, roomy).ok());
  Status over = CheckRequestFits(10, 55, roomy);
  EXPECT_EQ(over.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(over.message().find("prompt (10 tokens) + max_tokens (55) exceed the model's context "
                                "of 64 tokens"),
            std::string::npos)
      << over.message();
}

TEST(CheckRequestFits, TheKvOfTheLastTokenIsNotCountedButEveryOtherIs) {
  // 10 + 31 - 1 = 40 tokens: 10 blocks of 4, the whole cache.
  EXPECT_TRUE(CheckRequestFits(10, 31, kCapacity).ok());
  Status over = CheckRequestFits(10, 32, kCapacity);  // 41 tokens: 11 blocks
  EXPECT_EQ(over.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(
      over.message().find("need 11 KV cache blocks of 4 tokens, but the whole cache holds 10"),
      std::string::npos)
      << over.message();
}

TEST(CheckRequestFits, EmptyPromptsZeroMaxTokensAndHugeValuesAreRefusedWithoutOverflow) {
  EXPECT_NE(CheckRequestFits(0, 5, kCapacity).message().find("prompt must not be empty"),
            std::string::npos);
  EXPECT_NE(CheckRequestFits(5, 0, kCapacity).message().find("max_tokens must be at least 1"),
            std::string::npos);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(CheckRequestFits(5, kMax, kCapacity).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckRequestFits(kMax, 1, kCapacity).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata::engine
