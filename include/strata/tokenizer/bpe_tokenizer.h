// Byte-level BPE (tokenizer.ggml.model = "gpt2"): Llama 3, Qwen2, GPT-2 style vocabularies.
//
// Encode follows llama.cpp's llm_tokenizer_bpe_session step for step, so ids match it exactly:
//   1. special and user-defined tokens are split out of the text first (special_tokens.h);
//   2. each remaining fragment is decoded as UTF-8 (unicode.h; invalid bytes become U+FFFD) and
//      split into words by the pre-tokenizer that tokenizer.ggml.pre names (pre_tokenizer.h);
//   3. each word is re-encoded as UTF-8 and spelled in GPT-2's byte alphabet; with llama3's
//      ignore_merges a word that is itself a token is emitted as is;
//   4. otherwise the word's characters are merged pairwise, lowest merge rank first (leftmost
//      on ties), as tokenizer.ggml.merges ranks them (Sennrich et al. 2016, byte-level as in
//      GPT-2, Radford et al. 2019);
//   5. a merged symbol that is not a token falls back to the tokens of its single bytes, and
//      bytes without a token are dropped (as llama.cpp does).
// Decode concatenates TokenToPiece: normal tokens map back through the byte alphabet,
// control/user-defined tokens give their text, byte tokens ("<0xXX>") their byte. It does not
// apply llama_detokenize's clean_up_tokenization_spaces pass (" ," -> ","), which loses text;
// llama.cpp's server streams pieces without it too.
//
// The tokenizer is immutable after construction; Encode/Decode may run on any thread.
#pragma once

#include <memory>

#include "strata/common/status.h"
#include "strata/tokenizer/tokenizer.h"
#include "strata/tokenizer/vocab.h"

namespace strata::tokenizer {

// Builds the BPE tokenizer for `vocab` (kind kBpe). UNIMPLEMENTED when tokenizer.ggml.pre names
// a pre-tokenizer we do not support; the message names it and lists the supported ones.
// INVALID_ARGUMENT when the vocab is not a BPE vocab.
StatusOr<std::unique_ptr<Tokenizer>> MakeBpeTokenizer(Vocab vocab);

}  // namespace strata::tokenizer
