// The minimal vocab strata-make-model writes is a real SentencePiece vocab: engine tools and
// benchmarks that tokenize can run on a synthetic model.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "strata/model/gguf_file.h"
#include "strata/model/synthetic_model.h"
#include "strata/tokenizer/tokenizer.h"

namespace strata::tokenizer {
namespace {

TEST(SyntheticVocab, LoadsAndRoundTripsTextThroughByteTokens) {
  model::SyntheticModelSpec spec;
  spec.n_embd = 64;
  spec.n_layers = 1;
  spec.n_heads = 2;
  spec.n_kv_heads = 1;
  spec.head_dim = 32;
  spec.n_ff = 64;
  spec.vocab_size = 400;
  spec.context_length = 32;
  const std::string path = ::testing::TempDir() + "synthetic_vocab.gguf";
  ASSERT_TRUE(model::WriteSyntheticModel(spec, path, 1).ok());
  auto file = model::GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto tok = Tokenizer::FromGguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->vocab().tokens.size(), 400u);
  EXPECT_EQ((*tok)->vocab().bos_id, 1);
  EXPECT_EQ((*tok)->vocab().eos_id, 2);

  const std::string text = "héllo, world";
  const std::vector<TokenId> ids = (*tok)->Encode(text, EncodeOptions{});
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 1);  // BOS
  for (TokenId id : ids) EXPECT_LT(id, 400);
  EXPECT_EQ((*tok)->Decode(std::span(ids).subspan(1), false), text);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace strata::tokenizer
