// strata-batch: runs many prompts through the continuous-batching Engine and prints each
// request's generated token ids, for the invariance tests (the same request alone, in a batch,
// chunked, with a prefix hit, after preemption) and for quick experiments.
//
//   strata-batch MODEL.gguf --prompts FILE [flags]
//
// FILE holds one prompt per line as space-separated token ids. Output: one line per prompt, in
// file order: "INDEX FINISH_REASON TOKEN TOKEN ...". The engine's counters and the backend's
// Describe() go to stderr as one line. Errors: one line on stderr, exit code 1 (2 for bad usage).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "strata/backend/backend_factory.h"
#include "strata/backend/backend_flags.h"
#include "strata/common/tool_args.h"
#include "strata/engine/engine.h"
#include "strata/engine/ngram_proposer.h"
#include "strata/model/gguf_file.h"
#include "strata/tokenizer/tokenizer.h"

namespace {

constexpr char kUsage[] =
    "usage: strata-batch MODEL.gguf --prompts FILE [flags]\n"
    "  --prompts FILE             one prompt per line, space-separated token ids\n"
    "  --max-tokens N             greedy tokens per request, EOS ignored (default 32)\n"
    "  --mode together|alone|twice\n"
    "                             together: submit all at once (default); alone: one at a\n"
    "                             time; twice: all at once, then all again (prefix hits)\n"
    "  --max-batched-tokens N     per-step token budget (default 512)\n"
    "  --max-batch-size N         running sequences at most (default 64)\n"
    "  --long-prefill-chunk N     tokens per sequence per step at most (0: no cap)\n"
    "  --no-prefix-caching\n"
    "  --preload-prompts FILE     prompts (token ids per line) put into the prefix cache first\n"
    "  --batching static|adaptive token budget fixed, or following --target-itl-ms\n"
    "  --target-itl-ms F          inter-token latency target of adaptive batching (100)\n"
    "  --speculative-ngram N      prompt-lookup drafts of N tokens every step they exist\n"
    "                             (fixed length, for the invariance tests; 0: off)\n"
    "backend (default --backend cpu, the invariance tests' reference):\n";

constexpr strata::ToolArgs kArgs("strata-batch", /*usage_exit_code=*/2);

std::vector<std::vector<int32_t>> ReadPrompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) kArgs.Fail("cannot read " + path);
  std::vector<std::vector<int32_t>> prompts;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::vector<int32_t> ids;
    long long id = 0;
    while (words >> id) ids.push_back(static_cast<int32_t>(id));
    if (!words.eof())
      kArgs.Fail(path + ": line " + std::to_string(prompts.size() + 1) + " is not ids");
    if (!ids.empty()) prompts.push_back(std::move(ids));
  }
  if (prompts.empty()) kArgs.Fail(path + " holds no prompt");
  return prompts;
}

struct Result {
  std::vector<int32_t> tokens;
  std::string finish = "none";
};

// Submits prompts[first, last) at once and steps the engine until they all finish.
void RunTogether(strata::engine::Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                 size_t first, size_t last, int32_t max_tokens, std::vector<Result>* results) {
  std::vector<std::shared_ptr<strata::engine::RequestStream>> streams;
  for (size_t i = first; i < last; ++i) {
    strata::engine::Request request;
    request.prompt = prompts[i];
    request.params.temperature = 0;
    request.params.max_tokens = max_tokens;
    request.params.ignore_eos = true;
    auto stream = engine.Submit(std::move(request));
    if (!stream.ok()) kArgs.Fail("prompt " + std::to_string(i) + ": " + stream.status().ToString());
    streams.push_back(*stream);
  }
  size_t open = streams.size();
  while (open > 0) {
    bool did_work = false;
    strata::Status status = engine.Step(&did_work);
    if (!status.ok()) kArgs.Fail(status.ToString());
    for (size_t k = 0; k < streams.size(); ++k) {
      strata::engine::StreamChunk chunk;
      Result& r = (*results)[first + k];
      while (streams[k]->Next(&chunk, std::chrono::seconds(0))) {
        r.tokens.insert(r.tokens.end(), chunk.token_ids.begin(), chunk.token_ids.end());
        if (chunk.finish_reason) {
          if (!chunk.error.ok()) kArgs.Fail(chunk.error.ToString());
          r.finish = std::string(strata::sampling::FinishReasonName(*chunk.finish_reason));
          --open;
        }
      }
    }
    if (!did_work && open > 0) kArgs.Fail("the engine stalled with unfinished requests");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help")) {
    std::fputs(kUsage, stdout);
    std::fputs(strata::backend::kBackendFlagsUsage, stdout);
    return 0;
  }
  if (argc < 2) kArgs.Fail(std::string("missing MODEL.gguf\n") + kUsage, 2);
  const std::string model_path = argv[1];
  std::string prompts_path, preload_path, mode = "together";
  int32_t max_tokens = 32;
  strata::engine::EngineOptions engine_options;
  strata::backend::BackendSpec spec;
  spec.kind = strata::backend::BackendKind::kCpu;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--no-prefix-caching") {
      engine_options.enable_prefix_caching = false;
      continue;
    }
    if (i + 1 >= argc) kArgs.Fail(flag + " needs a value (see --help)", 2);
    const char* v = argv[++i];
    if (strata::backend::IsBackendFlag(flag)) {
      if (auto applied = strata::backend::ApplyBackendFlag(flag, v, &spec); !applied.ok()) {
        kArgs.Fail(applied.message(), 2);
      }
    } else if (flag == "--prompts")
      prompts_path = v;
    else if (flag == "--mode")
      mode = v;
    else if (flag == "--preload-prompts")
      preload_path = v;
    else if (flag == "--batching") {
      const std::string b = v;
      if (b != "static" && b != "adaptive") kArgs.Fail("--batching must be static or adaptive", 2);
      engine_options.batching = b == "static" ? strata::engine::BatchingMode::kStatic
                                              : strata::engine::BatchingMode::kAdaptive;
    } else if (flag == "--target-itl-ms") {
      engine_options.adaptive.target_itl_seconds = kArgs.Number(flag, v) / 1000.0;
    } else if (flag == "--max-tokens")
      max_tokens = static_cast<int32_t>(kArgs.Int(flag, v));
    else if (flag == "--max-batched-tokens")
      engine_options.scheduler.max_batched_tokens = kArgs.Int(flag, v);
    else if (flag == "--max-batch-size")
      engine_options.scheduler.max_batch_size = static_cast<int32_t>(kArgs.Int(flag, v));
    else if (flag == "--long-prefill-chunk")
      engine_options.scheduler.long_prefill_chunk = kArgs.Int(flag, v);
    else if (flag == "--speculative-ngram") {
      const int64_t n = kArgs.Int(flag, v);
      if (n > 0) {
        strata::engine::SpeculativeOptions& spec_options = engine_options.speculative;
        spec_options.proposer =
            std::make_shared<strata::engine::NgramProposer>(strata::engine::NgramProposerOptions{});
        spec_options.proposer_name = "ngram";
        spec_options.policy.max_draft_tokens = static_cast<int32_t>(n);
        spec_options.policy.adaptive = false;
      }
    } else
      kArgs.Fail("unknown flag " + flag + " (see --help)", 2);
  }
  if (prompts_path.empty()) kArgs.Fail("--prompts is required (see --help)", 2);
  if (mode != "together" && mode != "alone" && mode != "twice") {
    kArgs.Fail("--mode must be together, alone or twice", 2);
  }
  const std::vector<std::vector<int32_t>> prompts = ReadPrompts(prompts_path);

  auto file = strata::model::GgufFile::Open(model_path);
  if (!file.ok()) kArgs.Fail(file.status().ToString());
  auto tokenizer = strata::tokenizer::Tokenizer::FromGguf(*file);
  if (!tokenizer.ok()) kArgs.Fail(tokenizer.status().ToString());
  auto backend = strata::backend::CreateBackend(*file, spec);
  if (!backend.ok()) kArgs.Fail(backend.status().ToString());
  auto engine = strata::engine::Engine::Create(backend->get(), tokenizer->get(), engine_options);
  if (!engine.ok()) kArgs.Fail(engine.status().ToString());

  if (!preload_path.empty()) {
    for (const std::vector<int32_t>& p : ReadPrompts(preload_path)) {
      strata::Status status = (*engine)->Preload(p);
      if (!status.ok()) kArgs.Fail("preloading: " + status.ToString());
    }
  }

  std::vector<Result> results(prompts.size());
  if (mode == "alone") {
    for (size_t i = 0; i < prompts.size(); ++i) {
      RunTogether(**engine, prompts, i, i + 1, max_tokens, &results);
    }
  } else {
    RunTogether(**engine, prompts, 0, prompts.size(), max_tokens, &results);
    if (mode == "twice") {
      std::vector<Result> second(prompts.size());
      RunTogether(**engine, prompts, 0, prompts.size(), max_tokens, &second);
      results = std::move(second);
    }
  }
  for (size_t i = 0; i < results.size(); ++i) {
    std::printf("%zu %s", i, results[i].finish.c_str());
    for (int32_t t : results[i].tokens) std::printf(" %d", t);
    std::printf("\n");
  }
  const strata::engine::EngineStats s = (*engine)->Stats();
  std::fprintf(stderr,
               "[strata-batch] steps %lld, preemptions %lld, prefix hit tokens %lld, "
               "speculative proposed %lld, speculative accepted %lld, KV blocks %d | %s\n",
               static_cast<long long>(s.steps), static_cast<long long>(s.preemptions_total),
               static_cast<long long>(s.kv.prefix_hit_tokens),
               static_cast<long long>(s.speculative_proposed_tokens_total),
               static_cast<long long>(s.speculative_accepted_tokens_total), s.kv.num_blocks,
               (*backend)->Describe().c_str());
  return 0;
}
