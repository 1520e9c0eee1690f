// strata-bench-batched: throughput and latency of the continuous-batching Engine under N
// concurrent requests, measured so that it can be set beside llama.cpp's llama-batched-bench
// on one GGUF file.
//
//   strata-bench-batched --model MODEL.gguf [--concurrency 1,2,4,...] [--prompt-tokens P]
//                        [--gen-tokens G] [engine and backend flags]
//   strata-bench-batched --model MODEL.gguf --prefix-test [--system-tokens S]
//                        [--suffix-tokens T] [--reps R] [engine and backend flags]
//
// Sweep (default): for each N in --concurrency, on a fresh Engine (empty prefix cache) over one
// backend (the CPU one unless --backend says otherwise), N requests are submitted at once, each a
// distinct prompt of P pseudo-random ordinary tokens (the rule of strata-bench-generate: BOS when
// the vocab adds one, then uniform draws from the tokens whose tokenizer.ggml.token_type is normal;
// a fixed seed per N), each generating G tokens with end-of-generation ignored (greedily, or
// sampled with --temperature / --top-p and a seed per request, as OpenAI clients ask). This
// thread drives the engine with Step() until every stream has ended, reading the streams after each
// step. Times come from the engine's chunk timestamps; the wall time runs from just before the
// first Submit to the step that ended the last request. Per N, one JSON line:
//   output_tokens_per_s   all generated tokens / wall time (prefill included)
//   decode_tokens_per_s   tokens produced after the last request got its first token, over the
//                         time from then to the end (all sequences decoding: what
//                         llama-batched-bench calls S_TG)
//   ttft_ms_*             submit -> first chunk, over the N requests (P50/P99, linear
//                         interpolation between ranks)
//   itl_ms_*              gaps between consecutive chunks of a request, over all requests
//   e2e_ms_*              submit -> last chunk
//   preemptions, steps, decode_steps / decode_step_ms_mean / decode_batch_mean (steps that
//   ran only single-token decodes)
//   kv_*                  after every step, allocated = used blocks x block_size, held = tokens
//                         whose KV the running sequences hold (scheduled tokens so far + prefix
//                         hits - the KV of finished sequences). kv_peak_used_blocks and
//                         kv_peak_allocated_tokens / kv_peak_held_tokens are maxima over the
//                         steps; kv_peak_use_ratio = peak held / peak allocated (the memory the
//                         tokens needed at most over the memory taken at most);
//                         kv_mean_use_ratio = sum of held / sum of allocated over all steps
//                         (every step weighs the same: the stricter number).
//                         kv_exact is false when a preemption happened (the KV a preempted
//                         sequence dropped is not visible from outside, so held is then an
//                         upper bound).
//
// Prefix test (--prefix-test): R times, on a fresh Engine, a request of an S-token system
// prompt (BOS + S-1 random tokens) + T distinct tokens, one generated token, timed cold (empty
// cache); after it finished, a second request with the same system prompt and other T tokens,
// timed warm (the system prompt's full blocks are cached). One JSON line with both TTFTs per
// repetition, their medians and the ratio cold / warm of the medians.
//
// An untimed warmup request (P-token prompt, 2 tokens) runs first on a throwaway engine, to
// page in the weights (--no-warmup skips it). --kv-budget-bytes 0 (the default) sizes the KV
// cache to the largest test: N x (P + G) tokens, or two sequences of the prefix test, plus 2%.
//
// Every output line repeats the engine's setup: "threads" (--threads as given; 0: one per core,
// and 0 on a backend without CPU threads), "backend" (the backend's Describe(), which names the
// thread count it runs), the matmul precision, scheduler options and KV geometry.
//
// Output: JSON lines on stdout. Errors: one line on stderr, exit code 1 (2 for bad usage).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "json_string.h"
#include "prompt_source.h"
#include "strata/backend/backend_factory.h"
#include "strata/backend/backend_flags.h"
#include "strata/backend/cpu/kv_storage.h"
#include "strata/common/tool_args.h"
#include "strata/engine/engine.h"
#include "strata/model/gguf_file.h"
#include "strata/model/model_config.h"
#include "strata/tokenizer/tokenizer.h"

namespace {

constexpr strata::ToolArgs kArgs("strata-bench-batched", /*usage_exit_code=*/2);

using Clock = std::chrono::steady_clock;
using strata::backend::Backend;
using strata::bench::PromptSource;
using strata::engine::BatchingMode;
using strata::engine::Engine;
using strata::engine::EngineOptions;
using strata::engine::EngineStats;
using strata::engine::Request;
using strata::engine::RequestStream;
using strata::engine::StreamChunk;

constexpr char kUsage[] =
    "usage: strata-bench-batched --model MODEL.gguf [flags]\n"
    "  --concurrency LIST       requests submitted at once, comma-separated\n"
    "                           (default 1,2,4,8,16,32,64)\n"
    "  --prompt-tokens P        tokens per prompt (default 128)\n"
    "  --gen-tokens G           tokens generated per request (default 128)\n"
    "  --seed S                 seed of the random prompt tokens (default 42)\n"
    "  --temperature T          sample with this temperature (default 0: greedy); request i\n"
    "                           of a level samples with seed S + i\n"
    "  --top-p P                nucleus sampling's top_p, with --temperature (default 1: off)\n"
    "  --max-batched-tokens N   per-step token budget (default 512)\n"
    "  --max-batch-size N       running sequences at most (default 64)\n"
    "  --long-prefill-chunk N   tokens per sequence per step at most (default 0: no cap)\n"
    "  --batching static|adaptive\n"
    "                           token budget: fixed, or moved by the ITL target (default\n"
    "                           static)\n"
    "  --target-itl-ms X        adaptive batching's inter-token latency target (default 100)\n"
    "  --no-prefix-caching      turn the prefix cache off\n"
    "  --no-warmup              skip the untimed warmup request\n"
    "  --prefix-test            instead of the sweep: TTFT with a cold and a cached system\n"
    "                           prompt\n"
    "  --system-tokens S        prefix test: system prompt tokens (default 1000)\n"
    "  --suffix-tokens T        prefix test: distinct tokens after it (default 16)\n"
    "  --reps R                 prefix test: repetitions (default 3)\n"
    "backend (default --backend cpu: this is the CPU benchmark beside llama-batched-bench;\n"
    "--kv-budget-bytes defaults to 0 here: sized to the largest test):\n";

double ParsePositive(const std::string& flag, const char* value) {
  char* end = nullptr;
  const double v = std::strtod(value, &end);
  if (end == value || *end != '\0' || !(v > 0) || !std::isfinite(v)) {
    kArgs.Fail(flag + " expects a positive number, got '" + value + "'", 2);
  }
  return v;
}

double ParseNonNegative(const std::string& flag, const char* value) {
  char* end = nullptr;
  const double v = std::strtod(value, &end);
  if (end == value || *end != '\0' || !(v >= 0) || !std::isfinite(v)) {
    kArgs.Fail(flag + " expects a number >= 0, got '" + value + "'", 2);
  }
  return v;
}

std::vector<int64_t> ParseList(const std::string& flag, const std::string& value) {
  std::vector<int64_t> list;
  size_t begin = 0;
  while (begin <= value.size()) {
    const size_t comma = std::min(value.find(',', begin), value.size());
    list.push_back(kArgs.Int(flag, value.substr(begin, comma - begin).c_str(), 1));
    begin = comma + 1;
  }
  return list;
}

// What one request's stream showed.
struct Trace {
  int64_t prompt_len = 0;
  Clock::time_point submitted;
  std::vector<Clock::time_point> chunk_times;  // one per chunk with tokens
  int64_t tokens = 0;
  bool ended = false;
};

// One run of requests submitted together, stepped until all ended.
struct Run {
  std::vector<Trace> traces;
  double wall_seconds = 0;
  int64_t steps = 0;
  int64_t decode_steps = 0;  // steps that ran only single-token decodes
  double decode_step_seconds = 0;
  int64_t decode_step_sequences = 0;
  EngineStats final_stats;
  // KV accounting (see the top of the file).
  int32_t peak_used_blocks = 0;
  int64_t peak_held_tokens = 0;
  double sum_held_tokens = 0;
  double sum_allocated_tokens = 0;
};

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// P-th percentile (0..100) by linear interpolation between closest ranks (numpy's default);
// 0 for an empty sample.
double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
}

double Median(std::vector<double> values) { return Percentile(std::move(values), 50); }

class Bench {
 public:
  // `params`: every request's sampling (max_tokens and the seed are set per request).
  Bench(Backend* backend, const strata::tokenizer::Tokenizer* tokenizer,
        const EngineOptions& options, const strata::sampling::SamplingParams& params)
      : backend_(backend), tokenizer_(tokenizer), options_(options), params_(params) {}

  std::unique_ptr<Engine> NewEngine() const {
    auto engine = Engine::Create(backend_, tokenizer_, options_);
    if (!engine.ok()) kArgs.Fail(engine.status().ToString());
    return std::move(*engine);
  }

  // Submits every prompt at once to `engine` and steps it until all requests have ended.
  Run RunTogether(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                  int64_t gen_tokens) const {
    const int64_t block_size = backend_->kv_geometry().block_size;
    Run run;
    run.traces.resize(prompts.size());
    std::vector<std::shared_ptr<RequestStream>> streams;
    const Clock::time_point start = Clock::now();
    for (size_t i = 0; i < prompts.size(); ++i) {
      Request request;
      request.prompt = prompts[i];
      request.params = params_;
      request.params.seed = params_.seed + i;
      request.params.ignore_eos = true;
      request.params.max_tokens = static_cast<int32_t>(gen_tokens);
      run.traces[i].prompt_len = static_cast<int64_t>(prompts[i].size());
      run.traces[i].submitted = Clock::now();
      auto stream = engine.Submit(std::move(request));
      if (!stream.ok())
        kArgs.Fail("request " + std::to_string(i) + ": " + stream.status().ToString());
      streams.push_back(std::move(*stream));
    }

    const EngineStats before = engine.Stats();
    int64_t scheduled_tokens = 0;  // over this run's steps
    int64_t finished_kv_tokens = 0;
    size_t open = streams.size();
    while (open > 0) {
      bool did_work = false;
      const Clock::time_point step_start = Clock::now();
      const strata::Status status = engine.Step(&did_work);
      const double step_seconds = Seconds(step_start, Clock::now());
      if (!status.ok()) kArgs.Fail("engine step: " + status.ToString());
      for (size_t i = 0; i < streams.size(); ++i) {
        Trace& trace = run.traces[i];
        StreamChunk chunk;
        while (streams[i]->Next(&chunk, std::chrono::seconds(0))) {
          if (!chunk.token_ids.empty()) {
            trace.chunk_times.push_back(chunk.time);
            trace.tokens += static_cast<int64_t>(chunk.token_ids.size());
          }
          if (chunk.finish_reason) {
            if (!chunk.error.ok()) {
              kArgs.Fail("request " + std::to_string(i) + ": " + chunk.error.ToString());
            }
            if (trace.tokens != gen_tokens) {
              kArgs.Fail("request " + std::to_string(i) + " ended (" +
                         std::string(strata::sampling::FinishReasonName(*chunk.finish_reason)) +
                         ") after " + std::to_string(trace.tokens) + " of " +
                         std::to_string(gen_tokens) + " tokens");
            }
            trace.ended = true;
            // Its last token was never run: the KV it held was prompt + tokens - 1.
            finished_kv_tokens += trace.prompt_len + trace.tokens - 1;
            --open;
          }
        }
      }
      if (!did_work) {
        if (open > 0)
          kArgs.Fail("the engine stalled with " + std::to_string(open) + " open requests");
        continue;
      }
      const EngineStats s = engine.Stats();
      ++run.steps;
      scheduled_tokens += s.last_batch_tokens;
      if (s.last_batch_tokens == s.last_batch_sequences && s.last_batch_tokens > 0 &&
          AllDecoding(run.traces)) {
        ++run.decode_steps;
        run.decode_step_seconds += step_seconds;
        run.decode_step_sequences += s.last_batch_sequences;
      }
      const int64_t held = scheduled_tokens +
                           (s.kv.prefix_hit_tokens - before.kv.prefix_hit_tokens) -
                           finished_kv_tokens;
      const int64_t allocated = int64_t{s.kv.used_blocks} * block_size;
      run.sum_held_tokens += static_cast<double>(held);
      run.sum_allocated_tokens += static_cast<double>(allocated);
      run.peak_used_blocks = std::max(run.peak_used_blocks, s.kv.used_blocks);
      run.peak_held_tokens = std::max(run.peak_held_tokens, held);
    }
    run.wall_seconds = Seconds(start, Clock::now());
    run.final_stats = engine.Stats();
    run.final_stats.preemptions_total -= before.preemptions_total;
    return run;
  }

 private:
  // True when every request has its first token (all are past their prefill).
  static bool AllDecoding(const std::vector<Trace>& traces) {
    return std::all_of(traces.begin(), traces.end(),
                       [](const Trace& t) { return t.tokens > 0 || t.ended; });
  }

  Backend* backend_;
  const strata::tokenizer::Tokenizer* tokenizer_;
  EngineOptions options_;
  strata::sampling::SamplingParams params_;
};

// One JSON object on one line, built field by field.
class JsonLine {
 public:
  JsonLine& Int(const char* key, int64_t v) { return Raw(key, std::to_string(v)); }
  JsonLine& Num(const char* key, double v) { return Raw(key, Format(v)); }
  // A ratio or rate that may be undefined: null then.
  JsonLine& NumOrNull(const char* key, bool defined, double v) {
    return Raw(key, defined ? Format(v) : "null");
  }
  JsonLine& Bool(const char* key, bool v) { return Raw(key, v ? "true" : "false"); }
  JsonLine& Str(const char* key, const std::string& v) {
    return Raw(key, strata::bench::JsonString(v));
  }
  JsonLine& List(const char* key, const std::vector<double>& values) {
    std::string list = "[";
    for (double v : values) {
      if (list.size() > 1) list += ',';
      list += Format(v);
    }
    return Raw(key, list + "]");
  }
  void Print() const {
    std::printf("{%s}\n", text_.c_str());
    std::fflush(stdout);
  }

 private:
  static std::string Format(double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.6g", std::isfinite(v) ? v : 0.0);
    return buf;
  }
  JsonLine& Raw(const char* key, const std::string& value) {
    if (!text_.empty()) text_ += ',';
    text_ += '"';
    text_ += key;
    text_ += "\":";
    text_ += value;
    return *this;
  }

  std::string text_;
};

// The engine's setup, as every output line repeats it.
struct EngineSetup {
  EngineOptions options;
  int threads = 0;      // --threads as given (0: one per core; 0 on a non-CPU backend)
  std::string backend;  // Describe()
  strata::backend::cpu::MatMulPrecisionSetting matmul_precision =
      strata::backend::cpu::MatMulPrecisionSetting::kFp32;
  strata::backend::KvGeometry geometry;
};

void AddEngineFields(const EngineSetup& e, JsonLine* line) {
  const EngineOptions& o = e.options;
  line->Int("threads", e.threads)
      .Str("backend", e.backend)
      .Str("matmul_precision",
           std::string(strata::backend::cpu::MatMulPrecisionSettingName(e.matmul_precision)))
      .Int("max_batched_tokens", o.scheduler.max_batched_tokens)
      .Int("max_batch_size", o.scheduler.max_batch_size)
      .Int("long_prefill_chunk", o.scheduler.long_prefill_chunk)
      .Str("batching", o.batching == BatchingMode::kAdaptive ? "adaptive" : "static")
      .Bool("prefix_caching", o.enable_prefix_caching)
      .Int("block_size", e.geometry.block_size)
      .Int("kv_blocks", e.geometry.num_blocks);
}

void PrintLevel(int64_t n, int64_t prompt_tokens, int64_t gen_tokens, const Run& run,
                const EngineSetup& engine) {
  std::vector<double> ttft, itl, e2e;
  Clock::time_point last_first = run.traces.front().chunk_times.front();
  int64_t generated = 0;
  for (const Trace& t : run.traces) {
    generated += t.tokens;
    ttft.push_back(Seconds(t.submitted, t.chunk_times.front()) * 1e3);
    e2e.push_back(Seconds(t.submitted, t.chunk_times.back()) * 1e3);
    for (size_t k = 1; k < t.chunk_times.size(); ++k) {
      itl.push_back(Seconds(t.chunk_times[k - 1], t.chunk_times[k]) * 1e3);
    }
    last_first = std::max(last_first, t.chunk_times.front());
  }
  Clock::time_point end = last_first;
  int64_t decoded = 0;  // tokens after the last request's first one
  for (const Trace& t : run.traces) {
    for (const Clock::time_point& time : t.chunk_times) {
      if (time > last_first) ++decoded;
      end = std::max(end, time);
    }
  }
  const double decode_seconds = Seconds(last_first, end);
  const int64_t peak_allocated = int64_t{run.peak_used_blocks} * engine.geometry.block_size;
  const bool exact = run.final_stats.preemptions_total == 0;
  JsonLine out;
  out.Str("test", "batched")
      .Int("concurrency", n)
      .Int("prompt_tokens", prompt_tokens)
      .Int("gen_tokens", gen_tokens);
  AddEngineFields(engine, &out);
  out.Num("wall_s", run.wall_seconds)
      .Int("output_tokens", generated)
      .Num("output_tokens_per_s", static_cast<double>(generated) / run.wall_seconds)
      .NumOrNull("decode_tokens_per_s", decode_seconds > 0,
                 static_cast<double>(decoded) / decode_seconds)
      .Num("ttft_ms_p50", Percentile(ttft, 50))
      .Num("ttft_ms_p99", Percentile(ttft, 99))
      .Num("itl_ms_p50", Percentile(itl, 50))
      .Num("itl_ms_p99", Percentile(itl, 99))
      .Num("e2e_ms_p50", Percentile(e2e, 50))
      .Num("e2e_ms_p99", Percentile(e2e, 99))
      .Int("preemptions", run.final_stats.preemptions_total)
      .Int("steps", run.steps)
      .Int("decode_steps", run.decode_steps)
      .NumOrNull("decode_step_ms_mean", run.decode_steps > 0,
                 run.decode_step_seconds / static_cast<double>(run.decode_steps) * 1e3)
      .NumOrNull(
          "decode_batch_mean", run.decode_steps > 0,
          static_cast<double>(run.decode_step_sequences) / static_cast<double>(run.decode_steps))
      .Int("kv_peak_used_blocks", run.peak_used_blocks)
      .Int("kv_peak_allocated_tokens", peak_allocated)
      .NumOrNull("kv_peak_held_tokens", exact, static_cast<double>(run.peak_held_tokens))
      .NumOrNull("kv_peak_use_ratio", exact && peak_allocated > 0,
                 static_cast<double>(run.peak_held_tokens) / static_cast<double>(peak_allocated))
      .NumOrNull("kv_mean_use_ratio", exact && run.sum_allocated_tokens > 0,
                 run.sum_held_tokens / run.sum_allocated_tokens)
      .Bool("kv_exact", exact)
      .Print();
}
}  // namespace

int main(int argc, char** argv) {
  std::string model_path;
  std::vector<int64_t> concurrency = {1, 2, 4, 8, 16, 32, 64};
  int64_t prompt_tokens = 128, gen_tokens = 128, system_tokens = 1000, suffix_tokens = 16, reps = 3;
  uint64_t seed = 42;
  bool warmup = true, prefix_test = false;
  strata::backend::BackendSpec spec;
  spec.kind = strata::backend::BackendKind::kCpu;  // the CPU benchmark beside llama.cpp's
  spec.kv_budget_bytes = 0;                        // sized below
  EngineOptions options;
  strata::sampling::SamplingParams params;
  params.temperature = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::fputs(kUsage, stdout);
      std::fputs(strata::backend::kBackendFlagsUsage, stdout);
      return 0;
    }
    if (flag == "--no-warmup") {
      warmup = false;
      continue;
    }
    if (flag == "--no-prefix-caching") {
      options.enable_prefix_caching = false;
      continue;
    }
    if (flag == "--prefix-test") {
      prefix_test = true;
      continue;
    }
    if (i + 1 >= argc) kArgs.Fail(flag + " needs a value (see --help)", 2);
    const char* v = argv[++i];
    if (strata::backend::IsBackendFlag(flag)) {
      if (auto applied = strata::backend::ApplyBackendFlag(flag, v, &spec); !applied.ok()) {
        kArgs.Fail(applied.message(), 2);
      }
    } else if (flag == "--model") {
      model_path = v;
    } else if (flag == "--concurrency") {
      concurrency = ParseList(flag, v);
    } else if (flag == "--prompt-tokens") {
      prompt_tokens = kArgs.Int(flag, v, 1);
    } else if (flag == "--gen-tokens") {
      gen_tokens = kArgs.Int(flag, v, 1);
    } else if (flag == "--seed") {
      seed = static_cast<uint64_t>(kArgs.Int(flag, v, 0));
    } else if (flag == "--temperature") {
      params.temperature = static_cast<float>(ParseNonNegative(flag, v));
    } else if (flag == "--top-p") {
      params.top_p = static_cast<float>(ParsePositive(flag, v));
    } else if (flag == "--max-batched-tokens") {
      options.scheduler.max_batched_tokens = kArgs.Int(flag, v, 1);
    } else if (flag == "--max-batch-size") {
      options.scheduler.max_batch_size = static_cast<int32_t>(kArgs.Int(flag, v, 1));
    } else if (flag == "--long-prefill-chunk") {
      options.scheduler.long_prefill_chunk = kArgs.Int(flag, v, 0);
    } else if (flag == "--batching") {
      if (std::strcmp(v, "static") != 0 && std::strcmp(v, "adaptive") != 0) {
        kArgs.Fail(std::string("--batching must be static or adaptive, got '") + v + "'", 2);
      }
      options.batching =
          std::strcmp(v, "static") == 0 ? BatchingMode::kStatic : BatchingMode::kAdaptive;
    } else if (flag == "--target-itl-ms") {
      options.adaptive.target_itl_seconds = ParsePositive(flag, v) / 1e3;
    } else if (flag == "--system-tokens") {
      system_tokens = kArgs.Int(flag, v, 1);
    } else if (flag == "--suffix-tokens") {
      suffix_tokens = kArgs.Int(flag, v, 1);
    } else if (flag == "--reps") {
      reps = kArgs.Int(flag, v, 1);
    } else {
      kArgs.Fail("unknown flag " + flag + " (see --help)", 2);
    }
  }
  if (model_path.empty()) kArgs.Fail("--model is required (see --help)", 2);
  if (gen_tokens > INT32_MAX) kArgs.Fail("--gen-tokens is too large", 2);

  auto file = strata::model::GgufFile::Open(model_path);
  if (!file.ok()) kArgs.Fail(file.status().ToString());
  if (spec.kv_budget_bytes == 0) {
    // Room for the largest test, with 2% over the scheduler's 1% admission watermark.
    auto config = strata::model::ModelConfig::FromGguf(*file);
    if (!config.ok()) kArgs.Fail(config.status().ToString());
    strata::backend::cpu::KvCacheConfig kv;
    kv.num_layers = static_cast<int32_t>(config->n_layers);
    kv.num_kv_heads = static_cast<int32_t>(config->n_kv_heads);
    kv.head_dim_k = static_cast<int32_t>(config->head_dim_k);
    kv.head_dim_v = static_cast<int32_t>(config->head_dim_v);
    kv.block_size = spec.block_size;
    kv.dtype = spec.kv_dtype;
    const int64_t bs = kv.block_size;
    const auto blocks_for = [bs](int64_t tokens) { return (tokens + bs - 1) / bs; };
    int64_t blocks = 2 * blocks_for(system_tokens + suffix_tokens);
    if (!prefix_test) {
      const int64_t max_n = *std::max_element(concurrency.begin(), concurrency.end());
      blocks = max_n * blocks_for(prompt_tokens + gen_tokens);
    }
    blocks += blocks / 50 + 2;
    spec.kv_budget_bytes = blocks * strata::backend::cpu::KvBytesPerBlock(kv);
  }
  auto tokenizer = strata::tokenizer::Tokenizer::FromGguf(*file);
  if (!tokenizer.ok()) kArgs.Fail(tokenizer.status().ToString());
  auto created = strata::backend::CreateBackend(*file, spec);
  if (!created.ok()) kArgs.Fail(created.status().ToString());
  Backend* backend = created->get();
  const std::string described = backend->Describe();
  std::fprintf(stderr, "strata-bench-batched: %s\n", described.c_str());
  PromptSource source = PromptSource::FromGguf(*file, backend->config().vocab_size, seed);
  Bench bench(backend, tokenizer->get(), options, params);
  // The thread count compare_batched.py checks against llama-batched-bench's: --threads as given,
  // 0 on a backend without CPU threads (Describe() names the count a CPU backend runs).
  const EngineSetup setup{options, backend->name() == "cpu" ? spec.threads : 0, described,
                          spec.matmul_precision, backend->kv_geometry()};

  if (warmup) {
    std::unique_ptr<Engine> engine = bench.NewEngine();
    source.Reseed(seed ^ 0x5eedULL);
    bench.RunTogether(*engine, {source.Prompt(prompt_tokens)}, 2);
  }

  if (prefix_test) {
    std::vector<double> cold, warm;
    int64_t hit_tokens = 0;
    for (int64_t rep = 0; rep < reps; ++rep) {
      source.Reseed(seed + static_cast<uint64_t>(rep));
      const std::vector<int32_t> system = source.Prompt(system_tokens);
      std::unique_ptr<Engine> engine = bench.NewEngine();
      for (int k = 0; k < 2; ++k) {
        std::vector<int32_t> prompt = system;
        const std::vector<int32_t> suffix = source.Draw(suffix_tokens);
        prompt.insert(prompt.end(), suffix.begin(), suffix.end());
        const int64_t hits_before = engine->Stats().kv.prefix_hit_tokens;
        const Run run = bench.RunTogether(*engine, {prompt}, 1);
        const Trace& t = run.traces.front();
        (k == 0 ? cold : warm).push_back(Seconds(t.submitted, t.chunk_times.front()) * 1e3);
        if (k == 1) hit_tokens += engine->Stats().kv.prefix_hit_tokens - hits_before;
      }
    }
    const double cold_ms = Median(cold), warm_ms = Median(warm);
    JsonLine out;
    out.Str("test", "prefix")
        .Int("system_tokens", system_tokens)
        .Int("suffix_tokens", suffix_tokens)
        .Int("reps", reps);
    AddEngineFields(setup, &out);
    out.List("ttft_cold_ms", cold)
        .List("ttft_cached_ms", warm)
        .Num("ttft_cold_ms_median", cold_ms)
        .Num("ttft_cached_ms_median", warm_ms)
        .NumOrNull("speedup", warm_ms > 0, cold_ms / warm_ms)
        .Num("cached_hit_tokens_mean", static_cast<double>(hit_tokens) / static_cast<double>(reps))
        .Print();
    return 0;
  }

  for (int64_t n : concurrency) {
    source.Reseed(seed + static_cast<uint64_t>(n));
    std::vector<std::vector<int32_t>> prompts;
    for (int64_t i = 0; i < n; ++i) prompts.push_back(source.Prompt(prompt_tokens));
    std::unique_ptr<Engine> engine = bench.NewEngine();
    const Run run = bench.RunTogether(*engine, prompts, gen_tokens);
    PrintLevel(n, prompt_tokens, gen_tokens, run, setup);
  }
  return 0;
}
