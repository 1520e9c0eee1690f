// OutputProcessor: several tokens per call keep everything up to the one that finishes the
// request, and the text and penalty window follow exactly the tokens kept.
#include "strata/engine/output_processor.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/tiny_llama.h"

namespace strata::engine {
namespace {

using sampling::FinishReason;

class OutputProcessorTest : public ::testing::Test {
 protected:
  void SetUp() override { tokenizer_ = testing::tiny_llama::MakeTokenizer(/*eos_id=*/2); }
  // The id of a two-letter piece ("ba" is 3, "be" 4, ...).
  int32_t Id(const std::string& piece) const {
    const std::vector<std::string> pieces = testing::tiny_llama::Pieces();
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (pieces[i] == piece) return static_cast<int32_t>(i + 3);
    }
    ADD_FAILURE() << piece;
    return 0;
  }
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  const std::vector<int32_t> eog_ = {2};
};

TEST_F(OutputProcessorTest, ARunStopsAtTheEndOfGenerationTokenAndDropsWhatFollows) {
  sampling::SamplingParams p;
  p.max_tokens = 10;
  OutputProcessor out(p, *tokenizer_, eog_);
  const std::vector<int32_t> run = {Id("ba"), Id("be"), 2, Id("bi")};
  OutputProcessor::Output o = out.Append(run, {}, nullptr);
  EXPECT_EQ(o.token_ids, (std::vector<int32_t>{Id("ba"), Id("be"), 2}));
  EXPECT_EQ(o.text, "babe");
  ASSERT_TRUE(o.finish_reason.has_value());
  EXPECT_EQ(*o.finish_reason, FinishReason::kStop);
  EXPECT_TRUE(out.finished());
}

TEST_F(OutputProcessorTest, MaxTokensCutsARunAndOnlyKeptTokensEnterThePenaltyWindow) {
  sampling::SamplingParams p;
  p.max_tokens = 2;
  p.repetition_penalty = 1.5f;
  sampling::Sampler sampler(p, {});
  OutputProcessor out(p, *tokenizer_, eog_);
  const std::vector<int32_t> run = {Id("da"), Id("de"), Id("di")};
  OutputProcessor::Output o = out.Append(run, {}, &sampler);
  EXPECT_EQ(o.token_ids, (std::vector<int32_t>{Id("da"), Id("de")}));
  ASSERT_TRUE(o.finish_reason.has_value());
  EXPECT_EQ(*o.finish_reason, FinishReason::kLength);
  EXPECT_EQ(sampler.penalty_window().size(), 2u);
}

TEST_F(OutputProcessorTest, AStopStringAcrossTokensOfOneRunHoldsItsTextBack) {
  sampling::SamplingParams p;
  p.max_tokens = 10;
  p.stop = {"abe"};
  OutputProcessor out(p, *tokenizer_, eog_);
  OutputProcessor::Output first = out.Append(std::vector<int32_t>{Id("ka")}, {}, nullptr);
  EXPECT_FALSE(first.finish_reason.has_value());
  OutputProcessor::Output o =
      out.Append(std::vector<int32_t>{Id("ba"), Id("be"), Id("bo")}, {}, nullptr);
  // "ka" + "ba" + "be" = "kababe": the stop string "abe" ends at "be"; "bo" is dropped.
  EXPECT_EQ(o.token_ids, (std::vector<int32_t>{Id("ba"), Id("be")}));
  EXPECT_EQ(first.text + o.text, "kab");
  ASSERT_TRUE(o.finish_reason.has_value());
  EXPECT_EQ(*o.finish_reason, FinishReason::kStop);
}

TEST_F(OutputProcessorTest, FinishReleasesHeldTextWithTheEnginesReason) {
  sampling::SamplingParams p;
  p.max_tokens = 10;
  p.stop = {"bax"};  // "ba" may begin it: held back
  OutputProcessor out(p, *tokenizer_, eog_);
  OutputProcessor::Output o = out.Append(std::vector<int32_t>{Id("ba")}, {}, nullptr);
  EXPECT_EQ(o.text, "");
  OutputProcessor::Output last = out.Finish(FinishReason::kCancelled);
  EXPECT_EQ(last.text, "ba");
  EXPECT_EQ(last.finish_reason, FinishReason::kCancelled);
  EXPECT_TRUE(out.finished());
}

}  // namespace
}  // namespace strata::engine
