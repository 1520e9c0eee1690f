#include "strata/tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tokenizer_test_util.h"

namespace strata::tokenizer {
namespace {

using testing::MakeSpmVocab;
using testing::TokenSpec;

std::string Render(std::string_view name, const std::vector<ChatMessage>& messages,
                   bool add_generation_prompt = true, std::string bos_text = "") {
  auto t = ChatTemplateRegistry::Global().Create(name);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  ChatRenderOptions options;
  options.add_generation_prompt = add_generation_prompt;
  options.bos_text = std::move(bos_text);
  auto rendered = (*t)->Render(messages, options);
  EXPECT_TRUE(rendered.ok()) << rendered.status().ToString();
  return rendered.ok() ? *rendered : "";
}

TEST(GemmaChatTemplate, RendersTurnsAndTheGenerationPrompt) {
  EXPECT_EQ(Render("gemma", {{"user", "Hello!"}}, true, "<bos>"),
            "<bos><start_of_turn>user\nHello!<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(Render("gemma", {{"user", "Hi"}, {"assistant", "Yo"}, {"user", "Joke?"}}, false),
            "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nYo<end_of_turn>\n"
            "<start_of_turn>user\nJoke?<end_of_turn>\n");
}

TEST(GemmaChatTemplate, FoldsTheSystemPromptIntoTheFirstUserTurn) {
  EXPECT_EQ(Render("gemma", {{"system", " Be brief. "}, {"user", "  Q  "}}),
            "<start_of_turn>user\n Be brief. \n\nQ<end_of_turn>\n<start_of_turn>model\n");
}

TEST(GemmaChatTemplate, TrimsUnicodeWhitespaceAsJinjaDoes) {
  EXPECT_EQ(Render("gemma", {{"user", "\xe3\x80\x80hi\xc2\xa0\n"}}, false),
            "<start_of_turn>user\nhi<end_of_turn>\n");
}

TEST(GemmaChatTemplate, RejectsRolesThatDoNotAlternate) {
  auto t = ChatTemplateRegistry::Global().Create("gemma3");
  ASSERT_TRUE(t.ok());
  std::vector<ChatMessage> two_users = {{"user", "a"}, {"user", "b"}};
  auto r = (*t)->Render(two_users, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("alternate"), std::string::npos);
  std::vector<ChatMessage> assistant_first = {{"assistant", "a"}};
  EXPECT_FALSE((*t)->Render(assistant_first, {}).ok());
  EXPECT_FALSE((*t)->Render(std::vector<ChatMessage>{}, {}).ok());
}

TEST(ChatMlChatTemplate, RendersImStartBlocks) {
  EXPECT_EQ(Render("qwen2", {{"system", "S"}, {"user", " U "}}),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n U <|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(Llama3ChatTemplate, RendersHeadersAndEotAfterBos) {
  EXPECT_EQ(Render("llama3", {{"system", "S"}, {"user", " U "}}, true, "<|begin_of_text|>"),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateRegistry, DetectsTemplatesFromSourceTextThenFromTheVocab) {
  auto& registry = ChatTemplateRegistry::Global();
  auto gemma = registry.Detect("{{ bos_token }}{% for m in messages %}<start_of_turn>...");
  ASSERT_TRUE(gemma.ok());
  EXPECT_EQ((*gemma)->name(), "gemma");
  auto chatml = registry.Detect("{{'<|im_start|>' + message['role']}}");
  ASSERT_TRUE(chatml.ok());
  EXPECT_EQ((*chatml)->name(), "chatml");
  EXPECT_EQ(registry.Detect("something else").status().code(), StatusCode::kNotFound);

  // No template text (like the Gemma 3 270M GGUF): the vocab's turn markers decide.
  Vocab vocab = MakeSpmVocab({{"<start_of_turn>", 0, TokenType::kControl}}, false);
  auto resolved = registry.Resolve("", vocab);
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  EXPECT_EQ((*resolved)->name(), "gemma");
  // An explicit name wins.
  auto named = registry.Resolve("llama3", vocab);
  ASSERT_TRUE(named.ok());
  EXPECT_EQ((*named)->name(), "llama3");

  Vocab plain = MakeSpmVocab({}, false);
  auto none = registry.Resolve("", plain);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
}

TEST(ChatTemplateRegistry, NamesUnknownTemplatesAndRefusesDuplicates) {
  ChatTemplateRegistry registry;
  RegisterBuiltinChatTemplates(registry);
  EXPECT_EQ(registry.Names(), (std::vector<std::string>{"gemma", "llama3", "chatml"}));
  auto missing = registry.Create("vicuna");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("gemma"), std::string::npos);

  auto factory = [] { return std::unique_ptr<ChatTemplate>(); };
  EXPECT_FALSE(registry.Register("gemma", {}, factory, nullptr, nullptr).ok());
  EXPECT_FALSE(registry.Register("new", {"qwen2"}, factory, nullptr, nullptr).ok());
  EXPECT_FALSE(registry.Register("nofactory", {}, nullptr, nullptr, nullptr).ok());
  EXPECT_TRUE(registry.Register("new", {"new-alias"}, factory, nullptr, nullptr).ok());
}

TEST(TrimUnicodeWhitespace, MatchesPythonStrip) {
  EXPECT_EQ(TrimUnicodeWhitespace("  a b \t\n"), "a b");
  EXPECT_EQ(TrimUnicodeWhitespace("\x1c\xc2\x85x\xe2\x80\xa8"), "x");  // U+001C, U+0085, U+2028
  EXPECT_EQ(TrimUnicodeWhitespace("\xe2\x80\x8bx"), "\xe2\x80\x8bx");  // U+200B is not space
  EXPECT_EQ(TrimUnicodeWhitespace(" \xff "), "\xff");
  EXPECT_EQ(TrimUnicodeWhitespace("   "), "");
  EXPECT_EQ(TrimUnicodeWhitespace(""), "");
}

}  // namespace
}  // namespace strata::tokenizer
