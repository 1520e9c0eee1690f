#include "bench/load/sse_parser.h"

#include <gtest/gtest.h>

namespace strata::bench {
namespace {

std::vector<std::string> ParseAll(std::string_view text) {
  SseParser p;
  std::vector<std::string> events;
  EXPECT_TRUE(p.Feed(text, &events).ok());
  return events;
}

TEST(SseParser, SplitsEventsOnBlankLines) {
  EXPECT_EQ(ParseAll("data: {\"a\":1}\n\ndata: [DONE]\n\n"),
            (std::vector<std::string>{"{\"a\":1}", "[DONE]"}));
}

TEST(SseParser, HandlesCrLfCrAndMultiLineData) {
  EXPECT_EQ(ParseAll("data: a\r\ndata:b\r\n\r\ndata: c\r\rdata: d\n\n"),
            (std::vector<std::string>{"a\nb", "c", "d"}));
}

TEST(SseParser, IgnoresCommentsOtherFieldsAndEventsWithoutData) {
  EXPECT_EQ(ParseAll(": keep-alive\n\nevent: ping\nid: 3\nretry: 10\n\ndata: x\n\n"),
            (std::vector<std::string>{"x"}));
}

TEST(SseParser, DropsAnUnfinishedEventAtTheEnd) {
  EXPECT_EQ(ParseAll("data: done\n\ndata: cut"), (std::vector<std::string>{"done"}));
}

TEST(SseParser, GivesTheSameEventsWhateverTheSplit) {
  // CRLF split between its CR and LF must not make an extra blank line.
  const std::string text = "data: one\r\n\r\ndata: two\r\n: c\r\n\r\ndata: [DONE]\r\n\r\n";
  const std::vector<std::string> expected = {"one", "two", "[DONE]"};
  for (size_t split = 0; split <= text.size(); ++split) {
    SseParser p;
    std::vector<std::string> events;
    ASSERT_TRUE(p.Feed(std::string_view(text).substr(0, split), &events).ok());
    ASSERT_TRUE(p.Feed(std::string_view(text).substr(split), &events).ok());
    EXPECT_EQ(events, expected) << "split at " << split;
  }
  SseParser p;
  std::vector<std::string> events;
  for (char c : text) ASSERT_TRUE(p.Feed(std::string_view(&c, 1), &events).ok());
  EXPECT_EQ(events, expected);
}

}  // namespace
}  // namespace strata::bench
