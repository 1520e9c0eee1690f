#include "strata/sampling/sampling_params.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

namespace strata::sampling {
namespace {

// Shortest round-trippable-enough rendering for messages: "0.5", "1e+30", "nan", "inf".
std::string FormatFloat(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", value);
  return buffer;
}

Status NotFinite(std::string_view field, float value) {
  return InvalidArgumentError(std::string(field) + " must be a finite number, got " +
                              FormatFloat(value));
}

// "<field> must be between <lo> and <hi>, got <value>" for a closed range.
Status CheckClosed(std::string_view field, float value, float lo, float hi) {
  if (!std::isfinite(value)) return NotFinite(field, value);
  if (value < lo || value > hi) {
    return InvalidArgumentError(std::string(field) + " must be between " + FormatFloat(lo) +
                                " and " + FormatFloat(hi) + ", got " + FormatFloat(value));
  }
  return OkStatus();
}

// "<field> must be greater than <lo> and at most <hi>, got <value>" for (lo, hi].
Status CheckOpenClosed(std::string_view field, float value, float lo, float hi) {
  if (!std::isfinite(value)) return NotFinite(field, value);
  if (!(value > lo) || value > hi) {
    return InvalidArgumentError(std::string(field) + " must be greater than " + FormatFloat(lo) +
                                " and at most " + FormatFloat(hi) + ", got " + FormatFloat(value));
  }
  return OkStatus();
}

Status CheckIntRange(std::string_view field, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) {
    return InvalidArgumentError(std::string(field) + " must be between " + std::to_string(lo) +
                                " and " + std::to_string(hi) + ", got " + std::to_string(value));
  }
  return OkStatus();
}

Status CheckAtLeast(std::string_view field, int64_t value, int64_t lo) {
  if (value < lo) {
    return InvalidArgumentError(std::string(field) + " must be at least " + std::to_string(lo) +
                                ", got " + std::to_string(value));
  }
  return OkStatus();
}

// Strict UTF-8 (no overlongs, surrogates or code points above U+10FFFF). Stop strings must be
// valid so that holding back a possible stop-string prefix never splits a character.
bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    size_t length = 0;
    unsigned char lo = 0x80;
    unsigned char hi = 0xBF;
    if (lead < 0x80) {
      ++i;
      continue;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) lo = 0xA0;  // overlong
      if (lead == 0xED) hi = 0x9F;  // surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) lo = 0x90;  // overlong
      if (lead == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return false;
    }
    if (text.size() - i < length) return false;
    for (size_t k = 1; k < length; ++k) {
      const auto byte = static_cast<unsigned char>(text[i + k]);
      const unsigned char min = k == 1 ? lo : 0x80;
      const unsigned char max = k == 1 ? hi : 0xBF;
      if (byte < min || byte > max) return false;
    }
    i += length;
  }
  return true;
}

}  // namespace

Status Validate(const SamplingParams& params, int vocab_size) {
  STRATA_CHECK(vocab_size > 0);
  STRATA_RETURN_IF_ERROR(CheckClosed("temperature", params.temperature, 0.0f, kMaxTemperature));
  STRATA_RETURN_IF_ERROR(CheckAtLeast("top_k", params.top_k, 0));
  STRATA_RETURN_IF_ERROR(CheckOpenClosed("top_p", params.top_p, 0.0f, 1.0f));
  STRATA_RETURN_IF_ERROR(CheckClosed("min_p", params.min_p, 0.0f, 1.0f));
  STRATA_RETURN_IF_ERROR(CheckOpenClosed("repetition_penalty", params.repetition_penalty, 0.0f,
                                         kMaxRepetitionPenalty));
  STRATA_RETURN_IF_ERROR(CheckClosed("presence_penalty", params.presence_penalty,
                                     -kMaxAbsPresencePenalty, kMaxAbsPresencePenalty));
  STRATA_RETURN_IF_ERROR(CheckClosed("frequency_penalty", params.frequency_penalty,
                                     -kMaxAbsFrequencyPenalty, kMaxAbsFrequencyPenalty));
  STRATA_RETURN_IF_ERROR(
      CheckIntRange("penalty_last_n", params.penalty_last_n, -1, kMaxPenaltyLastN));
  STRATA_RETURN_IF_ERROR(CheckAtLeast("max_tokens", params.max_tokens, 1));
  STRATA_RETURN_IF_ERROR(CheckIntRange("logprobs", params.logprobs, 0, kMaxLogprobs));

  if (params.stop.size() > kMaxStopStrings) {
    return InvalidArgumentError("stop must hold at most " + std::to_string(kMaxStopStrings) +
                                " strings, got " + std::to_string(params.stop.size()));
  }
  for (size_t i = 0; i < params.stop.size(); ++i) {
    const std::string& stop = params.stop[i];
    const std::string field = "stop[" + std::to_string(i) + "]";
    if (stop.empty() || stop.size() > kMaxStopStringBytes) {
      return InvalidArgumentError(field + " must be between 1 and " +
                                  std::to_string(kMaxStopStringBytes) + " bytes long, got " +
                                  std::to_string(stop.size()));
    }
    if (!IsValidUtf8(stop)) return InvalidArgumentError(field + " must be valid UTF-8");
  }

  if (params.stop_token_ids.size() > kMaxStopTokenIds) {
    return InvalidArgumentError("stop_token_ids must hold at most " +
                                std::to_string(kMaxStopTokenIds) + " ids, got " +
                                std::to_string(params.stop_token_ids.size()));
  }
  for (size_t i = 0; i < params.stop_token_ids.size(); ++i) {
    STRATA_RETURN_IF_ERROR(CheckIntRange("stop_token_ids[" + std::to_string(i) + "]",
                                         params.stop_token_ids[i], 0, vocab_size - 1));
  }
  return OkStatus();
}

}  // namespace strata::sampling
