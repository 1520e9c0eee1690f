#include "bench/load/token_timeline.h"

namespace strata::bench {

namespace {
double Seconds(TokenTimeline::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}
}  // namespace

void TokenTimeline::MarkSent(Clock::time_point t) { sent_ = t; }

void TokenTimeline::AddTokens(int64_t count, Clock::time_point t) {
  if (count <= 0) return;
  if (tokens_ == 0) {
    ttft_s_ = Seconds(t - sent_);
    gaps_s_.insert(gaps_s_.end(), static_cast<size_t>(count - 1), 0.0);
  } else {
    const double gap = Seconds(t - last_token_) / static_cast<double>(count);
    gaps_s_.insert(gaps_s_.end(), static_cast<size_t>(count), gap);
  }
  tokens_ += count;
  last_token_ = t;
}

RequestResult TokenTimeline::Finish(Clock::time_point t) const {
  RequestResult r;
  r.ok = true;
  r.ttft_s = ttft_s_;
  r.e2e_s = Seconds(t - sent_);
  r.itl_s = gaps_s_;
  r.output_tokens = tokens_;
  return r;
}

}  // namespace strata::bench
