#include "bench/load/report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace strata::bench {
namespace {

BenchConfig Config() {
  const char* argv[] = {"strata-bench", "--concurrency", "4",         "--label",
                        "c4",           "--slo-ttft-ms", "250",       "--output-tokens",
                        "8:16",         "--json",        "runs.jsonl"};
  bool help = false;
  StatusOr<BenchConfig> config = ParseBenchFlags(std::size(argv), argv, &help);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return *config;
}

RequestResult Ok(double ttft_s, double e2e_s, std::vector<double> gaps) {
  RequestResult r;
  r.ok = true;
  r.ttft_s = ttft_s;
  r.e2e_s = e2e_s;
  r.output_tokens = static_cast<int64_t>(gaps.size()) + 1;
  r.requested_output_tokens = r.output_tokens;
  r.prompt_tokens = 7;
  r.itl_s = std::move(gaps);
  return r;
}

nlohmann::json ParseLine(const std::string& line) {
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  nlohmann::json parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(parsed.is_object()) << line;
  return parsed;
}

TEST(FormatJsonLine, RoundTripsConfigServerAndResults) {
  RequestResult failed;
  failed.error_kind = "http_503";
  failed.error_message = "HTTP 503: Loading model";
  const BenchResults results =
      AggregateResults({Ok(0.1, 0.5, {0.2, 0.2}), Ok(2.0 / 3.0, 1.0, {0.1}), failed}, 2.0, Slo{});
  LoadOutcome outcome;
  outcome.first_error = failed.error_message;
  const std::string server = "{\n  \"name\": \"gemma\",\n  \"vocab_size\": 262144\n}";

  const nlohmann::json line = ParseLine(FormatJsonLine(Config(), server, results, outcome));
  EXPECT_EQ(line.at("label"), "c4");
  const nlohmann::json& config = line.at("config");
  EXPECT_EQ(config.at("target"), "strata");
  EXPECT_EQ(config.at("concurrency"), 4);
  EXPECT_EQ(config.at("output_tokens"), "8:16");
  EXPECT_EQ(config.at("slo_ttft_ms"), 250);
  EXPECT_TRUE(config.at("slo_itl_ms").is_null());
  EXPECT_EQ(config.at("json"), "runs.jsonl");
  EXPECT_EQ(line.at("server"), nlohmann::json::parse(server));
  const nlohmann::json& r = line.at("results");
  EXPECT_EQ(r.at("completed"), 2);
  EXPECT_EQ(r.at("errors"), 1);
  EXPECT_EQ(r.at("errors_by_kind"), (nlohmann::json{{"http_503", 1}}));
  EXPECT_EQ(r.at("first_error"), "HTTP 503: Loading model");
  EXPECT_EQ(r.at("stopped_early"), false);
  EXPECT_EQ(r.at("total_output_tokens"), 5);
  EXPECT_EQ(r.at("total_prompt_tokens"), 14);
  EXPECT_EQ(r.at("requests_per_s").get<double>(), 1.0);
  // Numbers come back bit for bit.
  EXPECT_EQ(r.at("ttft_ms").at("max").get<double>(), results.ttft_ms.max);
  EXPECT_EQ(r.at("ttft_ms").at("mean").get<double>(), results.ttft_ms.mean);
  EXPECT_EQ(r.at("itl_ms").at("count"), 3);
  for (const char* metric : {"ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"}) {
    for (const char* key : {"count", "mean", "p50", "p90", "p95", "p99", "max"}) {
      EXPECT_TRUE(r.at(metric).contains(key)) << metric << "." << key;
    }
  }
}

TEST(FormatJsonLine, EmptySummariesAreNullAndOddTextStaysOneValidLine) {
  RequestResult failed;
  failed.error_kind = "protocol";
  const BenchResults results = AggregateResults({failed}, 1.0, Slo{});
  LoadOutcome outcome;
  outcome.stopped_early = true;
  outcome.stop_reason = "more than 0 errors";
  // A message cut inside a UTF-8 character, with quotes and a newline.
  outcome.first_error = "bad \"event\"\n\xe0\xa4";
  const nlohmann::json line = ParseLine(FormatJsonLine(Config(), "not json", results, outcome));
  EXPECT_EQ(line.at("server"), nlohmann::json::object());
  const nlohmann::json& r = line.at("results");
  EXPECT_EQ(r.at("ttft_ms").at("count"), 0);
  EXPECT_TRUE(r.at("ttft_ms").at("p99").is_null());
  EXPECT_TRUE(r.at("e2e_ms").at("mean").is_null());
  EXPECT_EQ(r.at("stopped_early"), true);
  EXPECT_EQ(r.at("first_error"), "bad \"event\"\n\xef\xbf\xbd");  // U+FFFD for the cut character
}

}  // namespace
}  // namespace strata::bench
