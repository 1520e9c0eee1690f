#include "strata/common/logging.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

TEST(LogFormatTest, ParsesBothNames) {
  EXPECT_EQ(*ParseLogFormat("text"), LogFormat::kText);
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  StatusOr<LogFormat> bad = ParseLogFormat("yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("text or json"), std::string::npos);
}

TEST(FormatLogLineTest, TextPutsFieldsAfterTheMessage) {
  EXPECT_EQ(FormatLogLine(LogFormat::kText, "request finished",
                          {{"request_id", "abc"}, {"tokens", "12"}}),
            "request finished request_id=abc tokens=12");
}

TEST(FormatLogLineTest, TextQuotesValuesWithSpacesQuotesOrNothing) {
  EXPECT_EQ(FormatLogLine(LogFormat::kText, "m", {{"a", "two words"}, {"b", ""}, {"c", "x\"y"}}),
            "m a=\"two words\" b=\"\" c=\"x\\\"y\"");
}

TEST(FormatLogLineTest, JsonEscapesEveryString) {
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, "line\nbreak \"q\"", {{"id", "a\\b\x01"}}),
            "\"msg\":\"line\\nbreak \\\"q\\\"\",\"id\":\"a\\\\b\\u0001\"");
}

TEST(FormatLogLineTest, JsonWithoutFieldsIsTheMessageAlone) {
  EXPECT_EQ(FormatLogLine(LogFormat::kJson, "ready", {}), "\"msg\":\"ready\"");
}

}  // namespace
}  // namespace strata
