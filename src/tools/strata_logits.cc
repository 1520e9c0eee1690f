// strata-logits: runs a Strata backend (the CPU one unless --backend says otherwise) on given
// token ids, for the fidelity tests.
//
//   strata-logits MODEL.gguf --tokens "ID ID ..." [--mode logits|nll|greedy]
//                 [--steps N] [--chunk N] [backend flags: --backend cpu|cuda|auto, --threads N,
//                 --kv-dtype f16|f32, --matmul-precision fp32|int8, ... (backend_flags.h)]
//
// logits: teacher forcing; writes [n_tokens, vocab] fp32 (little-endian) to stdout.
// nll:    teacher forcing; writes [n_tokens - 1] fp32: log p(token[i+1] | tokens[..i]).
// greedy: prefill then N greedy steps; prints the generated ids on one line.
// Prompts are prefilled in chunks of --chunk tokens (default 256), which also exercises the
// chunked path. Run with --help for the flags. Errors: one line on stderr, exit code 1 (2 for
// bad usage).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "strata/backend/backend_factory.h"
#include "strata/backend/backend_flags.h"
#include "strata/common/tool_args.h"
#include "strata/kv/block_pool.h"
#include "strata/kv/block_table.h"
#include "strata/model/gguf_file.h"

namespace {

using strata::backend::Batch;
using strata::backend::SequenceSlice;

constexpr char kUsage[] =
    "usage: strata-logits MODEL.gguf --tokens \"ID ...\" [flags]\n"
    "  --tokens \"ID ...\"        space-separated token ids (required)\n"
    "  --mode logits|nll|greedy logits (default): [n, vocab] fp32 on stdout; nll: [n - 1] fp32\n"
    "                           log p(token[i+1] | tokens[..i]); greedy: --steps greedy ids\n"
    "  --steps N                greedy: tokens to generate (default 16)\n"
    "  --chunk N                prompt tokens per forward pass (default 256)\n"
    "backend (default --backend cpu, the fidelity tests' reference; --kv-budget-bytes defaults\n"
    "to 1073741824 here):\n";

constexpr strata::ToolArgs kArgs("strata-logits", /*usage_exit_code=*/2);

double LogSoftmaxAt(const float* row, int64_t n, int32_t index) {
  float max = *std::max_element(row, row + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(row[i]) - max);
  return static_cast<double>(row[index]) - max - std::log(sum);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help")) {
    std::fputs(kUsage, stdout);
    std::fputs(strata::backend::kBackendFlagsUsage, stdout);
    return 0;
  }
  if (argc < 2) kArgs.Fail(std::string("missing MODEL.gguf\n") + kUsage, 2);
  std::string model_path = argv[1];
  std::string mode = "logits";
  std::vector<int32_t> tokens;
  int64_t steps = 16;
  int64_t chunk = 256;
  strata::backend::BackendSpec spec;
  spec.kind = strata::backend::BackendKind::kCpu;  // the fidelity tests' reference
  spec.kv_budget_bytes = int64_t{1} << 30;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) kArgs.Fail(arg + " needs a value (see --help)", 2);
      return argv[++i];
    };
    if (strata::backend::IsBackendFlag(arg)) {
      const std::string value = next();
      if (auto applied = strata::backend::ApplyBackendFlag(arg, value, &spec); !applied.ok()) {
        kArgs.Fail(applied.message(), 2);
      }
    } else if (arg == "--tokens") {
      std::istringstream in(next());
      long long id;
      while (in >> id) tokens.push_back(static_cast<int32_t>(id));
    } else if (arg == "--mode") {
      mode = next();
    } else if (arg == "--steps") {
      steps = std::atoll(next().c_str());
    } else if (arg == "--chunk") {
      chunk = std::max<int64_t>(1, std::atoll(next().c_str()));
    } else {
      kArgs.Fail("unknown argument " + arg + " (see --help)", 2);
    }
  }
  if (tokens.empty()) kArgs.Fail("--tokens is empty", 2);
  if (mode != "logits" && mode != "nll" && mode != "greedy") {
    kArgs.Fail("unknown --mode " + mode, 2);
  }

  auto file = strata::model::GgufFile::Open(model_path);
  if (!file.ok()) kArgs.Fail(file.status().ToString());
  auto backend = strata::backend::CreateBackend(*file, spec);
  if (!backend.ok()) kArgs.Fail(backend.status().ToString());
  const int64_t vocab = (*backend)->config().vocab_size;
  const auto geometry = (*backend)->kv_geometry();

  strata::kv::BlockPool pool(geometry.num_blocks);
  strata::kv::BlockTable table(geometry.block_size);
  const int64_t total = static_cast<int64_t>(tokens.size()) + (mode == "greedy" ? steps : 0);
  std::vector<strata::kv::BlockId> ids;
  if (!pool.Allocate(table.BlocksNeeded(total), &ids))
    kArgs.Fail("the KV budget cannot hold the tokens");
  table.Append(ids);

  std::vector<float> logits;
  std::vector<float> out;
  int32_t last_argmax = -1;
  for (int64_t start = 0; start < static_cast<int64_t>(tokens.size()); start += chunk) {
    int64_t len = std::min<int64_t>(chunk, tokens.size() - start);
    Batch batch;
    SequenceSlice seq;
    seq.tokens = std::span<const int32_t>(tokens.data() + start, len);
    seq.start_pos = start;
    seq.block_ids = table.blocks();
    seq.logits = mode != "greedy" ? strata::backend::LogitsWanted::kAll
                                  : strata::backend::LogitsWanted::kLast;
    batch.sequences.push_back(seq);
    auto status = (*backend)->Forward(batch, &logits);
    if (!status.ok()) kArgs.Fail(status.ToString());
    if (mode == "logits") {
      std::fwrite(logits.data(), sizeof(float), logits.size(), stdout);
    } else if (mode == "nll") {
      for (int64_t i = 0; i < len; ++i) {
        int64_t next = start + i + 1;
        if (next >= static_cast<int64_t>(tokens.size())) break;
        out.push_back(
            static_cast<float>(LogSoftmaxAt(logits.data() + i * vocab, vocab, tokens[next])));
      }
    } else {
      last_argmax = static_cast<int32_t>(std::max_element(logits.begin(), logits.begin() + vocab) -
                                         logits.begin());
    }
  }
  if (mode == "nll") std::fwrite(out.data(), sizeof(float), out.size(), stdout);
  if (mode == "greedy") {
    std::vector<int32_t> generated;
    int64_t pos = static_cast<int64_t>(tokens.size());
    for (int64_t s = 0; s < steps; ++s) {
      generated.push_back(last_argmax);
      if (s + 1 == steps) break;
      Batch batch;
      SequenceSlice seq;
      seq.tokens = std::span<const int32_t>(&generated.back(), 1);
      seq.start_pos = pos++;
      seq.block_ids = table.blocks();
      batch.sequences.push_back(seq);
      auto status = (*backend)->Forward(batch, &logits);
      if (!status.ok()) kArgs.Fail(status.ToString());
      last_argmax = static_cast<int32_t>(std::max_element(logits.begin(), logits.begin() + vocab) -
                                         logits.begin());
    }
    for (size_t i = 0; i < generated.size(); ++i) std::printf(i ? " %d" : "%d", generated[i]);
    std::printf("\n");
  }
  table.ReleaseAll(&pool);
  return 0;
}
