// strata-bench: a serving load generator for strata-server (gRPC) and OpenAI-style servers
// (llama.cpp's llama-server, vLLM): closed or open loop, client-side TTFT / ITL / TPOT / E2E,
// throughput and goodput; a table on stdout and, with --json FILE, one JSON line per run.
// `strata-bench --help` lists the flags; bench/README.md explains the measurements.
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>

#include "bench/load/bench_config.h"
#include "bench/load/bench_results.h"
#include "bench/load/dataset.h"
#include "bench/load/load_runner.h"
#include "bench/load/openai_client.h"
#include "bench/load/report.h"
#include "bench/load/strata_client.h"

namespace {

using namespace strata::bench;  // NOLINT(build/namespaces)

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "strata-bench: %s\n", message.c_str());
  return code;
}

int Run(const BenchConfig& config) {
  // The workload.
  Workload workload =
      Workload::Random(config.prompt_tokens, config.output_tokens, config.token_ids, config.seed);
  if (!config.dataset.empty()) {
    auto entries = LoadDataset(config.dataset, config.output_tokens.min);
    if (!entries.ok()) return Fail(entries.status().ToString(), 2);
    workload = Workload::FromDataset(std::move(entries).value(), config.seed);
  }
  workload.SetSampling(config.temperature, config.top_p, config.top_k, config.min_p);

  // The target.
  std::unique_ptr<TargetClient> client;
  if (config.target == "strata") {
    client = std::make_unique<StrataClient>(config.addr, static_cast<int>(config.channels),
                                            config.request_timeout_s);
  } else {
    auto url = ParseHttpUrl(config.url);
    if (!url.ok()) return Fail(url.status().ToString(), 2);
    client = std::make_unique<OpenAiClient>(*url, config.model, config.request_timeout_s);
  }
  auto server = client->ServerInfoJson(config.wait_server_s);
  if (!server.ok()) {
    return Fail("server at " + (config.target == "strata" ? config.addr : config.url) +
                    " did not answer: " + server.status().ToString(),
                1);
  }
  if (const auto vocab = client->VocabSize();
      vocab && *vocab > 0 && !workload.from_dataset() && config.token_ids.max >= *vocab) {
    return Fail("--token-ids " + config.token_ids_text + " reaches beyond the vocabulary (" +
                    std::to_string(*vocab) + " ids)",
                2);
  }

  LoadOptions load;
  load.concurrency = config.EffectiveConcurrency();
  load.request_rate =
      config.request_rate > 0 ? config.request_rate : std::numeric_limits<double>::infinity();
  load.burstiness = config.burstiness;
  load.num_requests = config.EffectiveNumRequests();
  load.duration_s = config.duration_s;
  load.max_errors = config.max_errors;
  load.seed = config.seed;

  if (config.warmup_requests > 0) {
    LoadOptions warmup = load;
    warmup.request_rate = std::numeric_limits<double>::infinity();
    warmup.concurrency = std::max<int64_t>(
        1, std::min(load.concurrency > 0 ? load.concurrency : config.warmup_requests,
                    config.warmup_requests));
    warmup.num_requests = config.warmup_requests;
    warmup.duration_s = 0;
    // Prompts of their own (indices far past the run's), so the run sees no prefix hits.
    warmup.first_index = int64_t{1} << 40;
    const LoadOutcome outcome = RunLoad(*client, workload, warmup);
    if (outcome.stopped_early) return Fail("warmup: " + outcome.stop_reason, 3);
    std::fprintf(stderr, "strata-bench: warmup: %lld requests done\n",
                 static_cast<long long>(outcome.results.size()));
  }

  const LoadOutcome outcome = RunLoad(*client, workload, load);
  const BenchResults results = AggregateResults(outcome.results, outcome.duration_s, config.slo);
  std::fputs(FormatTable(config, results, outcome).c_str(), stdout);
  std::fflush(stdout);
  if (!config.json_path.empty()) {
    const strata::Status written =
        AppendJsonLine(config.json_path, FormatJsonLine(config, *server, results, outcome));
    if (!written.ok()) return Fail(written.ToString(), 1);
  }
  if (outcome.stopped_early) return Fail("stopped early: " + outcome.stop_reason, 3);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool help = false;
  auto config = ParseBenchFlags(argc, argv, &help);
  if (help) {
    std::fputs(kBenchUsage, stdout);
    return 0;
  }
  if (!config.ok()) return Fail(config.status().message(), 2);
  return Run(*config);
}
