#include "strata/sampling/finish_checker.h"

#include <algorithm>

#include "strata/common/check.h"

namespace strata::sampling {

FinishChecker::FinishChecker(const SamplingParams& params,
                             std::span<const int32_t> end_of_generation_ids)
    : max_tokens_(params.max_tokens), stop_strings_(params.stop) {
  STRATA_CHECK(max_tokens_ >= 1);
  stop_tokens_ = params.stop_token_ids;
  if (!params.ignore_eos) {
    stop_tokens_.insert(stop_tokens_.end(), end_of_generation_ids.begin(),
                        end_of_generation_ids.end());
  }
  std::sort(stop_tokens_.begin(), stop_tokens_.end());
  stop_tokens_.erase(std::unique(stop_tokens_.begin(), stop_tokens_.end()), stop_tokens_.end());
}

bool FinishChecker::IsStopToken(int32_t token) const {
  return std::binary_search(stop_tokens_.begin(), stop_tokens_.end(), token);
}

FinishChecker::Step FinishChecker::Append(int32_t token, std::string_view text) {
  STRATA_CHECK(!finished());
  ++num_tokens_;
  Step step;
  if (IsStopToken(token)) {
    stop_token_ = token;
    finish_reason_ = FinishReason::kStop;
  } else {
    step.text = stop_strings_.Push(text);
    if (stop_strings_.stopped()) {
      finish_reason_ = FinishReason::kStop;
    } else if (num_tokens_ >= max_tokens_) {
      finish_reason_ = FinishReason::kLength;
    }
  }
  step.finish_reason = finish_reason_;
  return step;
}

FinishChecker::Step FinishChecker::Finish(std::string_view tail, FinishReason reason) {
  STRATA_CHECK(!finish_called_);
  finish_called_ = true;
  if (!finish_reason_) finish_reason_ = reason;
  Step step;
  if (!stop_strings_.stopped()) {
    step.text = stop_strings_.Push(tail);
    if (!stop_strings_.stopped()) {
      step.text += stop_strings_.Flush();
    } else if (*finish_reason_ == FinishReason::kLength) {
      finish_reason_ = FinishReason::kStop;
    }
  }
  step.finish_reason = finish_reason_;
  return step;
}

std::optional<int> FinishChecker::stop_string_index() const {
  if (!stop_strings_.stopped()) return std::nullopt;
  return stop_strings_.matched_index();
}

}  // namespace strata::sampling
