// strata-bench-generate: single-stream prefill and decode speed of a Strata backend (the CPU one
// unless --backend says otherwise), measured the way llama.cpp's llama-bench measures them, so
// the two can be compared on one GGUF file.
//
//   strata-bench-generate --model MODEL.gguf [-p N] [-n N] [-d D] [--reps R] [--prefill-chunk N]
//                         [backend flags: --backend cpu|cuda|auto, --threads N, ...]
//                         [--seed S] [--no-warmup]
//
// Tests (each repetition starts a new sequence on fresh KV blocks at position 0):
//   ppN     the forward passes over an N-token prompt, until the logits of its last token are
//           available (llama-bench -p N).
//   tgN@dD  after an untimed D-token prompt, N greedy decode steps, each a single-token forward
//           plus an argmax over the vocab; end-of-generation tokens are ignored (llama-bench
//           -n N -d D; llama-bench feeds random tokens instead of the argmax).
// Prompt tokens are pseudo-random ids of normal text tokens (tokenizer.ggml.token_type == 1;
// every id when the file has no types) from a fixed seed, after BOS when the vocab adds one,
// as llama-bench fills its prompts with random ids. Before the timed repetitions one untimed
// run of each test warms caches and pages in the weights (llama-bench's warmup; --no-warmup
// skips it).
//
// Output: one JSON object per test per line on stdout:
//   {"test":"pp512","tokens":512,"threads":2,"backend":"cpu (avx512, 2 threads, fp32 matmul)",
//    "seconds":[...],"tokens_per_s_median":...}
// "threads" is --threads as given (0: one per core, and 0 on a backend without CPU threads);
// "backend" is the backend's Describe(), which names the thread count it runs. "seconds" holds
// each repetition's wall time; the median is over per-repetition tokens/s.
// Errors: one line on stderr, exit code 1 (2 for bad usage).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "json_string.h"
#include "prompt_source.h"
#include "strata/backend/backend_factory.h"
#include "strata/backend/backend_flags.h"
#include "strata/common/tool_args.h"
#include "strata/kv/block_pool.h"
#include "strata/kv/block_table.h"
#include "strata/model/gguf_file.h"

namespace {

constexpr strata::ToolArgs kArgs("strata-bench-generate", /*usage_exit_code=*/2);

using strata::backend::Backend;
using strata::backend::Batch;
using strata::backend::SequenceSlice;
using strata::bench::PromptSource;

constexpr char kUsage[] =
    "usage: strata-bench-generate --model MODEL.gguf [flags]\n"
    "  -p N                     prefill test: an N-token prompt (default 512, 0: skip)\n"
    "  -n N                     decode test: N greedy steps (default 128, 0: skip)\n"
    "  -d D                     decode test: after a D-token prompt (default 0)\n"
    "  --reps R                 timed repetitions of each test (default 5)\n"
    "  --prefill-chunk N        prompt tokens per forward pass (default 512)\n"
    "  --seed S                 seed of the random prompt tokens (default 42)\n"
    "  --no-warmup              skip the untimed warmup run of each test\n"
    "backend (default --backend cpu: this is the CPU benchmark beside llama-bench):\n";

// One sequence on fresh KV blocks: allocated for `total_tokens` at construction, released at
// destruction.
class FreshSequence {
 public:
  FreshSequence(const strata::backend::KvGeometry& geometry, int64_t total_tokens)
      : pool_(geometry.num_blocks), table_(geometry.block_size) {
    std::vector<strata::kv::BlockId> ids;
    if (!pool_.Allocate(table_.BlocksNeeded(total_tokens), &ids)) {
      kArgs.Fail("the KV budget holds " +
                 std::to_string(int64_t{geometry.num_blocks} * geometry.block_size) +
                 " tokens; a test needs " + std::to_string(total_tokens) +
                 " (raise --kv-budget-bytes)");
    }
    table_.Append(ids);
  }
  ~FreshSequence() { table_.ReleaseAll(&pool_); }
  FreshSequence(const FreshSequence&) = delete;
  FreshSequence& operator=(const FreshSequence&) = delete;

  std::span<const strata::kv::BlockId> blocks() const { return table_.blocks(); }

 private:
  strata::kv::BlockPool pool_;
  strata::kv::BlockTable table_;
};

class Runner {
 public:
  Runner(Backend* backend, int64_t prefill_chunk)
      : backend_(backend), prefill_chunk_(prefill_chunk) {}

  // Forwards `tokens` at positions [start, start + size) in chunks; the logits of the last token
  // end up in logits_.
  void Prefill(std::span<const int32_t> tokens, int64_t start, const FreshSequence& seq) {
    for (int64_t done = 0; done < static_cast<int64_t>(tokens.size()); done += prefill_chunk_) {
      const int64_t len = std::min<int64_t>(prefill_chunk_, tokens.size() - done);
      Forward(tokens.subspan(done, len), start + done, seq);
    }
  }

  void Forward(std::span<const int32_t> tokens, int64_t start, const FreshSequence& seq) {
    Batch batch;
    SequenceSlice slice;
    slice.tokens = tokens;
    slice.start_pos = start;
    slice.block_ids = seq.blocks();
    batch.sequences.push_back(slice);
    const strata::Status status = backend_->Forward(batch, &logits_);
    if (!status.ok()) kArgs.Fail(status.ToString());
  }

  int32_t Argmax() const {
    const int64_t vocab = backend_->config().vocab_size;
    return static_cast<int32_t>(std::max_element(logits_.begin(), logits_.begin() + vocab) -
                                logits_.begin());
  }

 private:
  Backend* backend_;
  int64_t prefill_chunk_;
  std::vector<float> logits_;
};

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void PrintResult(const std::string& test, int64_t tokens, int threads, const std::string& backend,
                 const std::vector<double>& seconds) {
  std::vector<double> rates;
  for (double s : seconds) rates.push_back(s > 0 ? static_cast<double>(tokens) / s : 0.0);
  std::sort(rates.begin(), rates.end());
  const size_t m = rates.size() / 2;
  const double median = rates.size() % 2 ? rates[m] : (rates[m - 1] + rates[m]) / 2;
  std::string list;
  for (double s : seconds) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%s%.9g", list.empty() ? "" : ",", s);
    list += buf;
  }
  std::printf(
      "{\"test\":\"%s\",\"tokens\":%lld,\"threads\":%d,\"backend\":%s,\"seconds\":[%s],"
      "\"tokens_per_s_median\":%.6g}\n",
      test.c_str(), static_cast<long long>(tokens), threads,
      strata::bench::JsonString(backend).c_str(), list.c_str(), median);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path;
  int64_t n_prompt = 512, n_gen = 128, depth = 0, reps = 5, prefill_chunk = 512;
  uint64_t seed = 42;
  bool warmup = true;
  strata::backend::BackendSpec spec;
  spec.kind = strata::backend::BackendKind::kCpu;
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
    if (i + 1 >= argc) kArgs.Fail(flag + " needs a value (see --help)", 2);
    const char* v = argv[++i];
    if (strata::backend::IsBackendFlag(flag)) {
      if (auto applied = strata::backend::ApplyBackendFlag(flag, v, &spec); !applied.ok()) {
        kArgs.Fail(applied.message(), 2);
      }
    } else if (flag == "--model") {
      model_path = v;
    } else if (flag == "-p") {
      n_prompt = kArgs.Int(flag, v, 0);
    } else if (flag == "-n") {
      n_gen = kArgs.Int(flag, v, 0);
    } else if (flag == "-d") {
      depth = kArgs.Int(flag, v, 0);
    } else if (flag == "--reps") {
      reps = kArgs.Int(flag, v, 1);
    } else if (flag == "--prefill-chunk") {
      prefill_chunk = kArgs.Int(flag, v, 1);
    } else if (flag == "--seed") {
      seed = static_cast<uint64_t>(kArgs.Int(flag, v, 0));
    } else {
      kArgs.Fail("unknown flag " + flag + " (see --help)", 2);
    }
  }
  if (model_path.empty()) kArgs.Fail("--model is required (see --help)", 2);
  if (n_prompt == 0 && n_gen == 0) kArgs.Fail("-p and -n are both 0: nothing to measure", 2);

  auto file = strata::model::GgufFile::Open(model_path);
  if (!file.ok()) kArgs.Fail(file.status().ToString());
  auto created = strata::backend::CreateBackend(*file, spec);
  if (!created.ok()) kArgs.Fail(created.status().ToString());
  Backend* backend = created->get();
  const std::string described = backend->Describe();
  std::fprintf(stderr, "strata-bench-generate: %s\n", described.c_str());
  const int64_t context = backend->config().context_length;
  if (std::max(n_prompt, depth + n_gen) > context) {
    kArgs.Fail("-p and -d + -n must be at most the context length " + std::to_string(context));
  }
  const strata::backend::KvGeometry geometry = backend->kv_geometry();
  PromptSource source = PromptSource::FromGguf(*file, backend->config().vocab_size, seed);
  Runner runner(backend, prefill_chunk);
  // The thread count compare_llamacpp.py checks against llama-bench's: --threads as given, 0 on
  // a backend without CPU threads (Describe() names the count a CPU backend runs).
  const int threads = backend->name() == "cpu" ? spec.threads : 0;

  if (n_prompt > 0) {
    std::vector<double> seconds;
    for (int64_t rep = warmup ? -1 : 0; rep < reps; ++rep) {
      const std::vector<int32_t> prompt = source.Prompt(n_prompt);
      FreshSequence seq(geometry, n_prompt);
      const auto start = std::chrono::steady_clock::now();
      runner.Prefill(prompt, 0, seq);
      if (rep >= 0) seconds.push_back(Seconds(start));
    }
    PrintResult("pp" + std::to_string(n_prompt), n_prompt, threads, described, seconds);
  }

  if (n_gen > 0) {
    if (warmup) {
      // As llama-bench: one decode step on an empty sequence.
      FreshSequence seq(geometry, 1);
      const int32_t token = source.First();
      runner.Forward(std::span<const int32_t>(&token, 1), 0, seq);
    }
    std::vector<double> seconds;
    for (int64_t rep = 0; rep < reps; ++rep) {
      FreshSequence seq(geometry, depth + n_gen);
      int32_t token = source.First();
      if (depth > 0) {
        const std::vector<int32_t> prompt = source.Prompt(depth);
        runner.Prefill(prompt, 0, seq);
        token = runner.Argmax();
      }
      const auto start = std::chrono::steady_clock::now();
      for (int64_t step = 0; step < n_gen; ++step) {
        runner.Forward(std::span<const int32_t>(&token, 1), depth + step, seq);
        token = runner.Argmax();
      }
      seconds.push_back(Seconds(start));
    }
    std::string name = "tg" + std::to_string(n_gen);
    if (depth > 0) name += "@d" + std::to_string(depth);
    PrintResult(name, n_gen, threads, described, seconds);
  }
  return 0;
}
