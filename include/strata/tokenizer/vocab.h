// Vocab: the tokenizer data a GGUF file carries (tokenizer.ggml.*), validated once at load.
//
// Immutable after FromGguf; any thread may read it. Token texts are copied out of the map so a
// Vocab may outlive its GgufFile.
//
// Besides the stored fields, FromGguf derives what llama.cpp derives at load, so that the
// tokenizers built on top agree with it id for id: per-token attribute bits (`attrs`, with the
// same adjustments llama.cpp applies by token text), the end-of-generation set and the
// byte-fallback table.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "strata/common/status.h"
#include "strata/model/gguf_file.h"

namespace strata::tokenizer {

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Token attribute bits: the same values as llama.cpp's llama_token_attr. A token has exactly
// one type but may gain extra bits at load (an end-of-turn token stored as user-defined is also
// marked control; phi-3 special tokens strip following whitespace).
namespace token_attr {
inline constexpr uint32_t kUndefined = 0;
inline constexpr uint32_t kUnknown = 1u << 0;
inline constexpr uint32_t kUnused = 1u << 1;
inline constexpr uint32_t kNormal = 1u << 2;
inline constexpr uint32_t kControl = 1u << 3;
inline constexpr uint32_t kUserDefined = 1u << 4;
inline constexpr uint32_t kByte = 1u << 5;
inline constexpr uint32_t kNormalized = 1u << 6;
inline constexpr uint32_t kLstrip = 1u << 7;  // a match swallows the whitespace before it
inline constexpr uint32_t kRstrip = 1u << 8;  // a match swallows the whitespace after it
inline constexpr uint32_t kSingleWord = 1u << 9;
}  // namespace token_attr

enum class VocabKind {
  kSpm,  // tokenizer.ggml.model = "llama" (SentencePiece, byte fallback): Gemma, Llama 2, Mistral
  kBpe,  // tokenizer.ggml.model = "gpt2" (byte-level BPE): Llama 3, Qwen2
};

// Hash for std::string keys that also accepts std::string_view, so lookups need no copy.
struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenTextMap = std::unordered_map<std::string, TokenId, StringViewHash, std::equal_to<>>;

struct Vocab {
  VocabKind kind = VocabKind::kSpm;
  std::string model;                // tokenizer.ggml.model
  std::string pre;                  // tokenizer.ggml.pre ("default" when absent)
  std::vector<std::string> tokens;  // [vocab_size] token texts as stored ("" becomes "[EMPTY_i]")
  std::vector<float> scores;        // [vocab_size], 0 when absent
  std::vector<TokenType> types;     // [vocab_size], kNormal when absent; unknown codes kUndefined
  std::vector<uint32_t> attrs;      // [vocab_size] token_attr bits, derived as described above
  std::vector<std::string> merges;  // BPE only: "left right", in rank order
  TokenTextMap token_to_id;         // token text -> id (heterogeneous lookup by string_view)

  TokenId bos_id = kNoToken;
  TokenId eos_id = kNoToken;
  TokenId eot_id = kNoToken;  // end of turn (<end_of_turn> for Gemma), kNoToken when none
  TokenId eom_id = kNoToken;  // end of message (<|eom_id|> for Llama 3.1), kNoToken when none
  TokenId unk_id = kNoToken;
  TokenId pad_id = kNoToken;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;

  // Ids that end generation, ascending: eos, eot, eom and the tokens llama.cpp recognises by
  // text ("<end_of_turn>", "<|im_end|>", "<|eot_id|>", ...).
  std::vector<TokenId> eog_ids;

  // SentencePiece byte fallback: the id of "<0xXX>" for each byte value (or, failing that, of
  // the one-byte token text), kNoToken when the vocab has neither.
  std::array<TokenId, 256> byte_to_id{};

  // tokenizer.chat_template, "" when absent.
  std::string chat_template;

  // Reads and validates tokenizer.ggml.* from `file`. Errors name the key at fault (missing
  // tokens, mismatched array lengths, special ids out of range, duplicate token texts,
  // malformed byte tokens). UNIMPLEMENTED for a tokenizer.ggml.model other than "llama" and
  // "gpt2". Defaults for absent keys are llama.cpp's (SPM: bos 1, eos 2, unk 0, add_bos true,
  // add_space_prefix true; BPE: bos = eos = 11, add_bos per pre-tokenizer); a negative special
  // id means "none".
  static StatusOr<Vocab> FromGguf(const model::GgufFile& file);

  size_t size() const { return tokens.size(); }
  bool IsValid(TokenId id) const { return id >= 0 && static_cast<size_t>(id) < tokens.size(); }
  bool HasAttr(TokenId id, uint32_t bits) const { return IsValid(id) && (attrs[id] & bits) != 0; }
  // kNoToken when `text` is not a token.
  TokenId Find(std::string_view text) const;
  // Control, unknown, unused and undefined-type tokens: not rendered by default (unused and
  // undefined ones not even with render_special).
  bool IsControl(TokenId id) const;
  // Ids that end generation: eos, eot and any other end-of-generation tokens the vocab marks.
  std::vector<TokenId> EndOfGenerationIds() const { return eog_ids; }
  bool IsEndOfGeneration(TokenId id) const;

  // Validates the fields and derives the rest, as FromGguf does after reading the keys: checks
  // array lengths, duplicate and empty texts (empty becomes "[EMPTY_<i>]"), special ids and byte
  // tokens, then builds `token_to_id`, `attrs`, `eot_id`/`eom_id` (when unset), `eog_ids` and
  // `byte_to_id`. For vocabs built in code (tests, fuzzers): fill `tokens` (and optionally
  // scores, types, special ids, flags) and call this. Errors name the GGUF key of the field.
  // `general_name` and `architecture` select llama.cpp's per-model attribute tweaks (phi-3 and a
  // few BERT variants).
  Status Finalize(std::string_view general_name = "", std::string_view architecture = "");
};

}  // namespace strata::tokenizer
