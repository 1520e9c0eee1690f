#include "strata/engine/self_draft_calibration.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "strata/common/check.h"

namespace strata::engine {
namespace {

using Clock = std::chrono::steady_clock;

// Blocks 0.. for `tokens` positions.
std::vector<kv::BlockId> FirstBlocks(const backend::Backend& b, int64_t tokens) {
  const int32_t block_size = b.kv_geometry().block_size;
  std::vector<kv::BlockId> blocks;
  for (int64_t i = 0; i * block_size < tokens; ++i) blocks.push_back(static_cast<kv::BlockId>(i));
  return blocks;
}

Status CheckRoom(const backend::Backend& b, int64_t tokens) {
  const backend::KvGeometry g = b.kv_geometry();
  if (int64_t{g.num_blocks} * g.block_size < tokens) {
    return FailedPreconditionError("calibrating self-speculation needs KV for " +
                                   std::to_string(tokens) + " tokens");
  }
  return OkStatus();
}

int32_t ArgMax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// Greedy tokens after each of `tokens` (teacher-forced): one forward with every row.
StatusOr<std::vector<int32_t>> GreedyRows(backend::Backend& b, std::span<const int32_t> tokens) {
  STRATA_RETURN_IF_ERROR(CheckRoom(b, static_cast<int64_t>(tokens.size())));
  const std::vector<kv::BlockId> blocks = FirstBlocks(b, static_cast<int64_t>(tokens.size()));
  backend::Batch batch;
  batch.sequences.push_back({tokens, 0, blocks, backend::LogitsWanted::kAll});
  std::vector<float> logits;
  STRATA_RETURN_IF_ERROR(b.Forward(batch, &logits));
  const auto vocab = static_cast<size_t>(b.config().vocab_size);
  std::vector<int32_t> out(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    out[i] = ArgMax(std::span<const float>(logits).subspan(i * vocab, vocab));
  }
  return out;
}

// Median seconds of a one-token forward at the end of `tokens` (whose KV the backend holds).
StatusOr<double> OneTokenSeconds(backend::Backend& b, std::span<const int32_t> tokens) {
  const auto n = static_cast<int64_t>(tokens.size());
  const std::vector<kv::BlockId> blocks = FirstBlocks(b, n);
  std::vector<double> times;
  std::vector<float> logits;
  for (int i = 0; i < 7; ++i) {
    backend::Batch batch;
    batch.sequences.push_back(
        {tokens.subspan(static_cast<size_t>(n - 1)), n - 1, blocks, backend::LogitsWanted::kLast});
    const Clock::time_point start = Clock::now();
    STRATA_RETURN_IF_ERROR(b.Forward(batch, &logits));
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double ExpectedSpeedup(double agreement, double cost, int32_t draft_tokens) {
  const double a = std::clamp(agreement, 0.0, 0.999);
  const double tokens = (1.0 - std::pow(a, draft_tokens + 1)) / (1.0 - a);
  return tokens / (1.0 + draft_tokens * cost);
}

}  // namespace

StatusOr<std::vector<SelfDraftCandidate>> MeasureSelfDrafts(
    backend::Backend& full, const TruncatedBackendFactory& make_truncated,
    std::span<const int32_t> layers, std::span<const int32_t> calibration, int32_t continuation,
    int32_t draft_tokens) {
  if (calibration.empty() || continuation < 1 || draft_tokens < 1) {
    return InvalidArgumentError(
        "self-speculation calibration needs a prompt, a continuation "
        "and a draft length");
  }
  // The full model's greedy continuation: the prompt, then one token a forward.
  std::vector<int32_t> text(calibration.begin(), calibration.end());
  const int64_t total = static_cast<int64_t>(text.size()) + continuation;
  STRATA_RETURN_IF_ERROR(CheckRoom(full, total));
  const std::vector<kv::BlockId> blocks = FirstBlocks(full, total);
  const auto vocab = static_cast<size_t>(full.config().vocab_size);
  std::vector<float> logits;
  for (int32_t i = 0; i < continuation; ++i) {
    const size_t from = i == 0 ? 0 : text.size() - 1;
    backend::Batch batch;
    batch.sequences.push_back({std::span<const int32_t>(text).subspan(from),
                               static_cast<int64_t>(from), blocks, backend::LogitsWanted::kLast});
    STRATA_RETURN_IF_ERROR(full.Forward(batch, &logits));
    text.push_back(ArgMax(std::span<const float>(logits).first(vocab)));
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<int32_t> reference, GreedyRows(full, text));
  STRATA_ASSIGN_OR_RETURN(const double full_seconds, OneTokenSeconds(full, text));
  const size_t first = calibration.size() - 1;  // rows that predict the continuation
  std::vector<SelfDraftCandidate> out;
  for (int32_t k : layers) {
    if (k < 1 || k >= full.config().n_layers) {
      return InvalidArgumentError("a self-speculation draft must have 1 to " +
                                  std::to_string(full.config().n_layers - 1) + " layers, got " +
                                  std::to_string(k));
    }
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<backend::Backend> truncated, make_truncated(k));
    STRATA_ASSIGN_OR_RETURN(std::vector<int32_t> guess, GreedyRows(*truncated, text));
    int64_t agree = 0;
    for (size_t i = first; i + 1 < text.size(); ++i) agree += guess[i] == reference[i];
    SelfDraftCandidate c;
    c.layers = k;
    c.agreement = static_cast<double>(agree) / static_cast<double>(text.size() - 1 - first);
    STRATA_ASSIGN_OR_RETURN(const double seconds, OneTokenSeconds(*truncated, text));
    c.cost = full_seconds > 0 ? seconds / full_seconds : 1.0;
    c.speedup = ExpectedSpeedup(c.agreement, c.cost, draft_tokens);
    out.push_back(c);
  }
  return out;
}

const SelfDraftCandidate& BestSelfDraft(std::span<const SelfDraftCandidate> candidates) {
  STRATA_CHECK(!candidates.empty());
  size_t best = 0;
  for (size_t i = 1; i < candidates.size(); ++i) {
    if (candidates[i].speedup > candidates[best].speedup) best = i;
  }
  return candidates[best];
}

}  // namespace strata::engine
