#include "strata/server/serving_state.h"

#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>
#include <thread>

#include "strata/metrics/server_metrics.h"
#include "support/tiny_llama.h"

namespace strata::server {
namespace {

class ServingStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_.tokenizer = testing::tiny_llama::MakeTokenizer();
    ASSERT_NE(model_.tokenizer, nullptr);
    model_.translator =
        std::make_unique<RequestTranslator>(model_.tokenizer.get(), nullptr, TranslatorLimits{});
  }

  // The thread `done` ran on, and what it was given.
  std::pair<std::thread::id, StatusOr<TranslatedRequest>> TranslateThen(const std::string& text) {
    GenerationInput input;
    input.kind = GenerationInput::Kind::kText;
    input.text = text;
    std::promise<std::pair<std::thread::id, StatusOr<TranslatedRequest>>> result;
    state_.TranslateThen(model_, input, [&result](StatusOr<TranslatedRequest> translated) {
      result.set_value({std::this_thread::get_id(), std::move(translated)});
    });
    return result.get_future().get();
  }

  metrics::ServerMetrics metrics_{metrics::BuildInfo{}};
  ServingState state_{&metrics_, /*log_prompts=*/false};
  ServingModel model_;
};

TEST_F(ServingStateTest, ASmallInputIsTranslatedOnTheCallersThreadALargeOneOnAWorker) {
  auto [small_thread, small] = TranslateThen("bakado");
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ(small_thread, std::this_thread::get_id());

  const std::string large(ServingState::kBackgroundInputBytes, 'a');
  auto [large_thread, translated] = TranslateThen(large);
  ASSERT_TRUE(translated.ok()) << translated.status().ToString();
  EXPECT_NE(large_thread, std::this_thread::get_id());
  EXPECT_EQ(translated->request.prompt,
            model_.tokenizer->Encode(large, {/*add_special=*/true, /*parse_special=*/false}));

  GenerationInput input;
  input.kind = GenerationInput::Kind::kText;
  input.text = large + "\xFF";  // errors come back the same way
  StatusOr<TranslatedRequest> bad = state_.TranslateWaiting(model_, input);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata::server
