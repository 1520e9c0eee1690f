#include "bench/load/token_timeline.h"

#include <gtest/gtest.h>

#include <numeric>

namespace strata::bench {
namespace {

using Clock = TokenTimeline::Clock;
using std::chrono::milliseconds;

TEST(TokenTimeline, OneTokenPerMessageGivesOneGapPerMessage) {
  const Clock::time_point t0 = Clock::now();
  TokenTimeline t;
  t.MarkSent(t0);
  t.AddTokens(1, t0 + milliseconds(100));
  t.AddTokens(1, t0 + milliseconds(130));
  t.AddTokens(0, t0 + milliseconds(140));  // a message without tokens changes nothing
  t.AddTokens(1, t0 + milliseconds(180));
  const RequestResult r = t.Finish(t0 + milliseconds(200));
  EXPECT_TRUE(r.ok);
  EXPECT_NEAR(r.ttft_s, 0.100, 1e-9);
  EXPECT_NEAR(r.e2e_s, 0.200, 1e-9);
  EXPECT_EQ(r.output_tokens, 3);
  ASSERT_EQ(r.itl_s.size(), 2u);
  EXPECT_NEAR(r.itl_s[0], 0.030, 1e-9);
  EXPECT_NEAR(r.itl_s[1], 0.050, 1e-9);
}

TEST(TokenTimeline, MessageWithKTokensCountsAsKEqualGaps) {
  const Clock::time_point t0 = Clock::now();
  TokenTimeline t;
  t.MarkSent(t0);
  t.AddTokens(3, t0 + milliseconds(100));  // TTFT, then 2 gaps of 0
  t.AddTokens(4, t0 + milliseconds(180));  // 4 gaps of 20 ms
  const RequestResult r = t.Finish(t0 + milliseconds(180));
  EXPECT_EQ(r.output_tokens, 7);
  ASSERT_EQ(r.itl_s.size(), 6u);  // n - 1
  EXPECT_EQ(r.itl_s[0], 0);
  EXPECT_EQ(r.itl_s[1], 0);
  for (size_t i = 2; i < 6; ++i) EXPECT_NEAR(r.itl_s[i], 0.020, 1e-9);
  // The gaps add up to last token - first token.
  EXPECT_NEAR(std::accumulate(r.itl_s.begin(), r.itl_s.end(), 0.0), 0.080, 1e-9);
}

TEST(TokenTimeline, NoTokensMeansNoTtftAndNoGaps) {
  const Clock::time_point t0 = Clock::now();
  TokenTimeline t;
  t.MarkSent(t0);
  const RequestResult r = t.Finish(t0 + milliseconds(10));
  EXPECT_EQ(r.output_tokens, 0);
  EXPECT_EQ(r.ttft_s, 0);
  EXPECT_TRUE(r.itl_s.empty());
}

}  // namespace
}  // namespace strata::bench
