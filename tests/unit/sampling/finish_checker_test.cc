#include "strata/sampling/finish_checker.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace strata::sampling {
namespace {

constexpr int32_t kEos = 1;
constexpr int32_t kEot = 106;
const std::vector<int32_t> kEogIds = {kEos, kEot};

SamplingParams Params(int32_t max_tokens, std::vector<std::string> stop = {},
                      std::vector<int32_t> stop_token_ids = {}, bool ignore_eos = false) {
  SamplingParams p;
  p.max_tokens = max_tokens;
  p.stop = std::move(stop);
  p.stop_token_ids = std::move(stop_token_ids);
  p.ignore_eos = ignore_eos;
  return p;
}

// Appends (token, text) pairs until one finishes the sequence, then calls Finish(tail).
struct Outcome {
  std::string text;
  FinishReason reason;
  int32_t tokens;
};
Outcome RunSequence(FinishChecker& checker,
                    const std::vector<std::pair<int32_t, std::string>>& steps,
                    const std::string& tail = "", FinishReason reason = FinishReason::kCancelled) {
  Outcome out{"", reason, 0};
  for (const auto& [token, text] : steps) {
    const FinishChecker::Step step = checker.Append(token, text);
    out.text += step.text;
    if (step.finish_reason) break;
  }
  const FinishChecker::Step last = checker.Finish(tail, reason);
  out.text += last.text;
  out.reason = *last.finish_reason;
  out.tokens = checker.num_tokens();
  return out;
}

TEST(FinishChecker, EosStopsWithoutEmittingItsTextButReleasesHeldText) {
  FinishChecker checker(Params(100, {"</answer>"}), kEogIds);
  FinishChecker::Step step = checker.Append(5, "42 <");  // "<" could begin the stop string
  EXPECT_EQ(step.text, "42 ");
  EXPECT_FALSE(step.finish_reason);
  step = checker.Append(kEot, "<end_of_turn>");  // rendered special text: never emitted
  EXPECT_EQ(step.text, "");
  EXPECT_EQ(step.finish_reason, FinishReason::kStop);
  EXPECT_TRUE(checker.finished());
  EXPECT_EQ(checker.stop_token(), kEot);
  const FinishChecker::Step last = checker.Finish("", FinishReason::kLength);
  EXPECT_EQ(last.text, "<");
  EXPECT_EQ(last.finish_reason, FinishReason::kStop);  // Append's reason stands
  EXPECT_EQ(checker.num_tokens(), 2);
}

TEST(FinishChecker, IgnoreEosTreatsEosAsTextButStopTokenIdsStillStop) {
  FinishChecker checker(Params(100, {}, {42}, /*ignore_eos=*/true), kEogIds);
  const Outcome out =
      RunSequence(checker, {{5, "a"}, {kEos, ""}, {kEot, "b"}, {42, "!"}, {6, "c"}});
  EXPECT_EQ(out.text, "ab");
  EXPECT_EQ(out.reason, FinishReason::kStop);
  EXPECT_EQ(out.tokens, 4);
  EXPECT_EQ(checker.stop_token(), 42);
  EXPECT_FALSE(checker.stop_string_index());
}

TEST(FinishChecker, StopStringTruncatesTheText) {
  FinishChecker checker(Params(100, {"\n\n", "Q:"}), kEogIds);
  const Outcome out = RunSequence(checker, {{5, "A: yes"}, {6, ".\n"}, {7, "\nQ: why"}, {8, "?"}});
  EXPECT_EQ(out.text, "A: yes.");
  EXPECT_EQ(out.reason, FinishReason::kStop);
  EXPECT_EQ(out.tokens, 3);
  EXPECT_EQ(checker.stop_string_index(), 0);
  EXPECT_FALSE(checker.stop_token());
}

TEST(FinishChecker, MaxTokensGivesLengthAndEmitsTheLastTokensText) {
  FinishChecker checker(Params(3, {"xyz"}), kEogIds);
  EXPECT_FALSE(checker.Append(5, "a").finish_reason);
  EXPECT_FALSE(checker.Append(6, "b").finish_reason);
  const FinishChecker::Step step = checker.Append(7, "cx");  // "x" held: could begin "xyz"
  EXPECT_EQ(step.text, "c");
  EXPECT_EQ(step.finish_reason, FinishReason::kLength);
  const FinishChecker::Step last = checker.Finish("", FinishReason::kCancelled);
  EXPECT_EQ(last.text, "x");
  EXPECT_EQ(last.finish_reason, FinishReason::kLength);
}

TEST(FinishChecker, StopConditionsOnTheLastAllowedTokenWinOverLength) {
  {
    FinishChecker checker(Params(2), kEogIds);
    EXPECT_EQ(RunSequence(checker, {{5, "a"}, {kEos, ""}}).reason, FinishReason::kStop);
  }
  {
    FinishChecker checker(Params(2, {"ab"}), kEogIds);
    const Outcome out = RunSequence(checker, {{5, "a"}, {6, "b"}});
    EXPECT_EQ(out.reason, FinishReason::kStop);
    EXPECT_EQ(out.text, "");
  }
  {
    FinishChecker checker(Params(1), kEogIds);
    EXPECT_EQ(RunSequence(checker, {{5, "a"}, {6, "b"}}).reason, FinishReason::kLength);
  }
}

TEST(FinishChecker, TailCanCompleteAStopStringAndTurnLengthIntoStop) {
  // The detokenizer's flush (an unfinished character as U+FFFD) completes "a\uFFFD".
  FinishChecker checker(Params(1, {"a\xEF\xBF\xBD"}), kEogIds);
  const FinishChecker::Step step = checker.Append(5, "xa");
  EXPECT_EQ(step.text, "x");
  EXPECT_EQ(step.finish_reason, FinishReason::kLength);
  const FinishChecker::Step last = checker.Finish("\xEF\xBF\xBD", FinishReason::kLength);
  EXPECT_EQ(last.text, "");
  EXPECT_EQ(last.finish_reason, FinishReason::kStop);
  EXPECT_EQ(checker.stop_string_index(), 0);
}

TEST(FinishChecker, EngineEndedSequencesTakeTheGivenReasonAndFlush) {
  FinishChecker checker(Params(100, {"STOP"}), kEogIds);
  EXPECT_EQ(checker.Append(5, "go ST").text, "go ");
  const FinishChecker::Step last = checker.Finish("", FinishReason::kCancelled);
  EXPECT_EQ(last.text, "ST");
  EXPECT_EQ(last.finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(checker.finish_reason(), FinishReason::kCancelled);
}

TEST(FinishReason, NamesUseTheOpenAiSpelling) {
  EXPECT_EQ(FinishReasonName(FinishReason::kStop), "stop");
  EXPECT_EQ(FinishReasonName(FinishReason::kLength), "length");
  EXPECT_EQ(FinishReasonName(FinishReason::kCancelled), "cancelled");
  EXPECT_EQ(FinishReasonName(FinishReason::kError), "error");
}

}  // namespace
}  // namespace strata::sampling
