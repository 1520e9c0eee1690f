#include "strata/server/request_parse.h"

#include <gtest/gtest.h>

#include <string>

#include "strata/v1/generation.pb.h"

namespace strata::server {
namespace {

std::string Why(const std::string& bytes) {
  return DescribeUnparsable(*v1::GenerateRequest::descriptor(), bytes);
}

TEST(DescribeUnparsable, NamesTheFieldThatIsNotUtf8ByItsPath) {
  v1::GenerateRequest request;
  request.mutable_sampling()->set_max_tokens(3);
  auto* chat = request.mutable_chat();
  chat->add_messages()->set_content("hello");
  chat->add_messages()->set_content("hey");
  std::string bytes = request.SerializeAsString();
  bytes.replace(bytes.find("hey"), 3, "he\xC3");
  EXPECT_EQ(Why(bytes),
            "field 'chat.messages[1].content' is not valid UTF-8 (invalid byte sequence at "
            "offset 2)");
  v1::GenerateRequest parsed;
  EXPECT_FALSE(parsed.ParseFromString(bytes));  // what protobuf refuses, this explains
}

TEST(DescribeUnparsable, NamesTruncatedAndMistypedFieldsAndNeverFails) {
  v1::GenerateRequest request;
  request.set_prompt("abcdef");
  const std::string bytes = request.SerializeAsString();
  EXPECT_EQ(Why(bytes.substr(0, bytes.size() - 2)), "field 'prompt' is truncated");
  // Field 1 (prompt) sent as a varint.
  EXPECT_EQ(Why(std::string("\x08\x05", 2)), "field 'prompt' has wire type 0, expected 2");
  EXPECT_EQ(Why(std::string("\x00\x01", 2)), "a malformed field tag at byte 0");
  EXPECT_EQ(Why(bytes), "the bytes are not a valid message of this type");  // nothing wrong
  // Unknown fields are skipped; any garbage is described.
  EXPECT_EQ(Why(std::string("\xF8\x07\x01", 3)), "the bytes are not a valid message of this type");
  for (int c = 0; c < 256; ++c) EXPECT_FALSE(Why(std::string(7, static_cast<char>(c))).empty());
}

TEST(RefusalOf, AMarkedRequestCarriesItsRefusalAndOthersNone) {
  v1::GenerateRequest request;
  request.set_prompt("hello");
  EXPECT_TRUE(internal::RefusalOf(request).ok());
  internal::MarkRefused(&request, "the request does not parse: why");
  EXPECT_FALSE(request.has_prompt());
  const Status refused = internal::RefusalOf(request);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(), "the request does not parse: why");
}

}  // namespace
}  // namespace strata::server
