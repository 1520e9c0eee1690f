// Small hand-built vocabs for tokenizer unit tests (no model file needed).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "strata/tokenizer/vocab.h"

namespace strata::tokenizer::testing {

struct TokenSpec {
  std::string text;
  float score = 0.0f;
  TokenType type = TokenType::kNormal;
};

// An SPM vocab: <unk> (0), <s> (1, BOS), </s> (2, EOS), then the 256 byte tokens <0x00>..<0xFF>
// when `with_bytes` (ids 3..258), then `specs` in order. add_bos on, add_space_prefix off
// unless asked. Finalized; the test fails when Finalize does.
inline Vocab MakeSpmVocab(const std::vector<TokenSpec>& specs, bool with_bytes = true,
                          bool add_space_prefix = false) {
  Vocab v;
  v.kind = VocabKind::kSpm;
  v.model = "llama";
  v.pre = "default";
  auto add = [&](const std::string& text, float score, TokenType type) {
    v.tokens.push_back(text);
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0, TokenType::kUnknown);
  add("<s>", 0, TokenType::kControl);
  add("</s>", 0, TokenType::kControl);
  if (with_bytes) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0, TokenType::kByte);
    }
  }
  for (const TokenSpec& s : specs) add(s.text, s.score, s.type);
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.add_bos = true;
  v.add_space_prefix = add_space_prefix;
  Status status = v.Finalize();
  EXPECT_TRUE(status.ok()) << status.ToString();
  return v;
}

inline constexpr TokenId kFirstSpecId = 3 + 256;  // id of specs[0] when with_bytes

}  // namespace strata::tokenizer::testing
