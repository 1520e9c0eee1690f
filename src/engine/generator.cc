#include "strata/engine/generator.h"

#include <algorithm>
#include <chrono>

#include "strata/engine/model_runner.h"
#include "strata/engine/output_processor.h"
#include "strata/engine/request_limits.h"
#include "strata/kv/block_pool.h"
#include "strata/kv/block_table.h"
#include "strata/sampling/sampler.h"

namespace strata::engine {
namespace {
double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

Generator::Generator(backend::Backend* backend, const tokenizer::Tokenizer* tokenizer,
                     int64_t prefill_chunk)
    : backend_(backend),
      tokenizer_(tokenizer),
      prefill_chunk_(std::max<int64_t>(1, prefill_chunk)) {}

StatusOr<GenerationResult> Generator::Generate(
    std::span<const int32_t> prompt, const sampling::SamplingParams& params,
    const std::function<void(std::string_view)>& on_text) {
  const model::ModelConfig& config = backend_->config();
  STRATA_RETURN_IF_ERROR(sampling::Validate(params, static_cast<int>(config.vocab_size)));
  const backend::KvGeometry geometry = backend_->kv_geometry();
  STRATA_RETURN_IF_ERROR(
      CheckRequestFits(static_cast<int64_t>(prompt.size()), params.max_tokens,
                       {config.context_length, geometry.num_blocks, geometry.block_size}));
  const int64_t total = static_cast<int64_t>(prompt.size()) + params.max_tokens;
  kv::BlockPool pool(geometry.num_blocks);
  kv::BlockTable table(geometry.block_size);
  std::vector<kv::BlockId> ids;
  if (!pool.Allocate(table.BlocksNeeded(total), &ids)) {
    return ResourceExhaustedError(
        "the KV cache holds " + std::to_string(int64_t{geometry.num_blocks} * geometry.block_size) +
        " tokens; this request needs " + std::to_string(total) + " (raise the KV budget)");
  }
  table.Append(ids);

  GenerationResult result;
  result.stats.prompt_tokens = static_cast<int64_t>(prompt.size());
  sampling::Sampler sampler(params, prompt);
  const std::vector<tokenizer::TokenId> eog = tokenizer_->vocab().EndOfGenerationIds();
  OutputProcessor output(params, *tokenizer_, eog);
  auto emit = [&](const std::string& text) {
    if (text.empty()) return;
    result.text += text;
    if (on_text) on_text(text);
  };

  ModelRunner runner(backend_);
  sampling::Sampler* const row[] = {&sampler};
  std::vector<int32_t> sampled;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t pos = 0; pos < static_cast<int64_t>(prompt.size()); pos += prefill_chunk_) {
    const int64_t len = std::min<int64_t>(prefill_chunk_, prompt.size() - pos);
    backend::Batch batch;
    // Only the last chunk's logits are sampled from.
    const bool last = pos + len == static_cast<int64_t>(prompt.size());
    batch.sequences.push_back({prompt.subspan(pos, len), pos, table.blocks(),
                               last ? backend::LogitsWanted::kLast : backend::LogitsWanted::kNone});
    STRATA_RETURN_IF_ERROR(
        runner.Run(batch, std::span<sampling::Sampler* const>(row, last ? 1 : 0), &sampled));
  }
  result.stats.prefill_seconds = SecondsSince(start);

  const auto decode_start = std::chrono::steady_clock::now();
  int64_t pos = static_cast<int64_t>(prompt.size());
  while (true) {
    const int32_t token = sampled.at(0);
    OutputProcessor::Output o = output.Append(std::span<const int32_t>(&token, 1), {}, &sampler);
    result.tokens.insert(result.tokens.end(), o.token_ids.begin(), o.token_ids.end());
    emit(o.text);
    if (o.finish_reason) {
      result.finish_reason = *o.finish_reason;
      break;
    }
    backend::Batch batch;
    batch.sequences.push_back(
        {std::span<const int32_t>(&result.tokens.back(), 1), pos, table.blocks()});
    STRATA_RETURN_IF_ERROR(runner.Run(batch, row, &sampled));
    ++pos;
  }
  result.stats.decode_seconds = SecondsSince(decode_start);
  result.stats.generated_tokens = static_cast<int64_t>(result.tokens.size());
  table.ReleaseAll(&pool);
  return result;
}

}  // namespace strata::engine
