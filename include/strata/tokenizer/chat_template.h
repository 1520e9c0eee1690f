// Chat templates: render a conversation into the prompt text a model was trained on.
//
// Each template is written in C++ after the model family's Jinja template and must render the
// same text for the messages it accepts (tests/fidelity compares Gemma's against its Jinja
// source through jinja2). Templates are found by name ("gemma", "chatml", "llama3") or
// detected from a GGUF's tokenizer.chat_template text, falling back to marker tokens in the
// vocab (GGUFs such as our Gemma 3 270M carry no template text).
//
// BOS: templates that start with {{ bos_token }} put ChatRenderOptions::bos_text there. It is
// empty by default because Tokenizer::Encode adds BOS itself (EncodeOptions::add_special);
// encode the rendered prompt with add_special = true and parse_special = true. Set bos_text
// (e.g. "<bos>") only to get the exact string the Jinja template renders.
//
// Templates are immutable; any thread may Render concurrently. The registry is thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/common/status.h"
#include "strata/tokenizer/vocab.h"

namespace strata::tokenizer {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant" (templates may accept others)
  std::string content;  // UTF-8 text
};

struct ChatRenderOptions {
  // Append the header that opens the assistant's turn ("<start_of_turn>model\n").
  bool add_generation_prompt = true;
  // Text for {{ bos_token }}; see the note on BOS above.
  std::string bos_text;
};

class ChatTemplate {
 public:
  virtual ~ChatTemplate() = default;

  // The registry name ("gemma", ...).
  virtual std::string_view name() const = 0;

  // The prompt text. INVALID_ARGUMENT, naming the problem, for conversations the template
  // rejects (Gemma: roles not alternating user/assistant; no messages at all).
  virtual StatusOr<std::string> Render(std::span<const ChatMessage> messages,
                                       const ChatRenderOptions& options) const = 0;
};

class ChatTemplateRegistry {
 public:
  using Factory = std::function<std::unique_ptr<ChatTemplate>()>;
  // Recognises the template from tokenizer.chat_template text.
  using SourceDetector = std::function<bool(std::string_view template_source)>;
  // Recognises the template from the vocab (marker tokens), when there is no template text.
  using VocabDetector = std::function<bool(const Vocab& vocab)>;

  // The process-wide registry, holding the built-in templates: "gemma" (alias "gemma3"),
  // "chatml" (alias "qwen2") and "llama3".
  static ChatTemplateRegistry& Global();

  // An empty registry (tests).
  ChatTemplateRegistry() = default;

  // Adds a template under `name` and its `aliases`. Detectors may be null. INVALID_ARGUMENT
  // when a name is taken. Detection tries templates in registration order.
  Status Register(std::string name, std::vector<std::string> aliases, Factory factory,
                  SourceDetector source_detector, VocabDetector vocab_detector);

  // NOT_FOUND, listing the known names, when `name` is unknown.
  StatusOr<std::unique_ptr<ChatTemplate>> Create(std::string_view name) const;

  // The template for a model: by `name` when it is non-empty; otherwise detected from
  // vocab.chat_template, then from the vocab's tokens. NOT_FOUND when nothing matches.
  StatusOr<std::unique_ptr<ChatTemplate>> Resolve(std::string_view name, const Vocab& vocab) const;

  // Detection from template text alone; NOT_FOUND when nothing matches.
  StatusOr<std::unique_ptr<ChatTemplate>> Detect(std::string_view template_source) const;

  // Registered names (not aliases), in registration order.
  std::vector<std::string> Names() const;

 private:
  struct Entry {
    std::string name;
    std::vector<std::string> aliases;
    Factory factory;
    SourceDetector source_detector;
    VocabDetector vocab_detector;
  };
  const Entry* FindLocked(std::string_view name) const;

  mutable std::mutex mu_;
  std::vector<Entry> entries_;
};

// Registers the built-in templates into `registry` (Global() does this once).
void RegisterBuiltinChatTemplates(ChatTemplateRegistry& registry);

// Python's str.strip(): removes leading and trailing Unicode whitespace (what Jinja's `trim`
// filter does). Invalid UTF-8 is never whitespace.
std::string_view TrimUnicodeWhitespace(std::string_view text);

}  // namespace strata::tokenizer
