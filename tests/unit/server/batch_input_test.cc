#include "strata/server/http/batch_input.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace strata::server::http {
namespace {

using nlohmann::json;

// Accepts a body unless it has "bad": true.
Status Check(std::string_view /*endpoint*/, std::string_view body) {
  return json::parse(body).value("bad", false) ? InvalidArgumentError("max_tokens is wrong")
                                               : OkStatus();
}

std::string Line(const std::string& id, const std::string& url = "/v1/chat/completions",
                 const std::string& body = R"({"model": "m"})") {
  return R"({"custom_id": ")" + id + R"(", "method": "POST", "url": ")" + url + R"(", "body": )" +
         body + "}\n";
}

TEST(ParseBatchInput, KeepsGoodLinesInOrderAndReportsEachBadOne) {
  const std::string file = Line("a") + "\n" + "not json\n" + Line("b", "/v1/completions") +
                           Line("a") + R"({"custom_id": "c", "method": "GET"})" + "\n" +
                           Line("d", "/v1/chat/completions", R"({"bad": true})") + "[1, 2]\n" +
                           Line("e") + R"({"method": "POST"})" + "\r\n";
  StatusOr<BatchInput> input = ParseBatchInput(file, "/v1/chat/completions", Check);
  ASSERT_TRUE(input.ok()) << input.status().ToString();
  ASSERT_EQ(input->lines.size(), 2u);
  EXPECT_EQ(input->lines[0].custom_id, "a");
  EXPECT_EQ(input->lines[0].index, 0);
  EXPECT_EQ(json::parse(input->lines[0].body), json::parse(R"({"model": "m"})"));
  EXPECT_EQ(input->lines[1].custom_id, "e");
  EXPECT_EQ(input->lines[1].index, 7);

  struct Want {
    int64_t index;
    json custom_id;
    std::string message;
  };
  const Want want[] = {
      {1, nullptr, "line 3: not valid JSON"},
      {2, "b", "line 4: url must be the batch's endpoint"},
      {3, "a", "line 5: custom_id 'a' is used by an earlier line"},
      {4, "c", "line 6: method must be \"POST\""},
      {5, "d", "line 7: max_tokens is wrong"},
      {6, nullptr, "line 8: must be a JSON object, got an array"},
      {8, nullptr, "line 10: custom_id must be a non-empty string"},
  };
  ASSERT_EQ(input->invalid.size(), std::size(want));
  for (size_t i = 0; i < std::size(want); ++i) {
    const jobs::LineResult& r = input->invalid[i];
    EXPECT_EQ(r.index, want[i].index);
    EXPECT_FALSE(r.ok);
    const json line = json::parse(r.json);
    EXPECT_EQ(line["custom_id"], want[i].custom_id) << r.json;
    EXPECT_TRUE(line["response"].is_null());
    EXPECT_EQ(line["error"]["code"], "invalid_request");
    EXPECT_NE(line["error"]["message"].get<std::string>().find(want[i].message), std::string::npos)
        << r.json;
    EXPECT_EQ(line["id"].get<std::string>().rfind("batch_req_", 0), 0u);
  }
}

TEST(ParseBatchInput, RefusesAFileWithoutRequestsOrOverItsLimits) {
  EXPECT_EQ(ParseBatchInput("", "/v1/completions", Check).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseBatchInput("\n  \n", "/v1/completions", Check).status().code(),
            StatusCode::kInvalidArgument);
  BatchInputLimits limits;
  limits.max_lines = 2;
  const std::string three = Line("a") + Line("b") + Line("c");
  StatusOr<BatchInput> over = ParseBatchInput(three, "/v1/chat/completions", Check, limits);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("more than 2 request lines"), std::string::npos);
  limits.max_lines = 10;
  limits.max_line_bytes = 20;
  StatusOr<BatchInput> long_line = ParseBatchInput(three, "/v1/chat/completions", Check, limits);
  ASSERT_FALSE(long_line.ok());
  EXPECT_NE(long_line.status().message().find("line 1 is longer than 20 bytes"), std::string::npos);
}

TEST(BatchResultLine, HasOpenAisShape) {
  const json ok = json::parse(BatchResultLine("r1", 200, "chatcmpl-7", R"({"x": 1})", "", ""));
  EXPECT_EQ(ok["custom_id"], "r1");
  EXPECT_EQ(ok["response"]["status_code"], 200);
  EXPECT_EQ(ok["response"]["request_id"], "chatcmpl-7");
  EXPECT_EQ(ok["response"]["body"]["x"], 1);
  EXPECT_TRUE(ok["error"].is_null());
  const json failed = json::parse(BatchResultLine("", 0, "", "", "invalid_request", "no"));
  EXPECT_TRUE(failed["custom_id"].is_null());
  EXPECT_TRUE(failed["response"].is_null());
  EXPECT_EQ(failed["error"]["message"], "no");
}

}  // namespace
}  // namespace strata::server::http
