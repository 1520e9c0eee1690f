#include "bench/load/http_response_parser.h"

#include <gtest/gtest.h>

#include "unit/bench_load/http_stream_fixture.h"

namespace strata::bench {
namespace {

TEST(HttpResponseParser, ReadsChunkedResponseWhateverTheSplit) {
  const std::string response = testing::LlamaServerResponse();
  std::string expected;
  for (const std::string& e : testing::LlamaServerEvents()) expected += "data: " + e + "\n\n";
  expected += "data: [DONE]\n\n";
  for (size_t split = 0; split <= response.size(); ++split) {
    HttpResponseParser p;
    std::string body;
    ASSERT_TRUE(p.Feed(std::string_view(response).substr(0, split), &body).ok()) << split;
    ASSERT_TRUE(p.Feed(std::string_view(response).substr(split), &body).ok()) << split;
    ASSERT_TRUE(p.done()) << split;
    EXPECT_EQ(p.status_code(), 200);
    EXPECT_EQ(p.Header("content-type").value_or(""), "text/event-stream");
    EXPECT_EQ(body, expected) << "split at " << split;
    EXPECT_TRUE(p.FinishOnClose().ok());
  }
}

TEST(HttpResponseParser, ReadsContentLengthBody) {
  HttpResponseParser p;
  std::string body;
  ASSERT_TRUE(
      p.Feed("HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\n\r\nabcdeIGNORED", &body).ok());
  EXPECT_TRUE(p.done());
  EXPECT_EQ(p.status_code(), 404);
  EXPECT_EQ(body, "abcde");
}

TEST(HttpResponseParser, BodyWithoutLengthEndsAtClose) {
  HttpResponseParser p;
  std::string body;
  ASSERT_TRUE(p.Feed("HTTP/1.0 200 OK\r\n\r\npart1 ", &body).ok());
  ASSERT_TRUE(p.Feed("part2", &body).ok());
  EXPECT_FALSE(p.done());
  EXPECT_TRUE(p.FinishOnClose().ok());
  EXPECT_EQ(body, "part1 part2");
}

TEST(HttpResponseParser, CutShortResponsesAreErrorsOnClose) {
  for (const std::string& partial : std::vector<std::string>{
           "HTTP/1.1 200 OK\r\nContent-Le", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"}) {
    HttpResponseParser p;
    std::string body;
    ASSERT_TRUE(p.Feed(partial, &body).ok());
    EXPECT_EQ(p.FinishOnClose().code(), StatusCode::kDataLoss) << partial;
  }
}

TEST(HttpResponseParser, RejectsMalformedHeads) {
  for (const std::string bad :
       {"SMTP ready\r\n\r\n", "HTTP/1.1 2x0 OK\r\n\r\n", "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: many\r\n\r\n"}) {
    HttpResponseParser p;
    std::string body;
    EXPECT_EQ(p.Feed(bad, &body).code(), StatusCode::kDataLoss) << bad;
  }
  HttpResponseParser p;
  std::string body;
  EXPECT_EQ(p.Feed(std::string(70000, 'x'), &body).code(), StatusCode::kDataLoss);
}

TEST(HttpResponseParser, MalformedChunkedBodyIsAnError) {
  HttpResponseParser p;
  std::string body;
  EXPECT_EQ(
      p.Feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nnot-hex\r\n", &body).code(),
      StatusCode::kDataLoss);
}

}  // namespace
}  // namespace strata::bench
