// POST /v1/embeddings without a server: the request parser, the response body (float and
// base64), and AnswerEmbeddings's status codes over a fake embedder.
#include "strata/server/http/openai_embeddings.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace strata::server::http {
namespace {

using nlohmann::json;

EmbeddingsRequest Parse(const std::string& body) {
  EmbeddingsRequest r;
  ApiError err;
  EXPECT_TRUE(ParseEmbeddingsRequest(body, &r, &err)) << body << ": " << err.message;
  return r;
}

ApiError Refused(const std::string& body) {
  EmbeddingsRequest r;
  ApiError err;
  EXPECT_FALSE(ParseEmbeddingsRequest(body, &r, &err)) << body;
  EXPECT_EQ(err.http_status, 400) << body;
  return err;
}

TEST(EmbeddingsRequest, InputIsAStringOrAnArrayOfStrings) {
  EmbeddingsRequest r = Parse(R"({"model": "m", "input": "hello"})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.input, (std::vector<std::string>{"hello"}));
  EXPECT_FALSE(r.base64);
  EXPECT_FALSE(r.dimensions.has_value());
  r = Parse(R"({"model": "m", "input": ["a", "", "c"], "encoding_format": "base64",
                "dimensions": 384, "user": "u", "unknown": {"is": "ignored"}})");
  EXPECT_EQ(r.input, (std::vector<std::string>{"a", "", "c"}));
  EXPECT_TRUE(r.base64);
  EXPECT_EQ(r.dimensions, 384);
  EXPECT_EQ(r.user, "u");
  EXPECT_FALSE(Parse(R"({"model": "m", "input": "x", "encoding_format": "float"})").base64);
  EXPECT_FALSE(Parse(R"({"model": "m", "input": "x", "encoding_format": null})").base64);

  std::string many = R"({"model": "m", "input": [)";
  for (int i = 0; i < 2048; ++i) many += i == 0 ? "\"t\"" : ",\"t\"";
  EXPECT_EQ(Parse(many + "]}").input.size(), 2048u);
  const ApiError too_many = Refused(many + R"(,"t"]})");
  EXPECT_EQ(too_many.param, "input");
  EXPECT_NE(too_many.message.find("at most 2048"), std::string::npos) << too_many.message;
}

TEST(EmbeddingsRequest, TokenIdsAndBadInputsAreRefusedNamingTheField) {
  for (const char* body :
       {R"({"model": "m", "input": [1, 2, 3]})", R"({"model": "m", "input": [[1, 2], [3]]})"}) {
    const ApiError e = Refused(body);
    EXPECT_EQ(e.param, "input");
    EXPECT_NE(e.message.find("token ids"), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("tokenizer"), std::string::npos) << e.message;
  }
  EXPECT_NE(Refused(R"({"model": "m", "input": []})").message.find("empty"), std::string::npos);
  EXPECT_EQ(Refused(R"({"model": "m"})").param, "input");
  EXPECT_EQ(Refused(R"({"model": "m", "input": 5})").param, "input");
  EXPECT_EQ(Refused(R"({"model": "m", "input": ["a", null]})").message,
            "input[1] must be a string, got null");
  EXPECT_EQ(Refused(R"({"input": "x"})").param, "model");
  EXPECT_EQ(Refused(R"({"model": 3, "input": "x"})").param, "model");
  EXPECT_EQ(Refused(R"({"model": "m", "input": "x", "encoding_format": "int8"})").param,
            "encoding_format");
  EXPECT_EQ(Refused(R"({"model": "m", "input": "x", "dimensions": "384"})").param, "dimensions");
  EXPECT_EQ(Refused(R"({"model": "m", "input": "x", "user": 1})").param, "user");
  EXPECT_EQ(Refused("not json").param, "");
  EXPECT_EQ(Refused("[1]").param, "");
}

TEST(EmbeddingsBody, Base64IsLittleEndianFloat32) {
  const std::vector<float> one = {1.0f};  // 00 00 80 3f
  EXPECT_EQ(Base64Floats(one), "AACAPw==");
  const std::vector<float> two = {1.0f, 2.0f};  // 00 00 80 3f 00 00 00 40
  EXPECT_EQ(Base64Floats(two), "AACAPwAAAEA=");
  const std::vector<float> three = {1.0f, 2.0f, -0.5f};  // ... 00 00 00 bf: 12 bytes, no padding
  EXPECT_EQ(Base64Floats(three), "AACAPwAAAEAAAAC/");
  EXPECT_EQ(Base64Floats({}), "");
}

TEST(EmbeddingsBody, IsOpenAisListWithFloatsThatReadBackExactly) {
  embedding::Embeddings e;
  e.vectors = {{0.1f, -0.25f, 1e-8f}, {0.333333343f, 0.0f, -1.0f}};
  e.tokens = 9;
  const json body = json::parse(EmbeddingsBody(e, "mini\"lm", /*base64=*/false));
  EXPECT_EQ(body["object"], "list");
  EXPECT_EQ(body["model"], "mini\"lm");
  EXPECT_EQ(body["usage"]["prompt_tokens"], 9);
  EXPECT_EQ(body["usage"]["total_tokens"], 9);
  ASSERT_EQ(body["data"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const json& d = body["data"][i];
    EXPECT_EQ(d["object"], "embedding");
    EXPECT_EQ(d["index"], i);
    ASSERT_EQ(d["embedding"].size(), 3u);
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(static_cast<float>(d["embedding"][k].get<double>()), e.vectors[i][k]);
    }
  }
  const json b64 = json::parse(EmbeddingsBody(e, "m", /*base64=*/true));
  EXPECT_EQ(b64["data"][1]["embedding"], Base64Floats(e.vectors[1]));
}

// Returns fixed vectors, or the status it is told to fail with.
class FakeEmbedder : public embedding::TextEmbedder {
 public:
  StatusOr<embedding::Embeddings> Embed(std::span<const std::string> texts) override {
    if (!fail.ok()) return fail;
    embedding::Embeddings e;
    for (size_t i = 0; i < texts.size(); ++i) {
      e.vectors.push_back({static_cast<float>(i), 0.5f});
      e.tokens += 3;
    }
    return e;
  }
  int dimension() const override { return 2; }
  int max_tokens() const override { return 256; }
  std::string_view model_name() const override { return "mini"; }
  Status fail;
};

TEST(AnswerEmbeddings, AnswersAndRefusesInOpenAisShape) {
  FakeEmbedder fake;
  metrics::ServerMetrics metrics(metrics::BuildInfo{});
  const std::string ok_body = R"({"model": "mini", "input": ["a", "b"]})";

  EmbeddingsReply r = AnswerEmbeddings(ok_body, &fake, OkStatus(), &metrics);
  ASSERT_EQ(r.http_status, 200) << r.body;
  json body = json::parse(r.body);
  EXPECT_EQ(body["model"], "mini");
  EXPECT_EQ(body["usage"]["prompt_tokens"], 6);
  EXPECT_EQ(body["data"][1]["embedding"], json({1.0, 0.5}));

  auto error_of = [](const EmbeddingsReply& reply) { return json::parse(reply.body)["error"]; };
  r = AnswerEmbeddings(ok_body, nullptr, OkStatus(), &metrics);
  EXPECT_EQ(r.http_status, 404);
  EXPECT_NE(error_of(r)["message"].get<std::string>().find("no embedding model"),
            std::string::npos);
  r = AnswerEmbeddings(R"({"model": "other", "input": "a"})", &fake, OkStatus(), &metrics);
  EXPECT_EQ(r.http_status, 404);
  EXPECT_EQ(error_of(r)["code"], "model_not_found");
  EXPECT_NE(error_of(r)["message"].get<std::string>().find("'mini'"), std::string::npos);
  r = AnswerEmbeddings(R"({"model": "mini", "input": "a", "dimensions": 3})", &fake, OkStatus(),
                       &metrics);
  EXPECT_EQ(r.http_status, 400);
  EXPECT_EQ(error_of(r)["param"], "dimensions");
  EXPECT_EQ(AnswerEmbeddings(R"({"model": "mini", "input": "a", "dimensions": 2})", &fake,
                             OkStatus(), &metrics)
                .http_status,
            200);
  r = AnswerEmbeddings(R"({"model": "mini", "input": []})", &fake, OkStatus(), &metrics);
  EXPECT_EQ(r.http_status, 400);
  r = AnswerEmbeddings(ok_body, &fake, UnavailableError("the model is still loading"), &metrics);
  EXPECT_EQ(r.http_status, 503);

  fake.fail = InvalidArgumentError("texts[1]: text is not valid UTF-8 (byte 3)");
  r = AnswerEmbeddings(ok_body, &fake, OkStatus(), &metrics);
  EXPECT_EQ(r.http_status, 400);
  EXPECT_EQ(error_of(r)["param"], "input");
  EXPECT_EQ(error_of(r)["message"], "input[1]: text is not valid UTF-8 (byte 3)");
  fake.fail = ResourceExhaustedError("the embedding queue is full");
  r = AnswerEmbeddings(ok_body, &fake, OkStatus(), &metrics);
  EXPECT_EQ(r.http_status, 429);
  EXPECT_EQ(error_of(r)["code"], "queue_full");

  const std::string text = metrics.Serialize();
  EXPECT_NE(text.find(R"(strata_embedding_requests_total{code="OK",transport="http"} 2)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(strata_embedding_requests_total{code="NOT_FOUND",transport="http"} 2)"),
            std::string::npos);
  EXPECT_NE(text.find("strata_embedding_texts_total 3"), std::string::npos);
  EXPECT_NE(text.find("strata_embedding_tokens_total 9"), std::string::npos);
}

}  // namespace
}  // namespace strata::server::http
