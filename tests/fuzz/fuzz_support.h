// What the network-surface fuzz targets share: a hard invariant check and a small SPM tokenizer
// built in memory (byte tokens, a few pieces, Gemma's turn markers), so that request translation
// runs end to end without a model file.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "strata/tokenizer/tokenizer.h"
#include "strata/tokenizer/vocab.h"

namespace strata::fuzz {

inline void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz: invariant violated: %s\n", what);
    std::abort();
  }
}

inline const tokenizer::Tokenizer& SmallTokenizer() {
  static const tokenizer::Tokenizer* const tok = [] {
    using tokenizer::TokenType;
    tokenizer::Vocab v;
    v.kind = tokenizer::VocabKind::kSpm;
    v.model = "llama";
    auto add = [&v](std::string text, float score, TokenType type) {
      v.tokens.push_back(std::move(text));
      v.scores.push_back(score);
      v.types.push_back(type);
    };
    add("<unk>", 0, TokenType::kUnknown);
    add("<bos>", 0, TokenType::kControl);
    add("<eos>", 0, TokenType::kControl);
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0, TokenType::kByte);
    }
    float score = -1;
    for (const char* p : {"a", "e", "h", "l", "o", "t", "he", "ll", "hello", "the", "user", "model",
                          "\xe2\x96\x81", "\xe2\x96\x81the"}) {
      add(p, score -= 0.5f, TokenType::kNormal);
    }
    add("<start_of_turn>", 0, TokenType::kControl);
    add("<end_of_turn>", 0, TokenType::kControl);
    v.unk_id = 0;
    v.bos_id = 1;
    v.eos_id = 2;
    v.add_bos = true;
    v.add_space_prefix = true;
    Require(v.Finalize().ok(), "the fuzz vocab finalizes");
    auto made = tokenizer::Tokenizer::FromVocab(std::move(v));
    Require(made.ok(), "the fuzz tokenizer builds");
    return made->release();
  }();
  return *tok;
}

}  // namespace strata::fuzz
