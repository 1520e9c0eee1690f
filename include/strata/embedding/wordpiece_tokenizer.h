// WordPieceTokenizer: BERT's tokenizer, built from a Hugging Face tokenizer.json, giving the
// ids the `tokenizers` library gives (`Tokenizer.encode(text)` with truncation to max_tokens and
// no padding). The pipeline, in the library's order:
//   1. added tokens ([CLS], [SEP], [PAD], [MASK], [UNK], ...) are matched in the raw text,
//      leftmost-longest and case-sensitively, and stand for their ids as they are;
//   2. every other stretch of text is normalized (BertNormalizer), split into words (BERT's
//      pre-tokenizer) and each word into WordPiece pieces: greedy longest match first from the
//      word's start, later pieces spelled with the continuing prefix ("##"); a word longer
//      than max_input_chars_per_word code points, or one with a stretch no vocabulary entry
//      matches, becomes the unknown token as a whole (Wu et al. 2016, §4.1; BERT's
//      tokenization.py WordpieceTokenizer);
//   3. the ids are cut to max_tokens - 2 from the right and wrapped in [CLS] ... [SEP] (the
//      post-processor's single-sequence template).
//
// tokenizer.json must name a WordPiece model, a BertNormalizer (or none), a BertPreTokenizer
// and a TemplateProcessing or BertProcessing post-processor of the [CLS] A [SEP] shape; added
// tokens must be unnormalized and without lstrip/rstrip/single_word. Anything else is
// UNIMPLEMENTED naming the part, so a tokenizer this class would get wrong is refused at load.
// tokenizer.json's own truncation and padding settings are ignored: callers say max_tokens.
//
// Immutable after construction; any thread may call Encode concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "strata/common/status.h"
#include "strata/embedding/bert_normalizer.h"

namespace strata::embedding {

class WordPieceTokenizer {
 public:
  // BERT's position limit, the default cut.
  static constexpr int kDefaultMaxTokens = 512;

  // Reads and checks a tokenizer.json file (NOT_FOUND when absent, INVALID_ARGUMENT naming the
  // file (Load: the path; FromJson: `what`) and the field at fault, UNIMPLEMENTED for a
  // pipeline part this class does not implement).
  static StatusOr<WordPieceTokenizer> Load(const std::string& path);
  static StatusOr<WordPieceTokenizer> FromJson(std::string_view json,
                                               const std::string& what = "tokenizer.json");

  // The ids of `text` (UTF-8): [CLS], at most max_tokens - 2 pieces, [SEP]. INVALID_ARGUMENT
  // when `text` is not valid UTF-8 or max_tokens < 2.
  StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                        int max_tokens = kDefaultMaxTokens) const;

  // Steps 1 and 2 alone: every piece of a valid UTF-8 `text`, neither cut nor wrapped.
  std::vector<int32_t> EncodePieces(std::string_view text) const;

  // The words step 2 hands to WordPiece (normalized and split, UTF-8) for a valid UTF-8 `text`
  // without added tokens in it: what the library's normalizer and pre-tokenizer give.
  std::vector<std::string> NormalizedWords(std::string_view text) const;

  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  // The vocabulary entry of `id` (0 <= id < vocab_size()), e.g. "##ing".
  std::string_view TokenText(int32_t id) const { return tokens_.at(id); }
  std::optional<int32_t> TokenId(std::string_view text) const;

  int32_t cls_id() const { return cls_id_; }
  int32_t sep_id() const { return sep_id_; }
  int32_t unk_id() const { return unk_id_; }
  const BertNormalizer& normalizer() const { return normalizer_; }

 private:
  friend class WordPieceTokenizerLoader;

  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

  struct AddedToken {
    std::string text;
    int32_t id;
  };

  WordPieceTokenizer() = default;

  // The code points of `text` (valid UTF-8), normalized when the tokenizer has a normalizer.
  std::u32string Normalize(std::string_view text) const;
  // Appends the pieces of one stretch of text between added tokens.
  void EncodeStretch(std::string_view text, std::vector<int32_t>* ids) const;
  // Appends the pieces of one word (UTF-8).
  void EncodeWord(std::string_view word, size_t num_chars, std::vector<int32_t>* ids) const;

  Vocab vocab_;
  std::vector<std::string> tokens_;  // by id
  std::vector<AddedToken> added_;    // longest text first
  BertNormalizer normalizer_;
  bool normalize_ = true;  // false when tokenizer.json has no normalizer
  std::string continuing_prefix_ = "##";
  size_t max_input_chars_per_word_ = 100;
  int32_t unk_id_ = 0;
  int32_t cls_id_ = 0;
  int32_t sep_id_ = 0;
};

}  // namespace strata::embedding
