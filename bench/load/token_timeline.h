// TokenTimeline: turns the arrival times of a streamed response's messages into TTFT, inter-token
// gaps and E2E.
//
// Rule for a message carrying k > 1 tokens (a server may batch tokens into one message): its
// tokens are spread evenly over the time since the previous token, i.e. they count as k gaps of
// (t - t_previous) / k each. In the first message, the first token sets TTFT and its k - 1
// companions count as k - 1 gaps of 0 (they arrived together). So a request with n output tokens
// has exactly n - 1 gaps, and they add up to (last token time - TTFT).
//
// Thread rules: not thread-safe; one stream's callbacks use it in order.
#pragma once

#include <chrono>
#include <cstdint>

#include "bench/load/request_result.h"

namespace strata::bench {

class TokenTimeline {
 public:
  using Clock = std::chrono::steady_clock;

  // Marks the request as sent now (or at `t`).
  void MarkSent(Clock::time_point t = Clock::now());
  // Records `count` tokens arriving at `t`; count 0 is ignored (a message without tokens).
  void AddTokens(int64_t count, Clock::time_point t = Clock::now());
  // Records the stream's end at `t` and returns the timings (ok = true; the caller sets errors,
  // prompt tokens and the requested length).
  RequestResult Finish(Clock::time_point t = Clock::now()) const;

  int64_t tokens() const { return tokens_; }
  Clock::time_point sent() const { return sent_; }

 private:
  Clock::time_point sent_{};
  Clock::time_point last_token_{};
  int64_t tokens_ = 0;
  double ttft_s_ = 0;
  std::vector<double> gaps_s_;
};

}  // namespace strata::bench
