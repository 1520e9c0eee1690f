#include "strata/tokenizer/chat_template.h"

#include <algorithm>
#include <utility>

namespace strata::tokenizer {
namespace {

bool IsUnicodeWhitespace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Decodes the well-formed UTF-8 sequence at text[pos]; returns its length, or 0 when the bytes
// there are not one.
size_t DecodeAt(std::string_view text, size_t pos, uint32_t* cp) {
  const auto b0 = static_cast<uint8_t>(text[pos]);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  size_t length;
  uint32_t value;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
    value = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    value = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    value = b0 & 0x07;
  } else {
    return 0;
  }
  if (pos + length > text.size()) return 0;
  for (size_t i = 1; i < length; ++i) {
    const auto b = static_cast<uint8_t>(text[pos + i]);
    if ((b & 0xC0) != 0x80) return 0;
    value = (value << 6) | (b & 0x3F);
  }
  // Reject overlong forms, surrogates and values past U+10FFFF.
  if ((length == 3 && value < 0x800) || (length == 4 && (value < 0x10000 || value > 0x10FFFF)) ||
      (value >= 0xD800 && value <= 0xDFFF)) {
    return 0;
  }
  *cp = value;
  return length;
}

// The Gemma 3 instruction-tuned template (tokenizer_config.json of google/gemma-3-*-it): a
// leading system message becomes a prefix of the first turn (untrimmed, plus a blank line);
// turns must alternate user/assistant starting with user; "assistant" is called "model";
// message contents are trimmed.
class GemmaChatTemplate final : public ChatTemplate {
 public:
  std::string_view name() const override { return "gemma"; }

  StatusOr<std::string> Render(std::span<const ChatMessage> messages,
                               const ChatRenderOptions& options) const override {
    if (messages.empty()) return InvalidArgumentError("a conversation needs at least one message");
    std::string out = options.bos_text;
    std::string first_user_prefix;
    if (messages.front().role == "system") {
      first_user_prefix = messages.front().content + "\n\n";
      messages = messages.subspan(1);
    }
    for (size_t i = 0; i < messages.size(); ++i) {
      const ChatMessage& m = messages[i];
      if ((m.role == "user") != (i % 2 == 0)) {
        return InvalidArgumentError(
            "Conversation roles must alternate user/assistant/user/assistant/... (message " +
            std::to_string(i) + " has role '" + m.role + "')");
      }
      out += "<start_of_turn>";
      out += m.role == "assistant" ? std::string_view("model") : std::string_view(m.role);
      out += '\n';
      if (i == 0) out += first_user_prefix;
      out += TrimUnicodeWhitespace(m.content);
      out += "<end_of_turn>\n";
    }
    if (options.add_generation_prompt) out += "<start_of_turn>model\n";
    return out;
  }
};

// ChatML, as used by Qwen2 (the plain form: no default system prompt is inserted) and others.
class ChatMlChatTemplate final : public ChatTemplate {
 public:
  std::string_view name() const override { return "chatml"; }

  StatusOr<std::string> Render(std::span<const ChatMessage> messages,
                               const ChatRenderOptions& options) const override {
    if (messages.empty()) return InvalidArgumentError("a conversation needs at least one message");
    std::string out;
    for (const ChatMessage& m : messages) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    }
    if (options.add_generation_prompt) out += "<|im_start|>assistant\n";
    return out;
  }
};

// Meta Llama 3 Instruct (the 3.0 template; 3.1's tool and date preamble is not rendered).
class Llama3ChatTemplate final : public ChatTemplate {
 public:
  std::string_view name() const override { return "llama3"; }

  StatusOr<std::string> Render(std::span<const ChatMessage> messages,
                               const ChatRenderOptions& options) const override {
    if (messages.empty()) return InvalidArgumentError("a conversation needs at least one message");
    std::string out = options.bos_text;
    for (const ChatMessage& m : messages) {
      out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
      out += TrimUnicodeWhitespace(m.content);
      out += "<|eot_id|>";
    }
    if (options.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return out;
  }
};

bool Has(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

}  // namespace

std::string_view TrimUnicodeWhitespace(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size()) {
    uint32_t cp = 0;
    const size_t length = DecodeAt(text, begin, &cp);
    if (length == 0 || !IsUnicodeWhitespace(cp)) break;
    begin += length;
  }
  size_t end = text.size();
  while (end > begin) {
    // Step back to the start of the last character (at most 3 continuation bytes).
    size_t start = end - 1;
    while (start > begin && end - start < 4 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) {
      --start;
    }
    uint32_t cp = 0;
    const size_t length = DecodeAt(text, start, &cp);
    if (length == 0 || start + length != end || !IsUnicodeWhitespace(cp)) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

ChatTemplateRegistry& ChatTemplateRegistry::Global() {
  static ChatTemplateRegistry* registry = [] {
    auto* r = new ChatTemplateRegistry();
    RegisterBuiltinChatTemplates(*r);
    return r;
  }();
  return *registry;
}

const ChatTemplateRegistry::Entry* ChatTemplateRegistry::FindLocked(std::string_view name) const {
  for (const Entry& e : entries_) {
    if (e.name == name) return &e;
    if (std::find(e.aliases.begin(), e.aliases.end(), name) != e.aliases.end()) return &e;
  }
  return nullptr;
}

Status ChatTemplateRegistry::Register(std::string name, std::vector<std::string> aliases,
                                      Factory factory, SourceDetector source_detector,
                                      VocabDetector vocab_detector) {
  if (!factory) return InvalidArgumentError("chat template '" + name + "' has no factory");
  std::lock_guard<std::mutex> lock(mu_);
  if (FindLocked(name) != nullptr) {
    return InvalidArgumentError("chat template '" + name + "' is already registered");
  }
  for (const std::string& alias : aliases) {
    if (FindLocked(alias) != nullptr || alias == name) {
      return InvalidArgumentError("chat template name '" + alias + "' is already registered");
    }
  }
  entries_.push_back({std::move(name), std::move(aliases), std::move(factory),
                      std::move(source_detector), std::move(vocab_detector)});
  return OkStatus();
}

StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplateRegistry::Create(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Entry* entry = FindLocked(name);
  if (entry == nullptr) {
    std::string known;
    for (const Entry& e : entries_) known += (known.empty() ? "" : ", ") + e.name;
    return NotFoundError("unknown chat template '" + std::string(name) + "' (known: " + known +
                         ")");
  }
  return entry->factory();
}

StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplateRegistry::Detect(
    std::string_view template_source) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!template_source.empty()) {
    for (const Entry& e : entries_) {
      if (e.source_detector && e.source_detector(template_source)) return e.factory();
    }
  }
  return NotFoundError("no known chat template matches tokenizer.chat_template");
}

StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplateRegistry::Resolve(std::string_view name,
                                                                      const Vocab& vocab) const {
  if (!name.empty()) return Create(name);
  {
    auto detected = Detect(vocab.chat_template);
    if (detected.ok()) return detected;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const Entry& e : entries_) {
    if (e.vocab_detector && e.vocab_detector(vocab)) return e.factory();
  }
  return NotFoundError("cannot tell the model's chat template: tokenizer.chat_template is " +
                       std::string(vocab.chat_template.empty() ? "absent" : "not one we know") +
                       " and the vocab has no known turn markers; name a template explicitly");
}

std::vector<std::string> ChatTemplateRegistry::Names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (const Entry& e : entries_) names.push_back(e.name);
  return names;
}

void RegisterBuiltinChatTemplates(ChatTemplateRegistry& registry) {
  // Registration of fixed, distinct names cannot fail.
  Status s = registry.Register(
      "gemma", {"gemma3"}, [] { return std::make_unique<GemmaChatTemplate>(); },
      [](std::string_view src) { return Has(src, "<start_of_turn>"); },
      [](const Vocab& v) { return v.Find("<start_of_turn>") != kNoToken; });
  STRATA_CHECK(s.ok());
  s = registry.Register(
      "llama3", {}, [] { return std::make_unique<Llama3ChatTemplate>(); },
      [](std::string_view src) {
        return Has(src, "<|start_header_id|>") && Has(src, "<|end_header_id|>");
      },
      [](const Vocab& v) { return v.Find("<|start_header_id|>") != kNoToken; });
  STRATA_CHECK(s.ok());
  s = registry.Register(
      "chatml", {"qwen2"}, [] { return std::make_unique<ChatMlChatTemplate>(); },
      [](std::string_view src) { return Has(src, "<|im_start|>"); },
      [](const Vocab& v) { return v.Find("<|im_start|>") != kNoToken; });
  STRATA_CHECK(s.ok());
}

}  // namespace strata::tokenizer
