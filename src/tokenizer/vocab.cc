#include "strata/tokenizer/vocab.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <limits>
#include <set>
#include <string>

namespace strata::tokenizer {
namespace {

using model::GgufFile;
using model::GgufValue;
using model::GgufValueType;

constexpr std::string_view kModelKey = "tokenizer.ggml.model";
constexpr std::string_view kPreKey = "tokenizer.ggml.pre";
constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kScoresKey = "tokenizer.ggml.scores";
constexpr std::string_view kTypesKey = "tokenizer.ggml.token_type";
constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";
constexpr std::string_view kBosKey = "tokenizer.ggml.bos_token_id";
constexpr std::string_view kEosKey = "tokenizer.ggml.eos_token_id";
constexpr std::string_view kEotKey = "tokenizer.ggml.eot_token_id";
constexpr std::string_view kEomKey = "tokenizer.ggml.eom_token_id";
constexpr std::string_view kUnkKey = "tokenizer.ggml.unknown_token_id";
constexpr std::string_view kPadKey = "tokenizer.ggml.padding_token_id";
constexpr std::string_view kAddBosKey = "tokenizer.ggml.add_bos_token";
constexpr std::string_view kAddEosKey = "tokenizer.ggml.add_eos_token";
constexpr std::string_view kAddSpacePrefixKey = "tokenizer.ggml.add_space_prefix";
constexpr std::string_view kChatTemplateKey = "tokenizer.chat_template";

// Texts llama.cpp recognises at load (llama-vocab.cpp, "auto-detect special tokens by text").
// Where several candidates exist and the id is not given, llama.cpp's choice depends on hash-map
// iteration order; we take the lowest id.
// (\u escapes are UTF-8 in our narrow literals: U+FF5C fullwidth bar, U+2581 lower block.)
constexpr std::string_view kEotTexts[] = {"<|eot_id|>",
                                          "<|im_end|>",
                                          "<|end|>",
                                          "<end_of_turn>",
                                          "<|endoftext|>",
                                          "<|end_of_text|>",
                                          "<EOT>",
                                          "_<EOT>",
                                          "[EOT]",
                                          "<\uff5cend\u2581of\u2581sentence\uff5c>",
                                          "<end_of_utterance>"};
constexpr std::string_view kEomTexts[] = {"<|eom_id|>"};
constexpr std::string_view kFimPreTexts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",    "<\uff5cfim\u2581begin\uff5c>",
    "<PRE>",          "\u2581<PRE>",  "<|code_prefix|>", "<|prefix|>"};
constexpr std::string_view kFimSufTexts[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",    "<\uff5cfim\u2581hole\uff5c>",
    "<SUF>",          "\u2581<SUF>",  "<|code_suffix|>", "<|suffix|>"};
constexpr std::string_view kFimMidTexts[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>",    "<\uff5cfim\u2581end\uff5c>",
    "<MID>",          "\u2581<MID>",  "<|code_middle|>", "<|middle|>"};
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
                                             "[PAD]"};
constexpr std::string_view kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                             "<REPO>", "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>"};
constexpr std::string_view kEogTexts[] = {"<|eot_id|>",
                                          "<|im_end|>",
                                          "<|end|>",
                                          "<|return|>",
                                          "<|call|>",
                                          "<|flush|>",
                                          "<|calls|>",
                                          "<end_of_turn>",
                                          "<|endoftext|>",
                                          "</s>",
                                          "<|eom_id|>",
                                          "<EOT>",
                                          "_<EOT>",
                                          "[EOT]",
                                          "[EOS]",
                                          "<|end_of_text|>",
                                          "<end_of_utterance>",
                                          "<eos>",
                                          "<turn|>",
                                          "<|tool_response>",
                                          "<\uff5cend\u2581of\u2581sentence\uff5c>",
                                          "[e~["};
// gpt-oss channel markers, which llama.cpp always renders (forced to user-defined).
constexpr std::string_view kForcedUserDefinedTexts[] = {"<|channel|>", "<|message|>", "<|start|>",
                                                        "<|constrain|>"};

// BPE pre-tokenizers for which llama.cpp adds BOS unless the file says otherwise.
constexpr std::string_view kBpePresWithBos[] = {"llama3",       "llama-v3", "llama-bpe", "falcon3",
                                                "falcon-h1",    "pixtral",  "midm-2.0",  "lfm2",
                                                "jina-v5-nano", "tekken",   "chameleon"};

uint32_t AttrForType(TokenType type) {
  switch (type) {
    case TokenType::kNormal:
      return token_attr::kNormal;
    case TokenType::kUnknown:
      return token_attr::kUnknown;
    case TokenType::kControl:
      return token_attr::kControl;
    case TokenType::kUserDefined:
      return token_attr::kUserDefined;
    case TokenType::kUnused:
      return token_attr::kUnused;
    case TokenType::kByte:
      return token_attr::kByte;
    case TokenType::kUndefined:
      return token_attr::kUndefined;
  }
  return token_attr::kUndefined;
}

TokenType TypeFromCode(int64_t code) {
  if (code < 0 || code > static_cast<int64_t>(TokenType::kByte)) return TokenType::kUndefined;
  return static_cast<TokenType>(code);
}

bool Contains(std::string_view haystack, std::initializer_list<std::string_view> needles) {
  for (std::string_view needle : needles) {
    if (haystack.find(needle) != std::string_view::npos) return true;
  }
  return false;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  if (s.size() > 40) out += "...";
  return out;
}

Status WrongType(std::string_view key, std::string_view expected, const GgufValue& value) {
  std::string got(model::GgufValueTypeName(value.type()));
  if (value.is_array()) got += " of " + std::string(model::GgufValueTypeName(value.array_type()));
  return InvalidArgumentError(std::string(key) + " must be " + std::string(expected) + ", got " +
                              got);
}

// An optional string key; `*out` is left alone when absent.
Status ReadOptionalString(const GgufFile& file, std::string_view key, std::string* out) {
  const GgufValue* v = file.Find(key);
  if (v == nullptr) return OkStatus();
  if (v->type() != GgufValueType::kString) return WrongType(key, "a string", *v);
  *out = std::string(v->as_string());
  return OkStatus();
}

Status ReadOptionalBool(const GgufFile& file, std::string_view key, bool* out) {
  const GgufValue* v = file.Find(key);
  if (v == nullptr) return OkStatus();
  if (v->type() != GgufValueType::kBool) return WrongType(key, "a bool", *v);
  *out = v->as_bool();
  return OkStatus();
}

bool IsSignedType(GgufValueType t) {
  return t == GgufValueType::kInt8 || t == GgufValueType::kInt16 || t == GgufValueType::kInt32 ||
         t == GgufValueType::kInt64;
}

// An optional special-token id; negative means "none". Range against the vocab is checked by
// Finalize.
Status ReadOptionalId(const GgufFile& file, std::string_view key, TokenId* out) {
  const GgufValue* v = file.Find(key);
  if (v == nullptr) return OkStatus();
  if (!v->is_integer() || v->type() == GgufValueType::kBool) {
    return WrongType(key, "an integer", *v);
  }
  if (IsSignedType(v->type())) {
    const int64_t id = v->as_int();
    if (id < 0) {
      *out = kNoToken;
      return OkStatus();
    }
    if (id > std::numeric_limits<TokenId>::max()) {
      return InvalidArgumentError(std::string(key) + " = " + std::to_string(id) +
                                  " is out of range");
    }
    *out = static_cast<TokenId>(id);
    return OkStatus();
  }
  const uint64_t id = v->as_uint();
  if (id > static_cast<uint64_t>(std::numeric_limits<TokenId>::max())) {
    return InvalidArgumentError(std::string(key) + " = " + std::to_string(id) + " is out of range");
  }
  *out = static_cast<TokenId>(id);
  return OkStatus();
}

// A numeric array key with at least `n` elements; the first `n` are returned through `read`.
template <typename Fn>
Status ReadNumericArray(const GgufFile& file, std::string_view key, size_t n, bool want_float,
                        Fn read) {
  const GgufValue* v = file.Find(key);
  if (v == nullptr) return OkStatus();
  if (!v->is_array()) return WrongType(key, "an array", *v);
  const GgufValueType elem = v->array_type();
  const bool is_float = elem == GgufValueType::kFloat32 || elem == GgufValueType::kFloat64;
  const bool is_int = !is_float && elem != GgufValueType::kString &&
                      elem != GgufValueType::kArray && elem != GgufValueType::kBool;
  if (!is_int && !(want_float && is_float)) {
    return WrongType(key, want_float ? "an array of float32 or int32" : "an array of int32", *v);
  }
  // llama.cpp accepts arrays longer than the token list (and ignores the rest); shorter is an
  // error.
  if (v->array_size() < n) {
    return InvalidArgumentError(std::string(key) + " has " + std::to_string(v->array_size()) +
                                " entries but " + std::string(kTokensKey) + " has " +
                                std::to_string(n));
  }
  for (size_t i = 0; i < n; ++i) {
    read(i, is_float ? v->ArrayFloat(i) : static_cast<double>(v->ArrayInt(i)));
  }
  return OkStatus();
}

template <size_t N>
bool InList(std::string_view text, const std::string_view (&list)[N]) {
  return std::find(std::begin(list), std::end(list), text) != std::end(list);
}

// Lowest id whose text is in `list`, kNoToken when none.
template <size_t N>
TokenId FindFirstOf(const Vocab& vocab, const std::string_view (&list)[N]) {
  TokenId best = kNoToken;
  for (std::string_view text : list) {
    const TokenId id = vocab.Find(text);
    if (id != kNoToken && (best == kNoToken || id < best)) best = id;
  }
  return best;
}

}  // namespace

TokenId Vocab::Find(std::string_view text) const {
  auto it = token_to_id.find(text);
  return it == token_to_id.end() ? kNoToken : it->second;
}

bool Vocab::IsControl(TokenId id) const {
  if (!IsValid(id)) return false;
  const uint32_t a = attrs[id];
  return a == token_attr::kUndefined ||
         (a & (token_attr::kControl | token_attr::kUnknown | token_attr::kUnused)) != 0;
}

bool Vocab::IsEndOfGeneration(TokenId id) const {
  return std::binary_search(eog_ids.begin(), eog_ids.end(), id);
}

Status Vocab::Finalize(std::string_view general_name, std::string_view architecture) {
  const size_t n = tokens.size();
  if (n == 0) return InvalidArgumentError(std::string(kTokensKey) + " is empty");
  if (n > static_cast<size_t>(std::numeric_limits<TokenId>::max())) {
    return InvalidArgumentError(std::string(kTokensKey) + " has " + std::to_string(n) +
                                " tokens, more than token ids can address");
  }
  if (scores.empty()) scores.assign(n, 0.0f);
  if (types.empty()) types.assign(n, TokenType::kNormal);
  if (scores.size() != n) {
    return InvalidArgumentError(std::string(kScoresKey) + " has " + std::to_string(scores.size()) +
                                " entries but " + std::string(kTokensKey) + " has " +
                                std::to_string(n));
  }
  if (types.size() != n) {
    return InvalidArgumentError(std::string(kTypesKey) + " has " + std::to_string(types.size()) +
                                " entries but " + std::string(kTokensKey) + " has " +
                                std::to_string(n));
  }

  token_to_id.clear();
  token_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    // llama.cpp renames empty texts so that they stay addressable and distinct.
    if (tokens[i].empty()) tokens[i] = "[EMPTY_" + std::to_string(i) + "]";
    auto [it, inserted] = token_to_id.emplace(tokens[i], static_cast<TokenId>(i));
    if (!inserted) {
      return InvalidArgumentError(std::string(kTokensKey) + " holds '" + Printable(tokens[i]) +
                                  "' twice (ids " + std::to_string(it->second) + " and " +
                                  std::to_string(i) + ")");
    }
  }

  const std::pair<std::string_view, TokenId> ids[] = {{kBosKey, bos_id}, {kEosKey, eos_id},
                                                      {kEotKey, eot_id}, {kEomKey, eom_id},
                                                      {kUnkKey, unk_id}, {kPadKey, pad_id}};
  for (const auto& [key, id] : ids) {
    if (id != kNoToken && !IsValid(id)) {
      return InvalidArgumentError(std::string(key) + " = " + std::to_string(id) +
                                  " is out of range for a vocab of " + std::to_string(n) +
                                  " tokens");
    }
  }
  if (add_bos && bos_id == kNoToken) {
    return InvalidArgumentError(std::string(kAddBosKey) + " is set but there is no " +
                                std::string(kBosKey));
  }
  if (add_eos && eos_id == kNoToken) {
    return InvalidArgumentError(std::string(kAddEosKey) + " is set but there is no " +
                                std::string(kEosKey));
  }

  attrs.assign(n, token_attr::kUndefined);
  for (size_t i = 0; i < n; ++i) {
    attrs[i] = AttrForType(types[i]);
    if (types[i] == TokenType::kByte) {
      const std::string& t = tokens[i];
      if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>' || HexValue(t[3]) < 0 ||
          HexValue(t[4]) < 0) {
        return InvalidArgumentError(std::string(kTypesKey) + " marks token " + std::to_string(i) +
                                    " ('" + Printable(t) +
                                    "') as a byte token, but its text is not <0xXX>");
      }
    }
  }

  // Special tokens llama.cpp finds by text when their ids are not given; a found token that is
  // not control-typed is made control, as llama.cpp does.
  auto force_control = [&](TokenId id) {
    if (id != kNoToken) attrs[id] |= token_attr::kControl;
  };
  if (eot_id == kNoToken) {
    eot_id = FindFirstOf(*this, kEotTexts);
    force_control(eot_id);
  }
  if (eom_id == kNoToken) {
    eom_id = FindFirstOf(*this, kEomTexts);
    force_control(eom_id);
  }
  force_control(FindFirstOf(*this, kFimPreTexts));
  force_control(FindFirstOf(*this, kFimSufTexts));
  force_control(FindFirstOf(*this, kFimMidTexts));
  const TokenId fim_pad = FindFirstOf(*this, kFimPadTexts);
  const TokenId fim_rep = FindFirstOf(*this, kFimRepTexts);
  const TokenId fim_sep = FindFirstOf(*this, kFimSepTexts);
  force_control(fim_pad);
  force_control(fim_rep);
  force_control(fim_sep);

  // Control tokens named "unused..." are unused.
  for (size_t i = 0; i < n; ++i) {
    if ((attrs[i] & token_attr::kControl) && tokens[i].find("unused") != std::string::npos) {
      attrs[i] |= token_attr::kUnused;
    }
  }

  std::set<TokenId> eog;
  for (TokenId id : {fim_pad, fim_rep, fim_sep}) {
    if (id != kNoToken) eog.insert(id);
  }
  for (std::string_view text : kEogTexts) {
    const TokenId id = Find(text);
    if (id == kNoToken) continue;
    eog.insert(id);
    force_control(id);
  }
  for (std::string_view text : kForcedUserDefinedTexts) {
    const TokenId id = Find(text);
    if (id != kNoToken) attrs[id] = token_attr::kUserDefined;
  }
  for (TokenId id : {eos_id, eot_id, eom_id}) {
    if (id != kNoToken) eog.insert(id);
  }
  {
    // o200k_harmony / solar-open: "<|end|>" ends a message, not the generation.
    bool has_return = false, has_call = false, has_flush = false;
    TokenId end_id = kNoToken;
    for (TokenId id : eog) {
      const std::string& t = tokens[id];
      if (t == "<|return|>") has_return = true;
      if (t == "<|call|>" || t == "<|calls|>") has_call = true;
      if (t == "<|flush|>") has_flush = true;
      if (t == "<|end|>") end_id = id;
    }
    if (end_id != kNoToken && has_call && (has_return || has_flush)) {
      eog.erase(end_id);
      attrs[end_id] = token_attr::kUserDefined;
    }
    // gemma4 and plamo: "</s>" is an ordinary token there.
    bool has_normal_s_marker = false;
    TokenId s_id = kNoToken;
    for (TokenId id : eog) {
      const std::string& t = tokens[id];
      if (t == "<|tool_response>" || t == "<|plamo:eos|>") has_normal_s_marker = true;
      if (t == "</s>") s_id = id;
    }
    if (has_normal_s_marker && s_id != kNoToken) {
      eog.erase(s_id);
      attrs[s_id] = token_attr::kNormal;
    }
  }
  eog_ids.assign(eog.begin(), eog.end());

  // Per-model whitespace stripping around special tokens (llama.cpp keys these on names).
  std::string lower_name(general_name);
  std::transform(lower_name.begin(), lower_name.end(), lower_name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto set_attr = [&](std::string_view text, uint32_t bit, bool value) {
    const TokenId id = Find(text);
    if (id == kNoToken) return;
    attrs[id] = value ? (attrs[id] | bit) : (attrs[id] & ~bit);
  };
  if (Contains(pre, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) ||
      Contains(architecture, {"nomic-bert-moe", "jina-bert-v3"})) {
    set_attr("<mask>", token_attr::kLstrip, true);
  } else if (Contains(lower_name, {"phi-3", "phi3"})) {
    constexpr uint32_t kSpecial =
        token_attr::kControl | token_attr::kUserDefined | token_attr::kUnknown;
    for (size_t i = 0; i < n; ++i) {
      if (attrs[i] & kSpecial) attrs[i] |= token_attr::kRstrip;
    }
    set_attr("</s>", token_attr::kRstrip, true);
    for (std::string_view text : {"<unk>", "<s>", "<|endoftext|>"}) {
      set_attr(text, token_attr::kRstrip, false);
    }
  } else if (Contains(lower_name, {"modern-bert"})) {
    set_attr("[MASK]", token_attr::kLstrip, true);
  }

  static constexpr char kHexUpper[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char name[6] = {'<', '0', 'x', kHexUpper[b >> 4], kHexUpper[b & 15], '>'};
    TokenId id = Find(std::string_view(name, 6));
    if (id == kNoToken) id = Find(std::string(1, static_cast<char>(b)));
    byte_to_id[b] = id;
  }
  return OkStatus();
}

StatusOr<Vocab> Vocab::FromGguf(const model::GgufFile& file) {
  Vocab vocab;
  const GgufValue* model_value = file.Find(kModelKey);
  if (model_value == nullptr) {
    return NotFoundError(std::string(kModelKey) + " is missing: the file carries no tokenizer");
  }
  if (model_value->type() != GgufValueType::kString) {
    return WrongType(kModelKey, "a string", *model_value);
  }
  vocab.model = std::string(model_value->as_string());
  if (vocab.model == "llama") {
    vocab.kind = VocabKind::kSpm;
  } else if (vocab.model == "gpt2") {
    vocab.kind = VocabKind::kBpe;
  } else {
    return UnimplementedError(std::string(kModelKey) + " = '" + Printable(vocab.model) +
                              "' is not supported (supported: 'llama' for SentencePiece, "
                              "'gpt2' for byte-level BPE)");
  }
  vocab.pre = "default";
  STRATA_RETURN_IF_ERROR(ReadOptionalString(file, kPreKey, &vocab.pre));

  const GgufValue* tokens = file.Find(kTokensKey);
  if (tokens == nullptr) return NotFoundError(std::string(kTokensKey) + " is missing");
  if (!tokens->is_array() || tokens->array_type() != GgufValueType::kString) {
    return WrongType(kTokensKey, "an array of strings", *tokens);
  }
  const size_t n = tokens->array_strings().size();
  if (n == 0) return InvalidArgumentError(std::string(kTokensKey) + " is empty");
  if (n > static_cast<size_t>(std::numeric_limits<TokenId>::max())) {
    return InvalidArgumentError(std::string(kTokensKey) + " has too many tokens");
  }
  vocab.tokens.reserve(n);
  for (std::string_view t : tokens->array_strings()) vocab.tokens.emplace_back(t);

  vocab.scores.assign(n, 0.0f);
  STRATA_RETURN_IF_ERROR(
      ReadNumericArray(file, kScoresKey, n, /*want_float=*/true,
                       [&](size_t i, double v) { vocab.scores[i] = static_cast<float>(v); }));
  vocab.types.assign(n, TokenType::kNormal);
  STRATA_RETURN_IF_ERROR(ReadNumericArray(
      file, kTypesKey, n, /*want_float=*/false,
      [&](size_t i, double v) { vocab.types[i] = TypeFromCode(static_cast<int64_t>(v)); }));

  if (const GgufValue* merges = file.Find(kMergesKey); merges != nullptr) {
    if (!merges->is_array() || merges->array_type() != GgufValueType::kString) {
      return WrongType(kMergesKey, "an array of strings", *merges);
    }
    vocab.merges.reserve(merges->array_strings().size());
    for (std::string_view m : merges->array_strings()) vocab.merges.emplace_back(m);
  } else if (vocab.kind == VocabKind::kBpe) {
    return NotFoundError(std::string(kMergesKey) + " is missing (required by " +
                         std::string(kModelKey) + " = 'gpt2')");
  }

  // llama.cpp's defaults per tokenizer model, kept only when they address a token.
  auto default_id = [&](TokenId id) { return static_cast<size_t>(id) < n ? id : kNoToken; };
  if (vocab.kind == VocabKind::kSpm) {
    vocab.bos_id = default_id(1);
    vocab.eos_id = default_id(2);
    vocab.unk_id = default_id(0);
    vocab.add_bos = true;
    vocab.add_eos = false;
    vocab.add_space_prefix = true;
  } else {
    vocab.bos_id = default_id(11);
    vocab.eos_id = default_id(11);
    vocab.add_bos = InList(vocab.pre, kBpePresWithBos);
    vocab.add_eos = false;
    vocab.add_space_prefix = false;
  }
  STRATA_RETURN_IF_ERROR(ReadOptionalId(file, kBosKey, &vocab.bos_id));
  STRATA_RETURN_IF_ERROR(ReadOptionalId(file, kEosKey, &vocab.eos_id));
  STRATA_RETURN_IF_ERROR(ReadOptionalId(file, kEotKey, &vocab.eot_id));
  STRATA_RETURN_IF_ERROR(ReadOptionalId(file, kEomKey, &vocab.eom_id));
  STRATA_RETURN_IF_ERROR(ReadOptionalId(file, kUnkKey, &vocab.unk_id));
  STRATA_RETURN_IF_ERROR(ReadOptionalId(file, kPadKey, &vocab.pad_id));
  STRATA_RETURN_IF_ERROR(ReadOptionalBool(file, kAddBosKey, &vocab.add_bos));
  STRATA_RETURN_IF_ERROR(ReadOptionalBool(file, kAddEosKey, &vocab.add_eos));
  STRATA_RETURN_IF_ERROR(ReadOptionalBool(file, kAddSpacePrefixKey, &vocab.add_space_prefix));
  STRATA_RETURN_IF_ERROR(ReadOptionalString(file, kChatTemplateKey, &vocab.chat_template));

  std::string general_name;
  std::string architecture;
  STRATA_RETURN_IF_ERROR(ReadOptionalString(file, "general.name", &general_name));
  STRATA_RETURN_IF_ERROR(ReadOptionalString(file, "general.architecture", &architecture));
  STRATA_RETURN_IF_ERROR(vocab.Finalize(general_name, architecture));
  return vocab;
}

}  // namespace strata::tokenizer
