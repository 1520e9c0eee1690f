#include "strata/tokenizer/tokenizer.h"

#include <algorithm>
#include <utility>

#include "strata/tokenizer/bpe_tokenizer.h"
#include "strata/tokenizer/spm_tokenizer.h"

namespace strata::tokenizer {

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const model::GgufFile& file) {
  STRATA_ASSIGN_OR_RETURN(Vocab vocab, Vocab::FromGguf(file));
  return FromVocab(std::move(vocab));
}

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
  for (const std::string& token : vocab_.tokens) {
    max_token_bytes_ = std::max(max_token_bytes_, token.size());
  }
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromVocab(Vocab vocab) {
  switch (vocab.kind) {
    case VocabKind::kSpm:
      return SpmTokenizer::Create(std::move(vocab));
    case VocabKind::kBpe:
      return MakeBpeTokenizer(std::move(vocab));
  }
  return InvalidArgumentError("unknown vocab kind");
}

}  // namespace strata::tokenizer
