#include "strata/engine/speculation_policy.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "strata/common/check.h"

namespace strata::engine {
namespace {

// Weight of a sequence's prior (the proposer's acceptance) in verifications' worth.
constexpr double kSequencePriorWeight = 2.0;
// Weight of the cost prior in steps' worth, and the two token counts it is placed at.
constexpr double kCostPriorWeight = 4.0;
constexpr double kPriorLowTokens = 1.0;
constexpr double kPriorHighTokens = 64.0;
// Acceptance is kept below 1 so that a^k keeps falling with k.
constexpr double kMaxAcceptance = 0.98;

bool InUnit(double x) { return x >= 0.0 && x <= 1.0; }

}  // namespace

Status SpeculationPolicyOptions::Validate() const {
  if (max_draft_tokens < 1 || max_draft_tokens > kMaxDraftTokens) {
    return InvalidArgumentError("the speculative draft length must be in [1, " +
                                std::to_string(kMaxDraftTokens) + "], got " +
                                std::to_string(max_draft_tokens));
  }
  if (!InUnit(prior_acceptance) || !(prior_token_cost >= 0.0) ||
      !(acceptance_decay > 0.0 && acceptance_decay <= 1.0) ||
      !(timing_decay > 0.0 && timing_decay <= 1.0)) {
    return InvalidArgumentError("speculation policy priors and decays out of range");
  }
  return OkStatus();
}

SpeculationPolicy::SpeculationPolicy(const SpeculationPolicyOptions& options) : options_(options) {
  STRATA_CHECK(options_.Validate().ok());
}

void SpeculationPolicy::ObserveStep(int64_t tokens, double seconds) {
  if (tokens < 1 || !(seconds > 0.0) || !std::isfinite(seconds)) return;
  const auto x = static_cast<double>(tokens);
  if (!seeded_) {
    // The prior: the first step's time split as fixed + per_token * tokens with the prior
    // ratio, placed at two token counts so that the slope has a value from the start.
    seeded_ = true;
    const double fixed = seconds / (1.0 + options_.prior_token_cost * x);
    const double per_token = options_.prior_token_cost * fixed;
    for (double px : {kPriorLowTokens, kPriorHighTokens}) {
      const double w = kCostPriorWeight / 2.0;
      const double py = fixed + per_token * px;
      sw_ += w;
      sx_ += w * px;
      sy_ += w * py;
      sxx_ += w * px * px;
      sxy_ += w * px * py;
    }
  }
  const double d = options_.timing_decay;
  sw_ = sw_ * d + 1.0;
  sx_ = sx_ * d + x;
  sy_ = sy_ * d + seconds;
  sxx_ = sxx_ * d + x * x;
  sxy_ = sxy_ * d + x * seconds;
}

void SpeculationPolicy::ObserveProposal(int64_t tokens, double seconds) {
  if (tokens < 1 || !(seconds >= 0.0) || !std::isfinite(seconds)) return;
  const double d = options_.timing_decay;
  proposal_seconds_ = proposal_seconds_ * d + seconds;
  proposal_tokens_ = proposal_tokens_ * d + static_cast<double>(tokens);
}

double SpeculationPolicy::TokenCost(int64_t decode_tokens) const {
  if (!seeded_ || sw_ <= 0.0) return options_.prior_token_cost;
  const double n = static_cast<double>(std::max<int64_t>(decode_tokens, 1));
  const double mx = sx_ / sw_;
  const double my = sy_ / sw_;
  const double var = sxx_ / sw_ - mx * mx;
  double per_token = 0.0;
  double step = 0.0;
  if (var > 1e-12) {
    per_token = std::max((sxy_ / sw_ - mx * my) / var, 0.0);
    step = my - per_token * mx + per_token * n;
  } else {
    // No spread in the steps' sizes yet: the prior ratio, scaled to the time measured.
    const double fixed = my / (1.0 + options_.prior_token_cost * mx);
    per_token = options_.prior_token_cost * fixed;
    step = fixed + per_token * n;
  }
  if (!(step > 0.0)) return 1.0;  // a fit that says nothing useful: treat tokens as dear
  double cost = per_token * n / step;
  if (proposal_tokens_ > 0.0) cost += (proposal_seconds_ / proposal_tokens_) * n / step;
  return std::min(cost, 1.0);
}

void SpeculationPolicy::ObserveVerification(SequenceAcceptance* sequence, int64_t proposed,
                                            int64_t accepted, bool rejected) {
  STRATA_CHECK(sequence != nullptr);
  STRATA_CHECK(proposed >= 1 && accepted >= 0 && accepted <= proposed);
  const double trials = static_cast<double>(accepted) + (rejected ? 1.0 : 0.0);
  const double d = options_.acceptance_decay;
  sequence->accepted = sequence->accepted * d + static_cast<double>(accepted);
  sequence->trials = sequence->trials * d + trials;
  // The proposer's figure forgets more slowly: it stands for every sequence.
  const double g = std::sqrt(d);
  accepted_ = accepted_ * g + static_cast<double>(accepted);
  trials_ = trials_ * g + trials;
}

double SpeculationPolicy::proposer_acceptance() const {
  return (accepted_ + options_.prior_acceptance * kSequencePriorWeight) /
         (trials_ + kSequencePriorWeight);
}

double SpeculationPolicy::Acceptance(const SequenceAcceptance& sequence) const {
  const double a = (sequence.accepted + proposer_acceptance() * kSequencePriorWeight) /
                   (sequence.trials + kSequencePriorWeight);
  return std::clamp(a, 0.0, kMaxAcceptance);
}

int32_t SpeculationPolicy::DraftLength(const SequenceAcceptance& sequence,
                                       int64_t decode_tokens) const {
  if (!options_.adaptive) return options_.max_draft_tokens;
  const double a = Acceptance(sequence);
  const double cost = TokenCost(decode_tokens);
  int32_t k = 0;
  double gain = a;  // a^(k+1): what draft token k+1 adds
  while (k < options_.max_draft_tokens && gain > cost) {
    ++k;
    gain *= a;
  }
  return k;
}

}  // namespace strata::engine
