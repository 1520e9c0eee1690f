#include "bench/load/chunked_decoder.h"

#include <gtest/gtest.h>

#include "unit/bench_load/http_stream_fixture.h"

namespace strata::bench {
namespace {

TEST(ChunkedDecoder, DecodesChunksWithExtensionsAndTrailers) {
  ChunkedDecoder d;
  std::string out;
  ASSERT_TRUE(
      d.Feed("5;name=x\r\nhello\r\nA\r\n, chunked!\r\n0\r\nX-Trailer: 1\r\n\r\nextra", &out).ok());
  EXPECT_EQ(out, "hello, chunked!");
  EXPECT_TRUE(d.done());
}

TEST(ChunkedDecoder, GivesTheSameBytesWhateverTheSplit) {
  const std::vector<std::string> pieces = {"data: a\n\n", std::string(300, 'x'), "\r\n", "z"};
  const std::string encoded = testing::Chunked(pieces);
  const std::string expected = pieces[0] + pieces[1] + pieces[2] + pieces[3];
  for (size_t split = 0; split <= encoded.size(); ++split) {
    ChunkedDecoder d;
    std::string out;
    ASSERT_TRUE(d.Feed(std::string_view(encoded).substr(0, split), &out).ok()) << split;
    ASSERT_TRUE(d.Feed(std::string_view(encoded).substr(split), &out).ok()) << split;
    EXPECT_EQ(out, expected) << "split at " << split;
    EXPECT_TRUE(d.done()) << split;
  }
  // Byte by byte.
  ChunkedDecoder d;
  std::string out;
  for (char c : encoded) ASSERT_TRUE(d.Feed(std::string_view(&c, 1), &out).ok());
  EXPECT_EQ(out, expected);
  EXPECT_TRUE(d.done());
}

TEST(ChunkedDecoder, AcceptsBareLineFeeds) {
  ChunkedDecoder d;
  std::string out;
  ASSERT_TRUE(d.Feed("3\nabc\n0\n\n", &out).ok());
  EXPECT_EQ(out, "abc");
  EXPECT_TRUE(d.done());
}

TEST(ChunkedDecoder, RejectsMalformedFraming) {
  for (const std::string& bad :
       std::vector<std::string>{"zz\r\nab\r\n", "3\r\nabcX\r\n", "\r\n", "-1\r\n",
                                "ffffffffffffffffffff\r\n", std::string(5000, '1')}) {
    ChunkedDecoder d;
    std::string out;
    const Status s = d.Feed(bad, &out);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << bad.substr(0, 40);
    EXPECT_FALSE(d.done());
    // Stays failed.
    EXPECT_FALSE(d.Feed("0\r\n\r\n", &out).ok());
  }
}

TEST(ChunkedDecoder, IsNotDoneBeforeTheLastChunk) {
  ChunkedDecoder d;
  std::string out;
  ASSERT_TRUE(d.Feed("3\r\nabc\r\n0\r\n", &out).ok());
  EXPECT_FALSE(d.done());  // the trailer section's blank line is missing
}

}  // namespace
}  // namespace strata::bench
