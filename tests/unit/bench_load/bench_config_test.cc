#include "bench/load/bench_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace strata::bench {
namespace {

StatusOr<BenchConfig> Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "strata-bench");
  bool help = false;
  return ParseBenchFlags(static_cast<int>(args.size()), args.data(), &help);
}

TEST(BenchConfig, DefaultsToOneRequestInFlightAndAHundredRequests) {
  const auto c = Parse({});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->target, "strata");
  EXPECT_EQ(c->EffectiveConcurrency(), 1);
  EXPECT_EQ(c->EffectiveNumRequests(), 100);
  EXPECT_EQ(c->prompt_tokens.min, 128);
  EXPECT_EQ(c->output_tokens.max, 128);
}

TEST(BenchConfig, OpenLoopIsUncappedUnlessConcurrencyIsGiven) {
  auto c = Parse({"--request-rate", "2.5", "--duration", "10"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->EffectiveConcurrency(), 0);
  EXPECT_EQ(c->EffectiveNumRequests(), 0);  // bounded by the duration only
  c = Parse({"--request-rate=2.5", "--concurrency=8"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->EffectiveConcurrency(), 8);
}

TEST(BenchConfig, ReadsEveryFlag) {
  const auto c = Parse(
      {"--target",        "openai", "--url",          "http://h:1", "--model",           "m",
       "--concurrency",   "4",      "--num-requests", "8",          "--prompt-tokens",   "32:64",
       "--output-tokens", "16",     "--slo-ttft-ms",  "500",        "--slo-tpot-ms",     "50",
       "--slo-itl-ms",    "100",    "--seed",         "9",          "--warmup-requests", "2",
       "--burstiness",    "0.5",    "--max-errors",   "0",          "--label",           "x",
       "--temperature",   "0.8",    "--top-p",        "0.9",        "--top-k",           "40",
       "--min-p",         "0.05"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->target, "openai");
  EXPECT_EQ(c->prompt_tokens.max, 64);
  EXPECT_EQ(*c->slo.ttft_ms, 500);
  EXPECT_EQ(*c->slo.itl_ms, 100);
  EXPECT_EQ(c->seed, 9u);
  EXPECT_EQ(c->max_errors, 0);
  EXPECT_EQ(c->temperature, 0.8);
  EXPECT_EQ(c->top_p, 0.9);
  EXPECT_EQ(c->top_k, 40);
  EXPECT_EQ(c->min_p, 0.05);
  const nlohmann::ordered_json json = ConfigJson(*c);
  EXPECT_EQ(json.at("temperature"), 0.8);
  EXPECT_EQ(json.at("top_p"), 0.9);
  EXPECT_EQ(json.at("addr"), "http://h:1");
  EXPECT_EQ(json.at("concurrency"), 4);
  EXPECT_EQ(json.at("slo_tpot_ms"), 50);
  EXPECT_EQ(json.at("prompt_tokens"), "32:64");
  EXPECT_TRUE(json.at("request_rate").is_null());  // closed loop
}

TEST(BenchConfig, BadFlagsAreErrorsNamingTheFlag) {
  const std::vector<std::pair<std::vector<const char*>, std::string>> cases = {
      {{"--bogus", "1"}, "--bogus"},
      {{"--concurrency"}, "--concurrency"},
      {{"--concurrency", "0"}, "--concurrency"},
      {{"--concurrency", "4x"}, "--concurrency"},
      {{"--target", "vllm"}, "--target"},
      {{"--prompt-tokens", "9:3"}, "--prompt-tokens"},
      {{"--burstiness", "0"}, "--burstiness"},
      {{"--request-rate", "-1"}, "--request-rate"},
      {{"--temperature", "-0.5"}, "--temperature"},
      {{"--top-p", "0"}, "--top-p"},
      {{"--top-p", "1.5"}, "--top-p"},
      {{"--top-k", "-2"}, "--top-k"},
      {{"--min-p", "2"}, "--min-p"},
      {{"--token-ids", "5"}, ""},  // a single id is fine
  };
  for (const auto& [args, needle] : cases) {
    const auto c = Parse(args);
    if (needle.empty()) {
      EXPECT_TRUE(c.ok()) << args[0];
      continue;
    }
    ASSERT_FALSE(c.ok()) << args[0];
    EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status().message();
  }
}

}  // namespace
}  // namespace strata::bench
