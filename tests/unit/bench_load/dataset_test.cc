#include "bench/load/dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace strata::bench {
namespace {

TEST(Dataset, ParsesTextAndTokenIdEntriesSkippingBlankLines) {
  const auto entries = ParseDataset(
      "{\"prompt\": \"Hello\", \"output_tokens\": 8}\n"
      "\n"
      "{\"prompt_token_ids\": [1, 2, 3], \"source\": \"ignored\"}\r\n",
      /*default_output_tokens=*/64);
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_TRUE((*entries)[0].has_text);
  EXPECT_EQ((*entries)[0].prompt_text, "Hello");
  EXPECT_EQ((*entries)[0].output_tokens, 8);
  EXPECT_FALSE((*entries)[1].has_text);
  EXPECT_EQ((*entries)[1].prompt_token_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ((*entries)[1].output_tokens, 64);
}

TEST(Dataset, MalformedLinesAreErrorsNamingTheLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"prompt\": \"a\"}\n{\"prompt\": \"b\"", "line 2"},
      {"[1, 2]", "line 1"},
      {"{\"output_tokens\": 3}", "exactly one"},
      {"{\"prompt\": \"a\", \"prompt_token_ids\": [1]}", "exactly one"},
      {"{\"prompt\": 5}", "must be a string"},
      {"{\"prompt_token_ids\": []}", "non-empty"},
      {"{\"prompt_token_ids\": [1, -2]}", "integers"},
      {"{\"prompt_token_ids\": [1.5]}", "integers"},
      {"{\"prompt_token_ids\": [\"1\"]}", "integers"},
      {"{\"prompt\": \"a\", \"output_tokens\": 0}", "output_tokens"},
      {"{\"prompt\": \"a\", \"output_tokens\": 2.5}", "output_tokens"},
      {"\n  \n", "no entries"},
  };
  for (const auto& [text, needle] : cases) {
    const auto entries = ParseDataset(text, 16);
    ASSERT_FALSE(entries.ok()) << text;
    EXPECT_EQ(entries.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(entries.status().message().find(needle), std::string::npos)
        << text << " -> " << entries.status().message();
  }
}

TEST(Dataset, LoadsAFileAndReportsAMissingOne) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("bench-dataset-" + std::to_string(getpid()));
  {
    std::ofstream out(path);
    out << "{\"prompt_token_ids\": [7], \"output_tokens\": 2}\n";
  }
  const auto entries = LoadDataset(path.string(), 16);
  ASSERT_TRUE(entries.ok());
  EXPECT_EQ(entries->size(), 1u);
  std::filesystem::remove(path);
  EXPECT_EQ(LoadDataset(path.string(), 16).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace strata::bench
