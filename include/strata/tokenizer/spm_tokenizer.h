// SpmTokenizer: SentencePiece-style BPE by piece score with byte fallback
// (tokenizer.ggml.model = "llama": Gemma, Llama 2, Mistral), id-for-id identical to llama.cpp's
// llm_tokenizer_spm on the same vocab.
//
// Encoding, per llama.cpp:
//   1. SpecialTokenPartitioner splits the text into raw fragments and special tokens.
//   2. Each raw fragment gets a leading space when add_space_prefix is set and it is the first
//      fragment or follows a special token; spaces become U+2581 ("▁").
//   3. The fragment is cut into UTF-8 characters (the lead byte's length, clamped to the end;
//      no validation), then adjacent symbols are merged repeatedly, best first: the pair whose
//      concatenation is a vocab token with the highest score, ties to the leftmost. Any vocab
//      token qualifies, whatever its type.
//   4. A final symbol that is not a token is emitted byte by byte as <0xXX> tokens (or the
//      one-byte token); a byte with neither becomes the unknown token, or is dropped when the
//      vocab has none (llama.cpp would fail there).
//   5. BOS/EOS are added when options.add_special and the vocab asks for them.
//
// Immutable after construction; any thread may call any method concurrently.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/common/status.h"
#include "strata/tokenizer/special_tokens.h"
#include "strata/tokenizer/tokenizer.h"
#include "strata/tokenizer/vocab.h"

namespace strata::tokenizer {

class SpmTokenizer final : public Tokenizer {
 public:
  // INVALID_ARGUMENT when the vocab is not an SPM vocab.
  static StatusOr<std::unique_ptr<Tokenizer>> Create(Vocab vocab);

  std::vector<TokenId> Encode(std::string_view text, const EncodeOptions& options) const override;
  std::string TokenToPiece(TokenId id, bool render_special) const override;
  // llama.cpp's llama_detokenize(remove_special = false, unparse_special = render_special):
  // pieces concatenated; with add_space_prefix, one leading space of the first token's piece
  // is dropped. Invalid ids contribute nothing.
  std::string Decode(std::span<const TokenId> ids, bool render_special) const override;

  // Appends the tokens of one raw fragment (no special-token parsing, no BOS/EOS, no space
  // prefix): steps 3 and 4 above on `text` with spaces already escaped or not, as given.
  void EncodeEscaped(std::string_view escaped_text, std::vector<TokenId>* out) const;

 private:
  explicit SpmTokenizer(Vocab vocab);

  SpecialTokenPartitioner partitioner_;
  // Piece of every token as rendered with render_special = true (llama.cpp's piece cache).
  std::vector<std::string> pieces_;
};

}  // namespace strata::tokenizer
