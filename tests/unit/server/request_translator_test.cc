#include "strata/server/request_translator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "strata/server/output_constraints.h"
#include "strata/server/proto_input.h"
#include "support/tiny_llama.h"

namespace strata::server {
namespace {

using strata::testing::tiny_llama::MakeTokenizer;

class RequestTranslatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = MakeTokenizer();
    ASSERT_NE(tokenizer_, nullptr);
    auto chat = tokenizer::ChatTemplateRegistry::Global().Create("chatml");
    ASSERT_TRUE(chat.ok()) << chat.status().ToString();
    chat_ = std::move(*chat);
    limits_.default_max_tokens = 16;
  }

  StatusOr<TranslatedRequest> Translate(const v1::GenerateRequest& r, bool with_chat = true) {
    RequestTranslator t(tokenizer_.get(), with_chat ? chat_.get() : nullptr, limits_);
    return t.Translate(InputFromProto(r), /*drawn_seed=*/777);
  }

  // Expects INVALID_ARGUMENT whose message contains `field`.
  void ExpectInvalid(const v1::GenerateRequest& r, const std::string& field) {
    auto out = Translate(r);
    ASSERT_FALSE(out.ok()) << "accepted; expected an error naming " << field;
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << out.status().ToString();
    EXPECT_NE(out.status().message().find(field), std::string::npos) << out.status().message();
  }

  static v1::GenerateRequest Prompt(const std::string& text) {
    v1::GenerateRequest r;
    r.set_prompt(text);
    return r;
  }

  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<tokenizer::ChatTemplate> chat_;
  TranslatorLimits limits_;
};

TEST_F(RequestTranslatorTest, PromptIsEncodedWithBosAndServerDefaults) {
  auto out = Translate(Prompt("bakado"));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->request.prompt,
            tokenizer_->Encode("bakado", {/*add_special=*/true, /*parse_special=*/false}));
  EXPECT_EQ(out->request.prompt.front(), 1);  // BOS
  EXPECT_EQ(out->request.params.max_tokens, 16);
  EXPECT_EQ(out->request.params.temperature, 1.0f);
  EXPECT_EQ(out->seed, 777u);  // drawn
  EXPECT_EQ(out->request.params.seed, 777u);
}

TEST_F(RequestTranslatorTest, SetFieldsOverrideTheDefaults) {
  v1::GenerateRequest r = Prompt("ba");
  r.set_request_id("client-42");
  r.set_priority(3);
  v1::SamplingParams* s = r.mutable_sampling();
  s->set_max_tokens(5);
  s->set_temperature(0);
  s->set_top_p(0.5f);
  s->set_top_k(7);
  s->set_seed(9);
  s->add_stop("da");
  s->add_stop_token_ids(2);
  s->set_ignore_eos(true);
  s->set_logprobs(3);
  auto out = Translate(r);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const sampling::SamplingParams& p = out->request.params;
  EXPECT_EQ(out->request_id, "client-42");
  EXPECT_EQ(out->request.priority, 3);
  EXPECT_EQ(p.max_tokens, 5);
  EXPECT_EQ(p.temperature, 0.0f);  // an explicit 0 is kept (proto3 optional)
  EXPECT_EQ(p.top_p, 0.5f);
  EXPECT_EQ(p.top_k, 7);
  EXPECT_EQ(p.seed, 9u);
  EXPECT_EQ(out->seed, 9u);
  EXPECT_EQ(p.stop, std::vector<std::string>({"da"}));
  EXPECT_EQ(p.stop_token_ids, std::vector<int32_t>({2}));
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_EQ(p.logprobs, 3);
}

TEST_F(RequestTranslatorTest, TokenIdsPassThroughAndMustBeInTheVocabulary) {
  v1::GenerateRequest r;
  r.mutable_token_ids()->add_ids(1);
  r.mutable_token_ids()->add_ids(5);
  auto out = Translate(r);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->request.prompt, std::vector<int32_t>({1, 5}));
  r.mutable_token_ids()->add_ids(100000);
  ExpectInvalid(r, "token_ids.ids[2]");
  r.mutable_token_ids()->set_ids(2, -1);
  ExpectInvalid(r, "token_ids.ids[2]");
  r.mutable_token_ids()->clear_ids();
  ExpectInvalid(r, "token_ids.ids must not be empty");
}

TEST_F(RequestTranslatorTest, ChatIsRenderedByTheTemplate) {
  v1::GenerateRequest r;
  v1::ChatMessage* m = r.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("ba");
  auto out = Translate(r);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  std::vector<tokenizer::ChatMessage> turns = {{"user", "ba"}};
  auto text = chat_->Render(turns, {});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(out->request.prompt, tokenizer_->Encode(*text, {true, true}));

  m->set_role("wizard");
  ExpectInvalid(r, "chat.messages[0].role");
  m->set_role("user");
  m->set_content("\xC0\xAF");
  ExpectInvalid(r, "chat.messages[0].content must be valid UTF-8");
  r.mutable_chat()->clear_messages();
  ExpectInvalid(r, "chat.messages must not be empty");

  v1::GenerateRequest ok_chat;
  ok_chat.mutable_chat()->add_messages()->set_role("user");
  auto no_template = Translate(ok_chat, /*with_chat=*/false);
  EXPECT_EQ(no_template.status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(RequestTranslatorTest, EveryBadFieldIsNamed) {
  ExpectInvalid(v1::GenerateRequest(), "input must be one of prompt, token_ids or chat");
  ExpectInvalid(Prompt(""), "prompt must not be empty");
  ExpectInvalid(Prompt("ba\xFF"), "prompt must be valid UTF-8");
  limits_.max_prompt_bytes = 4;
  ExpectInvalid(Prompt("bababa"), "prompt must be at most 4 bytes");
  limits_.max_prompt_bytes = 1 << 20;

  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    std::function<void(v1::SamplingParams*)> set;
    std::string field;
  };
  const Case cases[] = {
      {[](v1::SamplingParams* s) { s->set_max_tokens(0); }, "sampling.max_tokens"},
      {[](v1::SamplingParams* s) { s->set_max_tokens(-5); }, "sampling.max_tokens"},
      {[](v1::SamplingParams* s) { s->set_temperature(-1); }, "sampling.temperature"},
      {[&](v1::SamplingParams* s) { s->set_temperature(nan); }, "sampling.temperature"},
      {[&](v1::SamplingParams* s) { s->set_temperature(inf); }, "sampling.temperature"},
      {[](v1::SamplingParams* s) { s->set_top_p(0); }, "sampling.top_p"},
      {[](v1::SamplingParams* s) { s->set_top_p(1.5f); }, "sampling.top_p"},
      {[&](v1::SamplingParams* s) { s->set_top_p(nan); }, "sampling.top_p"},
      {[](v1::SamplingParams* s) { s->set_top_k(-1); }, "sampling.top_k"},
      {[](v1::SamplingParams* s) { s->set_min_p(2); }, "sampling.min_p"},
      {[](v1::SamplingParams* s) { s->set_repetition_penalty(0); }, "sampling.repetition_penalty"},
      {[](v1::SamplingParams* s) { s->set_presence_penalty(3); }, "sampling.presence_penalty"},
      {[](v1::SamplingParams* s) { s->set_frequency_penalty(-3); }, "sampling.frequency_penalty"},
      {[](v1::SamplingParams* s) { s->set_logprobs(21); }, "sampling.logprobs"},
      {[](v1::SamplingParams* s) { s->add_stop_token_ids(1 << 30); }, "sampling.stop_token_ids"},
      {[](v1::SamplingParams* s) { s->add_stop(""); }, "sampling.stop"},
      {[](v1::SamplingParams* s) { s->add_stop(std::string(300, 'a')); }, "sampling.stop"},
      {[](v1::SamplingParams* s) {
         for (int i = 0; i < 17; ++i) s->add_stop(std::string(1 + i, 'x'));
       },
       "sampling.stop"},
      {[](v1::SamplingParams* s) { s->add_stop("\xED\xA0\x80"); }, "sampling.stop[0]"},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest r = Prompt("ba");
    c.set(r.mutable_sampling());
    ExpectInvalid(r, c.field);
  }

  v1::GenerateRequest r = Prompt("ba");
  // Whether prompt + max_tokens fit is the engine's rule (engine/request_limits.h), checked
  // there once for every transport: the translator passes any max_tokens >= 1 on.
  r.mutable_sampling()->set_max_tokens(1000000);
  EXPECT_TRUE(Translate(r).ok());
  r.set_priority(5000);
  ExpectInvalid(r, "priority must be between -1000 and 1000");
  r.set_priority(0);
  r.set_request_id(std::string(200, 'r'));
  ExpectInvalid(r, "request_id must be at most 128 bytes");
  r.set_request_id("\xFF");
  ExpectInvalid(r, "request_id must be valid UTF-8");
}

// Forwards to a real tokenizer and counts the texts it was asked to encode.
class CountingTokenizer final : public tokenizer::Tokenizer {
 public:
  explicit CountingTokenizer(const tokenizer::Tokenizer* inner)
      : Tokenizer(inner->vocab()), inner_(inner) {}
  std::vector<tokenizer::TokenId> Encode(std::string_view text,
                                         const tokenizer::EncodeOptions& options) const override {
    ++encodes;
    return inner_->Encode(text, options);
  }
  std::string TokenToPiece(tokenizer::TokenId id, bool render_special) const override {
    return inner_->TokenToPiece(id, render_special);
  }
  std::string Decode(std::span<const tokenizer::TokenId> ids, bool render_special) const override {
    return inner_->Decode(ids, render_special);
  }
  mutable int encodes = 0;

 private:
  const tokenizer::Tokenizer* inner_;
};

TEST_F(RequestTranslatorTest, APromptTooLongForTheContextByItsSizeIsRefusedBeforeEncoding) {
  CountingTokenizer counting(tokenizer_.get());
  const size_t per_token = counting.max_token_bytes();
  ASSERT_GE(per_token, 1u);
  limits_.context_tokens = 64;
  RequestTranslator t(&counting, chat_.get(), limits_);
  v1::GenerateRequest r = Prompt(std::string(per_token * 60, 'a'));  // >= 60 tokens
  r.mutable_sampling()->set_max_tokens(8);
  auto out = t.Translate(InputFromProto(r), 1);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("at least 60 tokens) + max_tokens (8) exceed the model's "
                                        "context of 64 tokens"),
            std::string::npos)
      << out.status().message();
  EXPECT_EQ(counting.encodes, 0);
  r.mutable_sampling()->set_max_tokens(4);  // 60 + 4 may fit: encoded, the engine decides
  EXPECT_TRUE(t.Translate(InputFromProto(r), 1).ok());
  EXPECT_EQ(counting.encodes, 1);
}

// The bound is sound: no text encodes to fewer tokens than its bytes / max_token_bytes().
TEST_F(RequestTranslatorTest, NoTextEncodesToFewerTokensThanItsSizeBound) {
  const size_t per_token = tokenizer_->max_token_bytes();
  std::string all_pieces;
  for (const std::string& t : tokenizer_->vocab().tokens) all_pieces += t;
  const std::string texts[] = {"bakado",
                               std::string(500, ' '),
                               std::string(500, 'a'),
                               "\xE2\x96\x81 \xE2\x96\x81",
                               std::string(1, '\0'),
                               all_pieces,
                               "<s></s><|im_start|>user\nhi<|im_end|>"};
  for (const std::string& text : texts) {
    for (const bool special : {false, true}) {
      const size_t n = tokenizer_->Encode(text, {/*add_special=*/false, special}).size();
      EXPECT_GE(n * per_token, text.size()) << text.substr(0, 40);
    }
  }
}

TEST_F(RequestTranslatorTest, TokenizeSharesTheTextChecksOfGenerate) {
  RequestTranslator t(tokenizer_.get(), chat_.get(), limits_);
  GenerationInput text;
  text.kind = GenerationInput::Kind::kText;
  text.text = "ba\xFF";
  EXPECT_NE(t.CheckedText(text, "text").status().message().find("text must be valid UTF-8"),
            std::string::npos);
  GenerationInput chat;
  chat.kind = GenerationInput::Kind::kChat;
  chat.chat.assign(limits_.max_chat_messages + 1, ChatTurn{"user", "x"});
  EXPECT_NE(
      t.CheckedText(chat, "text").status().message().find("chat.messages must hold at most 1024"),
      std::string::npos);
  chat.chat = {{"robot", "x"}};
  EXPECT_NE(t.CheckedText(chat, "text").status().message().find("chat.messages[0].role"),
            std::string::npos);
  chat.chat = {{"user", "hi"}};
  auto rendered = t.CheckedText(chat, "text");
  ASSERT_TRUE(rendered.ok()) << rendered.status().ToString();
  EXPECT_TRUE(rendered->parse_special);
  EXPECT_NE(rendered->text.find("hi"), std::string::npos);
}

}  // namespace
}  // namespace strata::server

namespace strata::server {
namespace {

// The translator needs no wire types: a frontend fills a GenerationInput directly, and unset
// fields take the server defaults exactly as an unset proto field does.
TEST(RequestTranslatorInput, APlainInputTranslatesLikeItsProto) {
  std::unique_ptr<tokenizer::Tokenizer> tok = testing::tiny_llama::MakeTokenizer();
  TranslatorLimits limits;
  limits.default_max_tokens = 16;
  RequestTranslator t(tok.get(), nullptr, limits);
  GenerationInput in;
  in.kind = GenerationInput::Kind::kTokenIds;
  in.token_ids = {1, 5, 9};
  in.sampling.temperature = 0.5f;
  in.priority = 3;
  in.request_id = "abc";
  auto out = t.Translate(in, /*drawn_seed=*/99);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->request.prompt, (std::vector<int32_t>{1, 5, 9}));
  EXPECT_EQ(out->request.params.max_tokens, 16);
  EXPECT_FLOAT_EQ(out->request.params.temperature, 0.5f);
  EXPECT_EQ(out->request.params.seed, 99u);
  EXPECT_EQ(out->request.priority, 3);
  EXPECT_EQ(out->request_id, "abc");

  v1::GenerateRequest proto;
  proto.mutable_token_ids()->add_ids(1);
  proto.mutable_token_ids()->add_ids(5);
  proto.mutable_token_ids()->add_ids(9);
  proto.mutable_sampling()->set_temperature(0.5f);
  proto.set_priority(3);
  proto.set_request_id("abc");
  auto via_proto = t.Translate(InputFromProto(proto), /*drawn_seed=*/99);
  ASSERT_TRUE(via_proto.ok());
  EXPECT_EQ(via_proto->request.prompt, out->request.prompt);
  EXPECT_EQ(via_proto->request.params.max_tokens, out->request.params.max_tokens);
  EXPECT_EQ(via_proto->request.params.seed, out->request.params.seed);

  GenerationInput none;
  auto refused = t.Translate(none, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("input must be one of"), std::string::npos);
}

}  // namespace
}  // namespace strata::server

namespace strata::server {
namespace {

class OutputFormatTranslationTest : public RequestTranslatorTest {
 protected:
  void SetUp() override {
    RequestTranslatorTest::SetUp();
    constraints_ = std::make_unique<OutputConstraints>(tokenizer_.get());
  }
  StatusOr<TranslatedRequest> TranslateWithFormats(const v1::GenerateRequest& r) {
    RequestTranslator t(tokenizer_.get(), chat_.get(), limits_, constraints_.get());
    return t.Translate(InputFromProto(r), /*drawn_seed=*/777);
  }
  static v1::GenerateRequest GreedyWithRegex(const std::string& regex) {
    v1::GenerateRequest r = Prompt("ba");
    r.mutable_sampling()->set_temperature(0);
    r.mutable_output_format()->set_regex(regex);
    return r;
  }
  std::unique_ptr<OutputConstraints> constraints_;
};

TEST_F(OutputFormatTranslationTest, AFormatBecomesAConstraintAndTheRequestIsNotCacheable) {
  StatusOr<TranslatedRequest> out = TranslateWithFormats(GreedyWithRegex("(ba|da)+"));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_NE(out->request.constraint, nullptr);
  EXPECT_FALSE(out->request.cache.cacheable);  // greedy, so cacheable without the format
  // The first allowed token is accepted.
  const size_t vocab = tokenizer_->vocab().tokens.size();
  std::vector<uint32_t> allowed((vocab + 31) / 32, 0);
  out->request.constraint->FillAllowed(allowed);
  int32_t first = -1;
  for (size_t id = 0; id < vocab && first < 0; ++id) {
    if (allowed[id / 32] >> (id % 32) & 1u) first = static_cast<int32_t>(id);
  }
  ASSERT_GE(first, 0);
  EXPECT_TRUE(out->request.constraint->Accept(first));
  // Requests with the same format share one compiled grammar; each gets its own constraint.
  StatusOr<TranslatedRequest> again = TranslateWithFormats(GreedyWithRegex("(ba|da)+"));
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->request.constraint, out->request.constraint);
  EXPECT_EQ(constraints_->compiled_total(), 1);
  ASSERT_TRUE(TranslateWithFormats(GreedyWithRegex("ba")).ok());
  EXPECT_EQ(constraints_->compiled_total(), 2);
}

// The vocabulary is built by the first structured request, or before it when the server asks
// at start-up; either way the constraints are the same.
TEST_F(OutputFormatTranslationTest, TheVocabularyIsBuiltAheadOfTheFirstFormatWhenAsked) {
  EXPECT_FALSE(constraints_->vocabulary_built());
  ASSERT_TRUE(TranslateWithFormats(GreedyWithRegex("ba")).ok());
  EXPECT_TRUE(constraints_->vocabulary_built());

  OutputConstraints ahead(tokenizer_.get());
  ahead.BuildVocabularyInBackground();
  ahead.BuildVocabularyInBackground();  // a second call changes nothing
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!ahead.vocabulary_built() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(ahead.vocabulary_built());
  EXPECT_EQ(ahead.compiled_total(), 0);  // built before any format
  OutputFormatInput format;
  format.kind = OutputFormatInput::Kind::kRegex;
  format.text = "ba";
  auto constraint = ahead.For(format);
  ASSERT_TRUE(constraint.ok()) << constraint.status().ToString();
  const size_t words = (tokenizer_->vocab().tokens.size() + 31) / 32;
  std::vector<uint32_t> a(words, 0), b(words, 0);
  (*constraint)->FillAllowed(a);
  StatusOr<TranslatedRequest> lazy = TranslateWithFormats(GreedyWithRegex("ba"));
  ASSERT_TRUE(lazy.ok());
  lazy->request.constraint->FillAllowed(b);
  EXPECT_EQ(a, b);
  EXPECT_NE(std::count(a.begin(), a.end(), 0u), static_cast<std::ptrdiff_t>(words));

  OutputConstraints destroyed_while_building(tokenizer_.get());
  destroyed_while_building.BuildVocabularyInBackground();  // the destructor joins the builder
}

TEST_F(OutputFormatTranslationTest, BadFormatsAreRefusedNamingTheField) {
  StatusOr<TranslatedRequest> out = TranslateWithFormats(GreedyWithRegex("(ba"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message().rfind("output_format.regex: ", 0), 0u) << out.status().message();

  v1::GenerateRequest r = Prompt("ba");
  r.mutable_output_format()->set_json_schema(R"({"type": "object", "not": {}})");
  out = TranslateWithFormats(r);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message().rfind("output_format.json_schema: ", 0), 0u)
      << out.status().message();
  EXPECT_NE(out.status().message().find("not"), std::string::npos);

  r = GreedyWithRegex("ba");
  r.mutable_sampling()->set_ignore_eos(true);
  out = TranslateWithFormats(r);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("sampling.ignore_eos"), std::string::npos);

  // A translator without structured output.
  out = Translate(GreedyWithRegex("ba"));
  EXPECT_EQ(out.status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace strata::server
