#include "strata/metrics/server_metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "support/prometheus_text.h"
#include "support/sanitizer.h"

namespace strata::metrics {
namespace {

using strata::testing::kSanitized;

BuildInfo Build() { return {"0.1.0", "abc1234", "cpu", "gemma-3-270m"}; }

std::optional<double> Sample(const std::string& text, const std::string& series) {
  return strata::testing::MetricSample(text, series);
}

RequestRecord Request(std::string reason, int64_t prompt, int64_t completion, double queue,
                      double ttft, double e2e) {
  RequestRecord r;
  r.finish_reason = std::move(reason);
  r.prompt_tokens = prompt;
  r.completion_tokens = completion;
  r.queue_seconds = queue;
  r.time_to_first_token_seconds = ttft;
  r.e2e_seconds = e2e;
  return r;
}

TEST(ServerMetrics, CountersEqualWhatWasRecorded) {
  ServerMetrics m(Build());
  m.ObserveRequest(Request("stop", 10, 5, 0.01, 0.2, 1.0));
  m.ObserveRequest(Request("length", 7, 8, 0.02, 0.3, 2.0));
  m.ObserveRequest(Request("stop", 3, 1, 0.03, 0.1, 0.5));
  m.ObserveRequest(Request("cancelled", 4, 0, -1, -1, 0.05));  // cancelled while queued
  m.CountGeneratedTokens(14);
  m.CountError("INVALID_ARGUMENT");
  m.CountError("INVALID_ARGUMENT");
  m.CountError("RESOURCE_EXHAUSTED");
  const std::string text = m.Serialize();
  EXPECT_EQ(Sample(text, "strata_requests_total{finish_reason=\"stop\"}"), 2);
  EXPECT_EQ(Sample(text, "strata_requests_total{finish_reason=\"length\"}"), 1);
  EXPECT_EQ(Sample(text, "strata_requests_total{finish_reason=\"cancelled\"}"), 1);
  EXPECT_EQ(Sample(text, "strata_prompt_tokens_total"), 24);
  EXPECT_EQ(Sample(text, "strata_generation_tokens_total"), 14);
  EXPECT_EQ(Sample(text, "strata_request_errors_total{code=\"INVALID_ARGUMENT\"}"), 2);
  EXPECT_EQ(Sample(text, "strata_request_errors_total{code=\"RESOURCE_EXHAUSTED\"}"), 1);
  // Latencies only for the stages a request reached.
  EXPECT_EQ(Sample(text, "strata_time_to_first_token_seconds_count"), 3);
  EXPECT_EQ(Sample(text, "strata_request_queue_time_seconds_count"), 3);
  EXPECT_EQ(Sample(text, "strata_e2e_request_latency_seconds_count"), 4);
  EXPECT_NEAR(*Sample(text, "strata_time_to_first_token_seconds_sum"), 0.6, 1e-9);
  // Prefill = TTFT - queue.
  EXPECT_NEAR(*Sample(text, "strata_request_prefill_time_seconds_sum"), 0.54, 1e-9);
  EXPECT_EQ(Sample(text, "strata_time_to_first_token_quantiles_seconds_count"), 3);
}

TEST(ServerMetrics, HistogramBucketsAreCumulativeFromMillisecondsToMinutes) {
  ServerMetrics m(Build());
  for (double s : {0.0003, 0.004, 0.2, 3.0, 100.0, 1000.0}) m.ObserveInterTokenLatency(s);
  const std::string text = m.Serialize();
  EXPECT_EQ(Sample(text, "strata_inter_token_latency_seconds_bucket{le=\"0.0005\"}"), 1);
  EXPECT_EQ(Sample(text, "strata_inter_token_latency_seconds_bucket{le=\"0.005\"}"), 2);
  EXPECT_EQ(Sample(text, "strata_inter_token_latency_seconds_bucket{le=\"0.25\"}"), 3);
  EXPECT_EQ(Sample(text, "strata_inter_token_latency_seconds_bucket{le=\"5\"}"), 4);
  EXPECT_EQ(Sample(text, "strata_inter_token_latency_seconds_bucket{le=\"300\"}"), 5);
  EXPECT_EQ(Sample(text, "strata_inter_token_latency_seconds_bucket{le=\"+Inf\"}"), 6);
}

TEST(ServerMetrics, SummaryQuantilesExistAndAreOrdered) {
  ServerMetrics m(Build());
  for (int i = 1; i <= 1000; ++i) m.ObserveInterTokenLatency(i / 1000.0);  // 1 ms .. 1 s
  const std::string text = m.Serialize();
  double previous = 0;
  for (const char* q : {"0.5", "0.9", "0.95", "0.99"}) {
    const auto v = Sample(
        text, std::string("strata_inter_token_latency_quantiles_seconds{quantile=\"") + q + "\"}");
    ASSERT_TRUE(v.has_value()) << q << "\n" << text;
    EXPECT_GE(*v, previous) << q;
    EXPECT_NEAR(*v, std::stod(q), 0.02) << q;
    previous = *v;
  }
}

TEST(ServerMetrics, StepTotalsBecomeCounterIncrementsAndGaugesFollowTheLastStep) {
  ServerMetrics m(Build());
  StepRecord s;
  s.running = 3;
  s.waiting = 5;
  s.batch_sequences = 3;
  s.batch_tokens = 130;
  s.kv_usage_ratio = 0.25;
  s.kv_free_blocks = 30;
  s.kv_total_blocks = 40;
  s.preemptions_total = 2;
  s.prefix_queries_total = 10;
  s.prefix_hits_total = 4;
  s.busy_seconds_total = 0.5;
  m.ObserveStep(s);
  s.running = 1;
  s.batch_sequences = 1;
  s.batch_tokens = 1;
  s.preemptions_total = 3;
  s.prefix_queries_total = 16;
  s.busy_seconds_total = 1.25;
  m.ObserveStep(s);
  const std::string text = m.Serialize();
  EXPECT_EQ(Sample(text, "strata_engine_busy_seconds_total"), 1.25);
  EXPECT_EQ(Sample(text, "strata_preemptions_total"), 3);
  EXPECT_EQ(Sample(text, "strata_prefix_cache_queries_total"), 16);
  EXPECT_EQ(Sample(text, "strata_prefix_cache_hits_total"), 4);
  EXPECT_EQ(Sample(text, "strata_requests_running"), 1);
  EXPECT_EQ(Sample(text, "strata_requests_waiting"), 5);
  EXPECT_EQ(Sample(text, "strata_batch_size"), 1);
  EXPECT_EQ(Sample(text, "strata_kv_cache_usage_ratio"), 0.25);
  EXPECT_EQ(Sample(text, "strata_kv_cache_free_blocks"), 30);
  EXPECT_EQ(Sample(text, "strata_kv_cache_blocks"), 40);
  EXPECT_EQ(Sample(text, "strata_iteration_tokens_count"), 2);
  EXPECT_EQ(Sample(text, "strata_iteration_tokens_bucket{le=\"128\"}"), 1);
  EXPECT_EQ(Sample(text, "strata_iteration_tokens_bucket{le=\"256\"}"), 2);
}

TEST(ServerMetrics, TokensPerSecondCoversTheRecentWindow) {
  ServerMetrics m(Build());
  m.CountGeneratedTokens(50);
  m.CountGeneratedTokens(30);
  EXPECT_EQ(Sample(m.Serialize(), "strata_generation_tokens_per_second"), 8);  // 80 / 10 s
}

TEST(ServerMetrics, BuildInfoCarriesVersionAndBackend) {
  ServerMetrics m(Build());
  EXPECT_EQ(Sample(m.Serialize(),
                   "strata_build_info{backend=\"cpu\",commit=\"abc1234\",model=\"gemma-3-270m\","
                   "version=\"0.1.0\"}"),
            1);
}

// The process's own resources are read at each scrape: memory the program takes shows in the
// resident size and the heap it holds; the fds it opens in process_open_fds.
TEST(ServerMetrics, ProcessMetricsFollowTheProcess) {
  ServerMetrics m(Build());
  const std::string before = m.Serialize();
  for (const char* name :
       {"process_resident_memory_bytes", "process_virtual_memory_bytes", "process_open_fds",
        "process_cpu_seconds_total", "strata_heap_allocated_bytes", "strata_heap_free_bytes"}) {
    ASSERT_TRUE(Sample(before, name).has_value()) << name << " missing from\n" << before;
  }
  constexpr size_t kBytes = size_t{64} << 20;
  auto* block = static_cast<volatile char*>(std::malloc(kBytes));
  ASSERT_NE(block, nullptr);
  for (size_t i = 0; i < kBytes; i += 4096) block[i] = 1;  // resident, not just reserved
  FILE* opened = std::fopen("/proc/self/status", "r");
  ASSERT_NE(opened, nullptr);
  const std::string after = m.Serialize();
  std::fclose(opened);
  std::free(const_cast<char*>(block));
  if (!kSanitized) {  // a sanitizer's allocator is not glibc's heap
    EXPECT_GE(*Sample(after, "strata_heap_allocated_bytes") -
                  *Sample(before, "strata_heap_allocated_bytes"),
              static_cast<double>(kBytes));
  }
  EXPECT_GE(*Sample(after, "process_resident_memory_bytes") -
                *Sample(before, "process_resident_memory_bytes"),
            0.9 * static_cast<double>(kBytes));
  EXPECT_EQ(*Sample(after, "process_open_fds"), *Sample(before, "process_open_fds") + 1);
  EXPECT_GT(*Sample(after, "process_resident_memory_bytes"), 0);
}

// The exposition passes Prometheus' own linter (Debian's prometheus package ships promtool).
TEST(ServerMetrics, PromtoolAcceptsTheExposition) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool is not installed";
  }
  ServerMetrics m(Build());
  m.ObserveRequest(Request("stop", 10, 5, 0.01, 0.2, 1.0));
  m.ObserveInterTokenLatency(0.05);
  m.CountError("INTERNAL");
  m.ObserveStep(StepRecord{});
  const std::string path =
      ::testing::TempDir() + "strata_metrics_" + std::to_string(::getpid()) + ".txt";
  {
    std::ofstream out(path);
    out << m.Serialize();
  }
  const std::string command = "promtool check metrics < " + path + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  const int status = ::pclose(pipe);
  std::remove(path.c_str());
  EXPECT_EQ(status, 0) << output;
  EXPECT_EQ(output, "") << "promtool reported lint problems";
}

}  // namespace
}  // namespace strata::metrics
