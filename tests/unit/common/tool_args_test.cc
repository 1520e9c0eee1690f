#include "strata/common/tool_args.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

constexpr ToolArgs kArgs("strata-test", /*usage_exit_code=*/2);

TEST(ToolArgs, ParsesWholeNumbers) {
  EXPECT_EQ(kArgs.Int("--n", "42"), 42);
  EXPECT_EQ(kArgs.Int("--n", "-7"), -7);
  EXPECT_EQ(kArgs.Int("--n", "0", 0), 0);
  EXPECT_DOUBLE_EQ(kArgs.Number("--x", "2.5"), 2.5);
  EXPECT_DOUBLE_EQ(kArgs.Number("--x", "1e3"), 1000.0);
}

TEST(ToolArgs, BadValuesExitWithTheUsageCodeAndNameTheFlag) {
  EXPECT_EXIT(kArgs.Int("--n", "12x"), ::testing::ExitedWithCode(2),
              "strata-test: --n expects an integer, got '12x'");
  EXPECT_EXIT(kArgs.Int("--n", ""), ::testing::ExitedWithCode(2), "--n expects an integer");
  EXPECT_EXIT(kArgs.Int("--n", "-1", 0), ::testing::ExitedWithCode(2),
              "--n must be at least 0, got -1");
  EXPECT_EXIT(kArgs.Number("--x", "fast"), ::testing::ExitedWithCode(2),
              "--x expects a number, got 'fast'");
  EXPECT_EXIT(kArgs.Fail("cannot open model"), ::testing::ExitedWithCode(1),
              "strata-test: cannot open model");
}

}  // namespace
}  // namespace strata
