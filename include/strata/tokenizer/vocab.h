// Vocab: the tokenizer data a GGUF file carries (tokenizer.ggml.*), validated once at load.
//
// Immutable after FromGguf; any thread may read it. Token texts are copied out of the map so a
// Vocab may outlive its GgufFile.
#pragma once

#include <cstdint>
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

enum class VocabKind {
  kSpm,  // tokenizer.ggml.model = "llama" (SentencePiece, byte fallback): Gemma, Llama 2, Mistral
  kBpe,  // tokenizer.ggml.model = "gpt2" (byte-level BPE): Llama 3, Qwen2
};

struct Vocab {
  VocabKind kind = VocabKind::kSpm;
  std::string model;        // tokenizer.ggml.model
  std::string pre;          // tokenizer.ggml.pre ("default" when absent)
  std::vector<std::string> tokens;  // [vocab_size] token texts as stored
  std::vector<float> scores;        // [vocab_size], 0 when absent
  std::vector<TokenType> types;     // [vocab_size], kNormal when absent
  std::vector<std::string> merges;  // BPE only: "left right", in rank order
  std::unordered_map<std::string, TokenId> token_to_id;

  TokenId bos_id = kNoToken;
  TokenId eos_id = kNoToken;
  TokenId eot_id = kNoToken;  // end of turn (<end_of_turn> for Gemma), kNoToken when none
  TokenId unk_id = kNoToken;
  TokenId pad_id = kNoToken;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;

  // Reads and validates tokenizer.ggml.* from `file`. Errors name the key at fault (missing
  // tokens, mismatched array lengths, special ids out of range, unknown model kind).
  static StatusOr<Vocab> FromGguf(const model::GgufFile& file);

  size_t size() const { return tokens.size(); }
  bool IsValid(TokenId id) const { return id >= 0 && static_cast<size_t>(id) < tokens.size(); }
  // Control, unknown and unused tokens: never produced from plain text, not rendered by default.
  bool IsControl(TokenId id) const;
  // Ids that end generation: eos, eot and any other end-of-generation tokens the vocab marks.
  std::vector<TokenId> EndOfGenerationIds() const;
};

}  // namespace strata::tokenizer
