// strata-tokenize: runs the tokenizer of a GGUF model from the command line.
//
//   strata-tokenize MODEL.gguf [--parse-special] [--no-add-special] TEXT
//       prints the ids of TEXT, one "id<TAB>piece" line each, then the decoded text.
//   strata-tokenize MODEL.gguf --jsonl  < requests  > responses
//       one JSON object per input line, one JSON line out per request (for the parity tests):
//         {"text": "...", "add_special": true, "parse_special": false}
//         {"text_hex": "e4bd", ...}                 text given as hex bytes (any bytes)
//         {"ids": [2, 9259], "render_special": false}   decode only
//         {"chat_template": "gemma", "roles": ["user"], "contents": ["Hi"],
//          "bos_text": "<bos>", "add_generation_prompt": true}   render a chat ("" detects)
//       answers {"ids": [...], "decode_hex": ..., "decode_special_hex": ...,
//                "stream_hex": ..., "stream_special_hex": ...}
//       (decode_*: Decode with render_special false/true; stream_*: the concatenated deltas of
//       IncrementalDetokenizer plus its Flush), {"rendered_hex": ...} for a chat, or
//       {"error": "..."} for a malformed line or a rejected chat.
//   strata-tokenize MODEL.gguf --bench FILE [--repeat N]
//       encodes FILE's contents N times (default 20) and prints the tokens and time per encode.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "strata/model/gguf_file.h"
#include "strata/tokenizer/chat_template.h"
#include "strata/tokenizer/incremental_detokenizer.h"
#include "strata/tokenizer/tokenizer.h"

namespace strata::tokenizer {
namespace {

std::string ToHex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    out += kHex[u >> 4];
    out += kHex[u & 15];
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> FromHex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = HexDigit(hex[i]);
    const int lo = HexDigit(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The fields of one request line. A minimal JSON reader for a flat object whose values are
// strings, booleans, integers, null or arrays of integers; anything else is an error.
struct Request {
  std::optional<std::string> text;
  std::optional<std::vector<int64_t>> ids;
  bool add_special = true;
  bool parse_special = false;
  bool render_special = false;
  std::optional<std::string> chat_template;
  std::vector<std::string> roles;
  std::vector<std::string> contents;
  std::string bos_text;
  bool add_generation_prompt = true;
};

class JsonLineParser {
 public:
  explicit JsonLineParser(std::string_view line) : s_(line) {}

  Status Parse(Request* request) {
    SkipSpace();
    if (!Consume('{')) return Error("expected '{'");
    SkipSpace();
    if (Consume('}')) return Finish();
    while (true) {
      SkipSpace();
      std::string key;
      STRATA_RETURN_IF_ERROR(ParseString(&key));
      SkipSpace();
      if (!Consume(':')) return Error("expected ':'");
      SkipSpace();
      STRATA_RETURN_IF_ERROR(ParseField(key, request));
      SkipSpace();
      if (Consume(',')) continue;
      if (Consume('}')) return Finish();
      return Error("expected ',' or '}'");
    }
  }

 private:
  Status ParseField(const std::string& key, Request* request) {
    if (key == "text" || key == "text_hex") {
      std::string value;
      STRATA_RETURN_IF_ERROR(ParseString(&value));
      if (key == "text") {
        request->text = std::move(value);
        return OkStatus();
      }
      auto bytes = FromHex(value);
      if (!bytes) return Error("text_hex is not hex");
      request->text = std::move(*bytes);
      return OkStatus();
    }
    if (key == "add_special") return ParseBool(&request->add_special);
    if (key == "parse_special") return ParseBool(&request->parse_special);
    if (key == "render_special") return ParseBool(&request->render_special);
    if (key == "add_generation_prompt") return ParseBool(&request->add_generation_prompt);
    if (key == "bos_text") return ParseString(&request->bos_text);
    if (key == "chat_template") {
      request->chat_template.emplace();
      return ParseString(&*request->chat_template);
    }
    if (key == "roles") return ParseStringArray(&request->roles);
    if (key == "contents") return ParseStringArray(&request->contents);
    if (key == "ids") {
      std::vector<int64_t> ids;
      if (!Consume('[')) return Error("ids must be an array");
      SkipSpace();
      if (!Consume(']')) {
        while (true) {
          SkipSpace();
          int64_t v = 0;
          STRATA_RETURN_IF_ERROR(ParseInt(&v));
          ids.push_back(v);
          SkipSpace();
          if (Consume(',')) continue;
          if (Consume(']')) break;
          return Error("expected ',' or ']' in ids");
        }
      }
      request->ids = std::move(ids);
      return OkStatus();
    }
    return SkipValue();  // unknown keys (e.g. a label) are ignored
  }

  Status ParseStringArray(std::vector<std::string>* out) {
    if (!Consume('[')) return Error("expected an array of strings");
    SkipSpace();
    if (Consume(']')) return OkStatus();
    while (true) {
      SkipSpace();
      out->emplace_back();
      STRATA_RETURN_IF_ERROR(ParseString(&out->back()));
      SkipSpace();
      if (Consume(',')) continue;
      if (Consume(']')) return OkStatus();
      return Error("expected ',' or ']'");
    }
  }

  Status SkipValue() {
    if (Peek() == '"') {
      std::string ignored;
      return ParseString(&ignored);
    }
    if (Peek() == 't' || Peek() == 'f') {
      bool ignored;
      return ParseBool(&ignored);
    }
    if (s_.substr(pos_, 4) == "null") {
      pos_ += 4;
      return OkStatus();
    }
    int64_t ignored;
    return ParseInt(&ignored);
  }

  Status ParseBool(bool* out) {
    if (s_.substr(pos_, 4) == "true") {
      pos_ += 4;
      *out = true;
      return OkStatus();
    }
    if (s_.substr(pos_, 5) == "false") {
      pos_ += 5;
      *out = false;
      return OkStatus();
    }
    return Error("expected true or false");
  }

  Status ParseInt(int64_t* out) {
    bool negative = Consume('-');
    if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') return Error("expected a number");
    int64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      if (v > (INT64_MAX - 9) / 10) return Error("number out of range");
      v = v * 10 + (s_[pos_++] - '0');
    }
    *out = negative ? -v : v;
    return OkStatus();
  }

  Status ParseHex4(uint32_t* out) {
    if (pos_ + 4 > s_.size()) return Error("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const int d = HexDigit(s_[pos_++]);
      if (d < 0) return Error("bad \\u escape");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    *out = v;
    return OkStatus();
  }

  Status ParseString(std::string* out) {
    if (!Consume('"')) return Error("expected a string");
    while (true) {
      if (pos_ >= s_.size()) return Error("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return OkStatus();
      if (c != '\\') {
        *out += c;  // raw bytes pass through, UTF-8 or not
        continue;
      }
      if (pos_ >= s_.size()) return Error("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"':
          *out += '"';
          break;
        case '\\':
          *out += '\\';
          break;
        case '/':
          *out += '/';
          break;
        case 'b':
          *out += '\b';
          break;
        case 'f':
          *out += '\f';
          break;
        case 'n':
          *out += '\n';
          break;
        case 'r':
          *out += '\r';
          break;
        case 't':
          *out += '\t';
          break;
        case 'u': {
          uint32_t cp = 0;
          STRATA_RETURN_IF_ERROR(ParseHex4(&cp));
          if (cp >= 0xD800 && cp <= 0xDBFF && s_.substr(pos_, 2) == "\\u") {
            const size_t save = pos_;
            pos_ += 2;
            uint32_t low = 0;
            STRATA_RETURN_IF_ERROR(ParseHex4(&low));
            if (low >= 0xDC00 && low <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            } else {
              pos_ = save;
            }
          }
          if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // a lone surrogate has no UTF-8
          AppendUtf8(cp, out);
          break;
        }
        default:
          return Error("bad escape");
      }
    }
  }

  Status Finish() {
    SkipSpace();
    return pos_ == s_.size() ? OkStatus() : Error("trailing characters");
  }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  bool Consume(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  Status Error(const std::string& what) const {
    return InvalidArgumentError(what + " at column " + std::to_string(pos_ + 1));
  }

  std::string_view s_;
  size_t pos_ = 0;
};

std::string JsonEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::string Stream(const Tokenizer& tokenizer, const std::vector<TokenId>& ids,
                   bool render_special) {
  IncrementalDetokenizer detokenizer(tokenizer, render_special);
  std::string text;
  for (TokenId id : ids) text += detokenizer.Push(id);
  text += detokenizer.Flush();
  return text;
}

std::string RenderChat(const Tokenizer& tokenizer, const Request& request) {
  if (request.roles.size() != request.contents.size()) {
    return "{\"error\": \"roles and contents differ in length\"}";
  }
  auto chat_template =
      ChatTemplateRegistry::Global().Resolve(*request.chat_template, tokenizer.vocab());
  if (!chat_template.ok()) {
    return "{\"error\": \"" + JsonEscape(chat_template.status().message()) + "\"}";
  }
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < request.roles.size(); ++i) {
    messages.push_back({request.roles[i], request.contents[i]});
  }
  ChatRenderOptions options;
  options.add_generation_prompt = request.add_generation_prompt;
  options.bos_text = request.bos_text;
  auto rendered = (*chat_template)->Render(messages, options);
  if (!rendered.ok()) return "{\"error\": \"" + JsonEscape(rendered.status().message()) + "\"}";
  return "{\"template\": \"" + JsonEscape((*chat_template)->name()) + "\", \"rendered_hex\": \"" +
         ToHex(*rendered) + "\"}";
}

std::string Answer(const Tokenizer& tokenizer, const Request& request) {
  if (request.chat_template) return RenderChat(tokenizer, request);
  std::vector<TokenId> ids;
  std::string out = "{";
  if (request.ids) {
    for (int64_t id : *request.ids) {
      ids.push_back(id < INT32_MIN || id > INT32_MAX ? kNoToken : static_cast<TokenId>(id));
    }
  } else {
    EncodeOptions options;
    options.add_special = request.add_special;
    options.parse_special = request.parse_special;
    ids = tokenizer.Encode(*request.text, options);
    out += "\"ids\": [";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out += ", ";
      out += std::to_string(ids[i]);
    }
    out += "], ";
  }
  out += "\"decode_hex\": \"" + ToHex(tokenizer.Decode(ids, false)) + "\", ";
  out += "\"decode_special_hex\": \"" + ToHex(tokenizer.Decode(ids, true)) + "\", ";
  out += "\"stream_hex\": \"" + ToHex(Stream(tokenizer, ids, false)) + "\", ";
  out += "\"stream_special_hex\": \"" + ToHex(Stream(tokenizer, ids, true)) + "\"}";
  return out;
}

int RunJsonl(const Tokenizer& tokenizer) {
  std::ios::sync_with_stdio(false);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    Request request;
    Status status = JsonLineParser(line).Parse(&request);
    if (status.ok() && !request.text && !request.ids && !request.chat_template) {
      status = InvalidArgumentError(
          "a request needs \"text\", \"text_hex\", \"ids\" or \"chat_template\"");
    }
    if (!status.ok()) {
      std::cout << "{\"error\": \"" << JsonEscape(status.message()) << "\"}\n";
    } else {
      std::cout << Answer(tokenizer, request) << "\n";
    }
    std::cout.flush();
  }
  return 0;
}

int RunBench(const Tokenizer& tokenizer, const std::string& path, int repeat, bool parse_special) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "cannot read " << path << "\n";
    return 1;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  EncodeOptions options;
  options.parse_special = parse_special;
  size_t num_tokens = 0;
  double best_ms = 1e30;
  double total_ms = 0;
  for (int i = 0; i < repeat; ++i) {
    const auto start = std::chrono::steady_clock::now();
    num_tokens = tokenizer.Encode(text, options).size();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    best_ms = std::min(best_ms, ms);
    total_ms += ms;
  }
  std::printf("%zu bytes -> %zu tokens; encode: best %.3f ms, mean %.3f ms over %d runs\n",
              text.size(), num_tokens, best_ms, total_ms / repeat, repeat);
  return 0;
}

int Usage() {
  std::cerr << "usage: strata-tokenize MODEL.gguf [--parse-special] [--no-add-special] TEXT\n"
               "       strata-tokenize MODEL.gguf --jsonl < requests.jsonl\n"
               "       strata-tokenize MODEL.gguf --bench FILE [--repeat N] [--parse-special]\n";
  return 2;
}

int Main(int argc, char** argv) {
  if (argc < 3) return Usage();
  const std::string model_path = argv[1];
  bool jsonl = false;
  bool parse_special = false;
  bool add_special = true;
  std::string bench_file;
  int repeat = 20;
  std::optional<std::string> text;
  for (int i = 2; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--jsonl") {
      jsonl = true;
    } else if (arg == "--parse-special") {
      parse_special = true;
    } else if (arg == "--no-add-special") {
      add_special = false;
    } else if (arg == "--bench" && i + 1 < argc) {
      bench_file = argv[++i];
    } else if (arg == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (!text) {
      text = std::string(arg);
    } else {
      return Usage();
    }
  }

  auto file = model::GgufFile::Open(model_path);
  if (!file.ok()) {
    std::cerr << "strata-tokenize: " << file.status().ToString() << "\n";
    return 1;
  }
  auto tokenizer = Tokenizer::FromGguf(*file);
  if (!tokenizer.ok()) {
    std::cerr << "strata-tokenize: " << model_path << ": " << tokenizer.status().ToString() << "\n";
    return 1;
  }
  if (jsonl) return RunJsonl(**tokenizer);
  if (!bench_file.empty()) return RunBench(**tokenizer, bench_file, repeat, parse_special);
  if (!text) return Usage();

  EncodeOptions options;
  options.add_special = add_special;
  options.parse_special = parse_special;
  const std::vector<TokenId> ids = (*tokenizer)->Encode(*text, options);
  for (TokenId id : ids) {
    std::cout << id << "\t'" << JsonEscape((*tokenizer)->TokenToPiece(id, true)) << "'\n";
  }
  std::cout << ids.size() << " tokens; decoded: '" << (*tokenizer)->Decode(ids, false) << "'\n";
  return 0;
}

}  // namespace
}  // namespace strata::tokenizer

int main(int argc, char** argv) { return strata::tokenizer::Main(argc, argv); }
