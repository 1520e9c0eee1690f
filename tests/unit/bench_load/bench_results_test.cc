#include "bench/load/bench_results.h"

#include <gtest/gtest.h>

namespace strata::bench {
namespace {

RequestResult Ok(double ttft_s, double e2e_s, int64_t tokens, std::vector<double> gaps = {}) {
  RequestResult r;
  r.ok = true;
  r.ttft_s = ttft_s;
  r.e2e_s = e2e_s;
  r.output_tokens = tokens;
  r.requested_output_tokens = tokens;
  r.prompt_tokens = 10;
  r.itl_s = std::move(gaps);
  return r;
}

Slo MakeSlo(std::optional<double> ttft_ms, std::optional<double> tpot_ms,
            std::optional<double> itl_ms) {
  Slo slo;
  slo.ttft_ms = ttft_ms;
  slo.tpot_ms = tpot_ms;
  slo.itl_ms = itl_ms;
  return slo;
}

RequestResult Failed(const std::string& kind) {
  RequestResult r;
  r.error_kind = kind;
  r.error_message = kind + ": boom";
  return r;
}

TEST(Tpot, IsTimeAfterTheFirstTokenPerLaterToken) {
  EXPECT_DOUBLE_EQ(*TpotSeconds(Ok(0.5, 2.5, 5)), 0.5);
}

TEST(Tpot, IsUndefinedForOneOutputTokenOrAFailure) {
  EXPECT_FALSE(TpotSeconds(Ok(0.5, 0.6, 1)).has_value());
  EXPECT_FALSE(TpotSeconds(Ok(0.0, 0.1, 0)).has_value());
  EXPECT_FALSE(TpotSeconds(Failed("UNAVAILABLE")).has_value());
}

TEST(MeetsSlo, ChecksEveryGivenObjective) {
  const RequestResult r = Ok(0.2, 1.2, 11, {0.05, 0.15, 0.1});  // TPOT 100 ms, worst gap 150
  EXPECT_TRUE(MeetsSlo(r, Slo{}));
  EXPECT_TRUE(MeetsSlo(r, MakeSlo(200, {}, {})));
  EXPECT_FALSE(MeetsSlo(r, MakeSlo(199, {}, {})));
  EXPECT_TRUE(MeetsSlo(r, MakeSlo({}, 100.001, {})));
  EXPECT_FALSE(MeetsSlo(r, MakeSlo({}, 99, {})));
  EXPECT_TRUE(MeetsSlo(r, MakeSlo({}, {}, 150)));
  EXPECT_FALSE(MeetsSlo(r, MakeSlo({}, {}, 149)));
  EXPECT_FALSE(MeetsSlo(Failed("x"), Slo{}));
}

TEST(MeetsSlo, OneTokenRequestIsJudgedOnTtftOnly) {
  const RequestResult r = Ok(0.1, 5.0, 1);
  EXPECT_TRUE(MeetsSlo(r, MakeSlo(150, 1, 1)));
  EXPECT_FALSE(MeetsSlo(r, MakeSlo(50, {}, {})));
}

TEST(AggregateResults, CountsThroughputGoodputAndErrorsByKind) {
  std::vector<RequestResult> results = {
      Ok(0.1, 1.1, 11, std::vector<double>(10, 0.1)),  // meets TTFT 150 ms
      Ok(0.3, 1.3, 11, std::vector<double>(10, 0.1)),  // misses it
      Ok(0.1, 0.1, 1),                                 // meets it; no TPOT
      Failed("UNAVAILABLE"),
      Failed("UNAVAILABLE"),
      Failed("http_503"),
  };
  results[1].output_tokens = 10;  // asked for 11
  results[1].itl_s.pop_back();
  const BenchResults r = AggregateResults(results, 2.0, MakeSlo(150, {}, {}));
  EXPECT_EQ(r.completed, 3);
  EXPECT_EQ(r.errors, 3);
  EXPECT_EQ(r.errors_by_kind.at("UNAVAILABLE"), 2);
  EXPECT_EQ(r.errors_by_kind.at("http_503"), 1);
  EXPECT_EQ(r.output_length_mismatches, 1);
  EXPECT_EQ(r.total_output_tokens, 22);
  EXPECT_EQ(r.total_prompt_tokens, 30);
  EXPECT_DOUBLE_EQ(r.requests_per_s, 1.5);
  EXPECT_DOUBLE_EQ(r.output_tokens_per_s, 11);
  EXPECT_DOUBLE_EQ(r.total_tokens_per_s, 26);
  EXPECT_DOUBLE_EQ(r.goodput_requests_per_s, 1.0);
  EXPECT_EQ(r.ttft_ms.count, 3);
  EXPECT_EQ(r.tpot_ms.count, 2);  // the one-token request has none
  EXPECT_EQ(r.itl_ms.count, 19);
  EXPECT_EQ(r.e2e_ms.count, 3);
  EXPECT_NEAR(r.itl_ms.mean, 100, 1e-9);
}

TEST(AggregateResults, GoodputEqualsThroughputWithoutSlos) {
  const BenchResults r = AggregateResults({Ok(0.1, 1, 5), Ok(0.2, 1, 5)}, 4.0, Slo{});
  EXPECT_DOUBLE_EQ(r.goodput_requests_per_s, r.requests_per_s);
  EXPECT_DOUBLE_EQ(r.requests_per_s, 0.5);
}

}  // namespace
}  // namespace strata::bench
