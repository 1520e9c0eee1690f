#include "strata/common/status.h"

#include <gtest/gtest.h>

#include "strata/common/checked_math.h"

namespace strata {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("x must be even, got " + std::to_string(x));
  return x / 2;
}

StatusOr<int> Quarter(int x) {
  STRATA_ASSIGN_OR_RETURN(int half, Half(x));
  STRATA_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

TEST(Status, CodesSpellLikeGrpc) {
  EXPECT_EQ(OkStatus().ToString(), "OK");
  EXPECT_EQ(InvalidArgumentError("bad").ToString(), "INVALID_ARGUMENT: bad");
  EXPECT_EQ(ResourceExhaustedError("full").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(static_cast<int>(StatusCode::kResourceExhausted), 8);  // gRPC's number
  EXPECT_EQ(StatusCodeName(StatusCode::kFailedPrecondition), "FAILED_PRECONDITION");
}

TEST(Status, WithContextPrefixesTheMessageAndKeepsOk) {
  Status s = NotFoundError("no key").WithContext("model.gguf");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "model.gguf: no key");
  EXPECT_TRUE(OkStatus().WithContext("x").ok());
}

TEST(StatusOr, AssignOrReturnPropagatesTheFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  auto odd = Quarter(6);
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().message(), "x must be even, got 3");
}

TEST(CheckedMath, DetectsOverflow) {
  uint64_t out = 0;
  EXPECT_TRUE(CheckedAdd(1, 2, &out));
  EXPECT_EQ(out, 3u);
  EXPECT_FALSE(CheckedAdd(~uint64_t{0}, 1, &out));
  EXPECT_FALSE(CheckedMul(uint64_t{1} << 32, uint64_t{1} << 32, &out));
  EXPECT_TRUE(CheckedAlignUp(33, 32, &out));
  EXPECT_EQ(out, 64u);
  EXPECT_FALSE(CheckedAlignUp(~uint64_t{0} - 2, 32, &out));
}

}  // namespace
}  // namespace strata
