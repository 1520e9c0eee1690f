#include "strata/sampling/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

namespace strata::sampling {
namespace {

constexpr int kVocab = 262144;

TEST(ValidateSamplingParams, DefaultsAreValid) {
  EXPECT_TRUE(Validate(SamplingParams{}, kVocab).ok());
}

TEST(ValidateSamplingParams, AcceptsEveryBoundary) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.repetition_penalty = kMaxRepetitionPenalty;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.penalty_last_n = -1;
  p.max_tokens = 1;
  p.logprobs = kMaxLogprobs;
  p.stop.assign(kMaxStopStrings, std::string(kMaxStopStringBytes, 'x'));
  p.stop_token_ids = {0, kVocab - 1};
  EXPECT_TRUE(Validate(p, kVocab).ok()) << Validate(p, kVocab).ToString();

  p.temperature = kMaxTemperature;
  p.top_p = 1e-6f;
  p.min_p = 0.0f;
  p.penalty_last_n = kMaxPenaltyLastN;
  p.stop = {"\xC3\xA9t\xC3\xA9", "\xF0\x9F\x98\x80"};  // "été", an emoji
  EXPECT_TRUE(Validate(p, kVocab).ok()) << Validate(p, kVocab).ToString();
}

struct BadCase {
  std::string name;
  std::function<void(SamplingParams&)> mutate;
  std::string message;  // the whole message
};

class ValidateRejects : public testing::TestWithParam<BadCase> {};

TEST_P(ValidateRejects, WithAMessageNamingTheFieldAndRange) {
  SamplingParams p;
  GetParam().mutate(p);
  const Status status = Validate(p, kVocab);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), GetParam().message);
}

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

INSTANTIATE_TEST_SUITE_P(
    Fields, ValidateRejects,
    testing::Values(
        BadCase{"TemperatureNegative", [](SamplingParams& p) { p.temperature = -0.5f; },
                "temperature must be between 0 and 100, got -0.5"},
        BadCase{"TemperatureTooHigh", [](SamplingParams& p) { p.temperature = 101.0f; },
                "temperature must be between 0 and 100, got 101"},
        BadCase{"TemperatureNan", [](SamplingParams& p) { p.temperature = kNan; },
                "temperature must be a finite number, got nan"},
        BadCase{"TemperatureInf", [](SamplingParams& p) { p.temperature = kInf; },
                "temperature must be a finite number, got inf"},
        BadCase{"TopKNegative", [](SamplingParams& p) { p.top_k = -1; },
                "top_k must be at least 0, got -1"},
        BadCase{"TopPZero", [](SamplingParams& p) { p.top_p = 0.0f; },
                "top_p must be greater than 0 and at most 1, got 0"},
        BadCase{"TopPAboveOne", [](SamplingParams& p) { p.top_p = 1.5f; },
                "top_p must be greater than 0 and at most 1, got 1.5"},
        BadCase{"TopPNan", [](SamplingParams& p) { p.top_p = kNan; },
                "top_p must be a finite number, got nan"},
        BadCase{"MinPNegative", [](SamplingParams& p) { p.min_p = -0.1f; },
                "min_p must be between 0 and 1, got -0.1"},
        BadCase{"MinPAboveOne", [](SamplingParams& p) { p.min_p = 2.0f; },
                "min_p must be between 0 and 1, got 2"},
        BadCase{"RepetitionPenaltyZero", [](SamplingParams& p) { p.repetition_penalty = 0.0f; },
                "repetition_penalty must be greater than 0 and at most 10, got 0"},
        BadCase{"RepetitionPenaltyTooHigh", [](SamplingParams& p) { p.repetition_penalty = 11.0f; },
                "repetition_penalty must be greater than 0 and at most 10, got 11"},
        BadCase{"PresencePenaltyTooLow", [](SamplingParams& p) { p.presence_penalty = -2.5f; },
                "presence_penalty must be between -2 and 2, got -2.5"},
        BadCase{"FrequencyPenaltyTooHigh", [](SamplingParams& p) { p.frequency_penalty = 3.0f; },
                "frequency_penalty must be between -2 and 2, got 3"},
        BadCase{"FrequencyPenaltyInf", [](SamplingParams& p) { p.frequency_penalty = -kInf; },
                "frequency_penalty must be a finite number, got -inf"},
        BadCase{"PenaltyLastNBelowMinusOne", [](SamplingParams& p) { p.penalty_last_n = -2; },
                "penalty_last_n must be between -1 and 1048576, got -2"},
        BadCase{"MaxTokensZero", [](SamplingParams& p) { p.max_tokens = 0; },
                "max_tokens must be at least 1, got 0"},
        BadCase{"LogprobsTooMany", [](SamplingParams& p) { p.logprobs = 21; },
                "logprobs must be between 0 and 20, got 21"},
        BadCase{"LogprobsNegative", [](SamplingParams& p) { p.logprobs = -1; },
                "logprobs must be between 0 and 20, got -1"},
        BadCase{"TooManyStopStrings",
                [](SamplingParams& p) { p.stop.assign(kMaxStopStrings + 1, "x"); },
                "stop must hold at most 16 strings, got 17"},
        BadCase{"EmptyStopString",
                [](SamplingParams& p) {
                  p.stop = {"ok", ""};
                },
                "stop[1] must be between 1 and 256 bytes long, got 0"},
        BadCase{"LongStopString",
                [](SamplingParams& p) { p.stop = {std::string(kMaxStopStringBytes + 1, 'a')}; },
                "stop[0] must be between 1 and 256 bytes long, got 257"},
        BadCase{"InvalidUtf8StopString",
                [](SamplingParams& p) {
                  p.stop = {"a", "\xC3"};
                },
                "stop[1] must be valid UTF-8"},
        BadCase{"OverlongUtf8StopString", [](SamplingParams& p) { p.stop = {"\xC0\xAF"}; },
                "stop[0] must be valid UTF-8"},
        BadCase{"SurrogateStopString", [](SamplingParams& p) { p.stop = {"\xED\xA0\x80"}; },
                "stop[0] must be valid UTF-8"},
        BadCase{"StopTokenIdNegative",
                [](SamplingParams& p) {
                  p.stop_token_ids = {1, -1};
                },
                "stop_token_ids[1] must be between 0 and 262143, got -1"},
        BadCase{"StopTokenIdPastVocab", [](SamplingParams& p) { p.stop_token_ids = {kVocab}; },
                "stop_token_ids[0] must be between 0 and 262143, got 262144"},
        BadCase{"TooManyStopTokenIds",
                [](SamplingParams& p) { p.stop_token_ids.assign(kMaxStopTokenIds + 1, 1); },
                "stop_token_ids must hold at most 256 ids, got 257"}),
    [](const testing::TestParamInfo<BadCase>& info) { return info.param.name; });

}  // namespace
}  // namespace strata::sampling
