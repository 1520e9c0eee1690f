#include "bench/load/bench_config.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

namespace strata::bench {

const char kBenchUsage[] =
    "usage: strata-bench [flags]\n"
    "target:\n"
    "  --target strata|openai       default strata (gRPC GenerateStream); openai = POST\n"
    "                               /v1/completions with SSE (llama.cpp's llama-server, vLLM)\n"
    "  --addr HOST:PORT             strata's gRPC address (default 127.0.0.1:50051)\n"
    "  --channels N                 gRPC channels (connections) to spread calls over (1)\n"
    "  --url http://HOST:PORT       the OpenAI-style server (default http://127.0.0.1:8080)\n"
    "  --model NAME                 \"model\" field for openai (default: none, or the first\n"
    "                               of GET /v1/models when the server has no /props)\n"
    "load:\n"
    "  --concurrency N              requests in flight (closed loop; default 1). With\n"
    "                               --request-rate: a cap on requests in flight (default none)\n"
    "  --request-rate R             open loop: R requests/s on average\n"
    "  --burstiness B               gamma shape of the gaps between sends (1 = Poisson)\n"
    "  --num-requests N             requests to send (default 100 unless --duration)\n"
    "  --duration SECONDS           stop sending after this long\n"
    "  --warmup-requests K          sent first, at the same concurrency, and not counted (0)\n"
    "workload:\n"
    "  --prompt-tokens N|MIN:MAX    prompt length, fixed or uniform (128)\n"
    "  --output-tokens N|MIN:MAX    generated length, fixed or uniform (128); EOS ignored, so\n"
    "                               every request generates exactly this many\n"
    "  --temperature T              sample with this temperature (0: greedy, the default),\n"
    "                               each request with a seed of its own from --seed\n"
    "  --top-p P                    nucleus sampling's top_p with --temperature (1: off)\n"
    "  --top-k K --min-p P          also sent with --temperature (default: not sent, so each\n"
    "                               server applies its own default: llama-server's is top_k 40,\n"
    "                               min_p 0.05; Strata's and OpenAI's are off)\n"
    "  --dataset FILE               JSONL: {\"prompt\": \"...\"} or {\"prompt_token_ids\": "
    "[...]},\n"
    "                               optional \"output_tokens\" (default --output-tokens)\n"
    "  --token-ids MIN:MAX          ids random prompts draw from (1000:29999: ordinary tokens)\n"
    "  --seed N                     prompts and arrivals (0)\n"
    "report:\n"
    "  --slo-ttft-ms MS --slo-tpot-ms MS --slo-itl-ms MS\n"
    "                               goodput counts requests within all given SLOs\n"
    "  --json FILE                  append one JSON line with config, server, results, label\n"
    "  --label TEXT                 a label for the JSON line\n"
    "robustness:\n"
    "  --max-errors N               stop sending once more than N requests failed (10)\n"
    "  --request-timeout SECONDS    per request (600)\n"
    "  --wait-server SECONDS        wait this long for the server to answer (30)\n"
    "exit: 0 done, 1 server unreachable or JSON not written, 2 bad flags, 3 stopped on errors\n";

namespace {

StatusOr<double> ParseDouble(const std::string& flag, const std::string& text, double min) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || std::isnan(v) || v < min) {
    return InvalidArgumentError(flag + " must be a number >= " + std::to_string(min) + ", got '" +
                                text + "'");
  }
  return v;
}

StatusOr<int64_t> ParseInt(const std::string& flag, const std::string& text, int64_t min) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 || v < min) {
    return InvalidArgumentError(flag + " must be an integer >= " + std::to_string(min) + ", got '" +
                                text + "'");
  }
  return static_cast<int64_t>(v);
}

}  // namespace

int64_t BenchConfig::EffectiveConcurrency() const {
  if (concurrency) return *concurrency;
  return request_rate > 0 ? 0 : 1;
}

int64_t BenchConfig::EffectiveNumRequests() const {
  if (num_requests > 0 || duration_s > 0) return num_requests;
  return 100;
}

StatusOr<BenchConfig> ParseBenchFlags(int argc, const char* const* argv, bool* help) {
  BenchConfig c;
  *help = false;
  using Setter = std::function<Status(const std::string&, const std::string&)>;
  auto set_int = [](int64_t* out, int64_t min) -> Setter {
    return [out, min](const std::string& f, const std::string& v) {
      STRATA_ASSIGN_OR_RETURN(*out, ParseInt(f, v, min));
      return OkStatus();
    };
  };
  auto set_double = [](double* out, double min) -> Setter {
    return [out, min](const std::string& f, const std::string& v) {
      STRATA_ASSIGN_OR_RETURN(*out, ParseDouble(f, v, min));
      return OkStatus();
    };
  };
  auto set_string = [](std::string* out) -> Setter {
    return [out](const std::string&, const std::string& v) {
      *out = v;
      return OkStatus();
    };
  };
  auto set_slo = [](std::optional<double>* out) -> Setter {
    return [out](const std::string& f, const std::string& v) {
      STRATA_ASSIGN_OR_RETURN(*out, ParseDouble(f, v, 0));
      return OkStatus();
    };
  };
  int64_t seed = 0;
  int64_t concurrency = 0;
  bool concurrency_given = false;
  const std::map<std::string, Setter> flags = {
      {"--target", set_string(&c.target)},
      {"--addr", set_string(&c.addr)},
      {"--url", set_string(&c.url)},
      {"--model", set_string(&c.model)},
      {"--channels", set_int(&c.channels, 1)},
      {"--concurrency",
       [&](const std::string& f, const std::string& v) {
         concurrency_given = true;
         STRATA_ASSIGN_OR_RETURN(concurrency, ParseInt(f, v, 1));
         return OkStatus();
       }},
      {"--request-rate", set_double(&c.request_rate, 0)},
      {"--burstiness", set_double(&c.burstiness, 0)},
      {"--num-requests", set_int(&c.num_requests, 1)},
      {"--duration", set_double(&c.duration_s, 0)},
      {"--warmup-requests", set_int(&c.warmup_requests, 0)},
      {"--prompt-tokens", set_string(&c.prompt_tokens_text)},
      {"--output-tokens", set_string(&c.output_tokens_text)},
      {"--dataset", set_string(&c.dataset)},
      {"--token-ids", set_string(&c.token_ids_text)},
      {"--seed", set_int(&seed, 0)},
      {"--temperature", set_double(&c.temperature, 0)},
      {"--top-p", set_double(&c.top_p, 0)},
      {"--top-k", set_int(&c.top_k, 0)},
      {"--min-p", set_double(&c.min_p, 0)},
      {"--slo-ttft-ms", set_slo(&c.slo.ttft_ms)},
      {"--slo-tpot-ms", set_slo(&c.slo.tpot_ms)},
      {"--slo-itl-ms", set_slo(&c.slo.itl_ms)},
      {"--max-errors", set_int(&c.max_errors, 0)},
      {"--request-timeout", set_double(&c.request_timeout_s, 0)},
      {"--wait-server", set_double(&c.wait_server_s, 0)},
      {"--json", set_string(&c.json_path)},
      {"--label", set_string(&c.label)},
  };
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      *help = true;
      return c;
    }
    std::string value;
    bool has_value = false;
    if (const size_t eq = flag.find('='); eq != std::string::npos && flag.rfind("--", 0) == 0) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_value = true;
    }
    const auto it = flags.find(flag);
    if (it == flags.end()) return InvalidArgumentError("unknown flag '" + flag + "' (see --help)");
    if (!has_value) {
      if (i + 1 >= argc) return InvalidArgumentError(flag + " needs a value");
      value = argv[++i];
    }
    STRATA_RETURN_IF_ERROR(it->second(flag, value));
  }
  c.seed = static_cast<uint64_t>(seed);
  if (concurrency_given) c.concurrency = concurrency;
  if (c.target != "strata" && c.target != "openai") {
    return InvalidArgumentError("--target must be strata or openai, got '" + c.target + "'");
  }
  if (c.burstiness <= 0) return InvalidArgumentError("--burstiness must be > 0");
  if (!(c.top_p > 0 && c.top_p <= 1)) {
    return InvalidArgumentError("--top-p must be greater than 0 and at most 1");
  }
  if (c.min_p > 1) return InvalidArgumentError("--min-p must be at most 1");
  if (c.request_timeout_s <= 0) return InvalidArgumentError("--request-timeout must be > 0");
  STRATA_ASSIGN_OR_RETURN(c.prompt_tokens,
                          ParseIntRange("--prompt-tokens", c.prompt_tokens_text, 1));
  STRATA_ASSIGN_OR_RETURN(c.output_tokens,
                          ParseIntRange("--output-tokens", c.output_tokens_text, 1));
  STRATA_ASSIGN_OR_RETURN(c.token_ids, ParseIntRange("--token-ids", c.token_ids_text, 0));
  if (c.token_ids.max > INT32_MAX) return InvalidArgumentError("--token-ids must be below 2^31");
  return c;
}

nlohmann::ordered_json ConfigJson(const BenchConfig& c) {
  auto optional_number = [](const std::optional<double>& v) {
    return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
  };
  nlohmann::ordered_json j;
  j["target"] = c.target;
  j["addr"] = c.target == "strata" ? c.addr : c.url;
  j["url"] = c.url;
  j["model"] = c.model;
  j["channels"] = c.channels;
  j["concurrency"] = c.EffectiveConcurrency();
  // null: as fast as the concurrency allows
  j["request_rate"] =
      optional_number(c.request_rate > 0 ? std::optional(c.request_rate) : std::nullopt);
  j["burstiness"] = c.burstiness;
  j["num_requests"] = c.EffectiveNumRequests();
  j["duration_s"] = c.duration_s;
  j["warmup_requests"] = c.warmup_requests;
  j["prompt_tokens"] = c.prompt_tokens_text;
  j["output_tokens"] = c.output_tokens_text;
  j["dataset"] = c.dataset;
  j["token_ids"] = c.token_ids_text;
  j["seed"] = static_cast<int64_t>(c.seed);
  j["temperature"] = c.temperature;
  j["top_p"] = c.top_p;
  j["top_k"] = c.top_k;
  j["min_p"] = c.min_p;
  j["slo_ttft_ms"] = optional_number(c.slo.ttft_ms);
  j["slo_tpot_ms"] = optional_number(c.slo.tpot_ms);
  j["slo_itl_ms"] = optional_number(c.slo.itl_ms);
  j["max_errors"] = c.max_errors;
  j["request_timeout_s"] = c.request_timeout_s;
  j["wait_server_s"] = c.wait_server_s;
  j["json"] = c.json_path;
  j["label"] = c.label;
  return j;
}

}  // namespace strata::bench
