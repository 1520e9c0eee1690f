#include "strata/engine/output_processor.h"

#include "strata/common/check.h"

namespace strata::engine {

OutputProcessor::OutputProcessor(const sampling::SamplingParams& params,
                                 const tokenizer::Tokenizer& tokenizer,
                                 std::span<const int32_t> end_of_generation_ids)
    : checker_(params, end_of_generation_ids), detokenizer_(tokenizer, /*render_special=*/false) {}

OutputProcessor::Output OutputProcessor::Append(std::span<const int32_t> tokens,
                                                std::span<const sampling::SampleLogprobs> logprobs,
                                                sampling::Sampler* sampler) {
  STRATA_CHECK(!finished_);
  STRATA_CHECK(logprobs.empty() || logprobs.size() == tokens.size());
  Output out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t token = tokens[i];
    if (sampler != nullptr) sampler->Accept(token);
    out.token_ids.push_back(token);
    if (!logprobs.empty()) out.logprobs.push_back(logprobs[i]);
    sampling::FinishChecker::Step step = checker_.Append(token, detokenizer_.Push(token));
    out.text += step.text;
    if (step.finish_reason) {
      sampling::FinishChecker::Step last =
          checker_.Finish(detokenizer_.Flush(), *step.finish_reason);
      out.text += last.text;
      out.finish_reason = last.finish_reason;
      finished_ = true;
      break;
    }
  }
  return out;
}

OutputProcessor::Output OutputProcessor::Finish(sampling::FinishReason reason) {
  STRATA_CHECK(!finished_);
  finished_ = true;
  sampling::FinishChecker::Step last = checker_.Finish(detokenizer_.Flush(), reason);
  Output out;
  out.text = std::move(last.text);
  out.finish_reason = last.finish_reason.value_or(reason);
  return out;
}

}  // namespace strata::engine
