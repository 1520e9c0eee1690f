// Tokenizer: text <-> token ids, with the same results as llama.cpp on the same GGUF vocab.
//
// Built once per model from its GGUF; immutable afterwards, so any thread may Encode/Decode
// concurrently. Implementations: SpmTokenizer (tokenizer.ggml.model = "llama") and
// BpeTokenizer (tokenizer.ggml.model = "gpt2" with the pre-tokenizer named by
// tokenizer.ggml.pre).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/common/status.h"
#include "strata/model/gguf_file.h"
#include "strata/tokenizer/vocab.h"

namespace strata::tokenizer {

struct EncodeOptions {
  // Add BOS/EOS as the vocab asks (tokenizer.ggml.add_bos_token / add_eos_token).
  bool add_special = true;
  // Recognise special-token text ("<start_of_turn>") in the input as the special token; when
  // false it is tokenized as plain text. User-defined tokens are always recognised, as in
  // llama.cpp.
  bool parse_special = false;
};

class Tokenizer {
 public:
  // Builds the tokenizer the vocab names. UNIMPLEMENTED for tokenizer models or BPE
  // pre-tokenizers we do not support (the message names them).
  static StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const model::GgufFile& file);
  static StatusOr<std::unique_ptr<Tokenizer>> FromVocab(Vocab vocab);

  virtual ~Tokenizer() = default;

  // Never fails: any byte string (invalid UTF-8 included) encodes to some id sequence.
  virtual std::vector<TokenId> Encode(std::string_view text,
                                      const EncodeOptions& options) const = 0;

  // The bytes token `id` stands for (byte tokens give their single byte, which may be a
  // partial UTF-8 sequence). Control tokens give "" unless `render_special`. Invalid ids give
  // "".
  virtual std::string TokenToPiece(TokenId id, bool render_special) const = 0;

  // Concatenated pieces, with the SPM leading-space rule applied as llama.cpp's detokenizer
  // does. The result may hold invalid UTF-8 when the ids do.
  virtual std::string Decode(std::span<const TokenId> ids, bool render_special) const = 0;

  const Vocab& vocab() const { return vocab_; }

  // The most input bytes one token can stand for: the longest vocab entry. No token stands for
  // more bytes than its entry holds (SPM writes a space as the 3-byte U+2581, byte-level BPE
  // writes a byte as one or two, a byte token "<0xAB>" stands for one byte) and neither
  // tokenizer shrinks its input before matching, so a text of n bytes encodes to at least
  // n / max_token_bytes() tokens: a bound known before encoding.
  size_t max_token_bytes() const { return max_token_bytes_; }

 protected:
  explicit Tokenizer(Vocab vocab);
  Vocab vocab_;

 private:
  size_t max_token_bytes_ = 1;
};

}  // namespace strata::tokenizer
