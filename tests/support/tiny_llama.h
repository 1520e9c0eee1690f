// A tiny llama-architecture model with random F32 weights and a matching SPM tokenizer, built in
// memory, for engine tests that run the real CPU backend end to end.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "strata/backend/cpu/cpu_backend.h"
#include "strata/common/status.h"
#include "strata/model/gguf_file.h"
#include "strata/tokenizer/tokenizer.h"
#include "strata/tokenizer/vocab.h"
#include "support/gguf_builder.h"

namespace strata::testing::tiny_llama {

using tokenizer::TokenId;

// A tiny llama-architecture model with random F32 weights: 2 layers, 4 query heads over 2 KV
// heads of 16 dimensions, a 64-token context.
constexpr int64_t kEmbd = 64;
constexpr int64_t kHeads = 4;
constexpr int64_t kKvHeads = 2;
constexpr int64_t kHeadDim = kEmbd / kHeads;
constexpr int64_t kFf = 96;
constexpr int64_t kLayers = 2;
constexpr int64_t kContext = 64;
constexpr int32_t kBlockSize = 4;

// The vocab: <unk>, <s>, </s>, then consonant-vowel pairs ("ba", "be", ...). No piece holds a
// vowel followed by a consonant, so such a pair in the text always spans two tokens.
inline std::vector<std::string> Pieces() {
  std::vector<std::string> pieces;
  for (char c : std::string("bdfgklmnprst")) {
    for (char v : std::string("aeiou")) pieces.push_back(std::string{c, v});
  }
  return pieces;
}

inline const int64_t kVocab = 3 + static_cast<int64_t>(Pieces().size());

// An SPM tokenizer over Pieces() whose end-of-sequence token is `eos_id`.
inline std::unique_ptr<tokenizer::Tokenizer> MakeTokenizer(TokenId eos_id = 2) {
  tokenizer::Vocab v;
  v.kind = tokenizer::VocabKind::kSpm;
  v.model = "llama";
  v.pre = "default";
  auto add = [&](const std::string& text, tokenizer::TokenType type) {
    v.tokens.push_back(text);
    v.scores.push_back(0.0f);
    v.types.push_back(type);
  };
  add("<unk>", tokenizer::TokenType::kUnknown);
  add("<s>", tokenizer::TokenType::kControl);
  add("</s>", tokenizer::TokenType::kControl);
  for (const std::string& p : Pieces()) add(p, tokenizer::TokenType::kNormal);
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = eos_id;
  v.add_bos = true;
  v.add_space_prefix = false;
  Status status = v.Finalize();
  EXPECT_TRUE(status.ok()) << status.ToString();
  auto t = tokenizer::Tokenizer::FromVocab(std::move(v));
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(*t) : nullptr;
}

inline std::vector<uint8_t> FloatBytes(const std::vector<float>& v) {
  std::vector<uint8_t> bytes(v.size() * sizeof(float));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

// The model as GGUF bytes. Weights ~ N(0, 1/fan_in) (embeddings N(0, 1)), norms 1 + N(0, 0.1),
// so activations stay O(1) and the logits spread over a few units: greedy choices are far from
// ties, and sampling at temperature 1 still has several likely tokens per step.
// Another `seed` gives another model of the same shape and vocabulary.
inline std::vector<uint8_t> BuildModel(uint32_t seed = 20240611) {
  std::mt19937 rng(seed);
  auto normal = [&](int64_t n, float stddev) {
    std::normal_distribution<float> d(0.0f, stddev);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
  };
  auto norm = [&](int64_t n) {
    std::vector<float> v = normal(n, 0.1f);
    for (float& x : v) x += 1.0f;
    return v;
  };
  auto matrix = [&](int64_t rows, int64_t cols) {
    return FloatBytes(normal(rows * cols, 1.0f / std::sqrt(static_cast<float>(cols))));
  };
  const auto u64 = [](int64_t v) { return static_cast<uint64_t>(v); };
  constexpr uint32_t kF32 = 0;

  GgufBuilder b;
  b.AddString("general.architecture", "llama")
      .AddU32("llama.context_length", kContext)
      .AddU32("llama.embedding_length", kEmbd)
      .AddU32("llama.block_count", kLayers)
      .AddU32("llama.feed_forward_length", kFf)
      .AddU32("llama.attention.head_count", kHeads)
      .AddU32("llama.attention.head_count_kv", kKvHeads)
      .AddF32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .AddF32("llama.rope.freq_base", 10000.0f);
  b.AddTensor("token_embd.weight", {u64(kEmbd), u64(kVocab)}, kF32,
              FloatBytes(normal(kVocab * kEmbd, 1.0f)));
  b.AddTensor("output_norm.weight", {u64(kEmbd)}, kF32, FloatBytes(norm(kEmbd)));
  b.AddTensor("output.weight", {u64(kEmbd), u64(kVocab)}, kF32, matrix(kVocab, kEmbd));
  for (int64_t il = 0; il < kLayers; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    b.AddTensor(p + "attn_norm.weight", {u64(kEmbd)}, kF32, FloatBytes(norm(kEmbd)));
    b.AddTensor(p + "attn_q.weight", {u64(kEmbd), u64(kHeads * kHeadDim)}, kF32,
                matrix(kHeads * kHeadDim, kEmbd));
    b.AddTensor(p + "attn_k.weight", {u64(kEmbd), u64(kKvHeads * kHeadDim)}, kF32,
                matrix(kKvHeads * kHeadDim, kEmbd));
    b.AddTensor(p + "attn_v.weight", {u64(kEmbd), u64(kKvHeads * kHeadDim)}, kF32,
                matrix(kKvHeads * kHeadDim, kEmbd));
    b.AddTensor(p + "attn_output.weight", {u64(kHeads * kHeadDim), u64(kEmbd)}, kF32,
                matrix(kEmbd, kHeads * kHeadDim));
    b.AddTensor(p + "ffn_norm.weight", {u64(kEmbd)}, kF32, FloatBytes(norm(kEmbd)));
    b.AddTensor(p + "ffn_gate.weight", {u64(kEmbd), u64(kFf)}, kF32, matrix(kFf, kEmbd));
    b.AddTensor(p + "ffn_up.weight", {u64(kEmbd), u64(kFf)}, kF32, matrix(kFf, kEmbd));
    b.AddTensor(p + "ffn_down.weight", {u64(kFf), u64(kEmbd)}, kF32, matrix(kEmbd, kFf));
  }
  return b.Build();
}

// The CPU backend on the tiny model: 2 threads, blocks of kBlockSize tokens.
inline std::unique_ptr<backend::cpu::CpuBackend> MakeBackendFor(const model::GgufFile& file,
                                                                int64_t kv_budget_bytes) {
  backend::cpu::CpuBackendOptions options;
  options.num_threads = 2;
  options.kv_budget_bytes = kv_budget_bytes;
  options.block_size = kBlockSize;
  auto b = backend::cpu::CpuBackend::Create(file, options);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return b.ok() ? std::move(*b) : nullptr;
}

}  // namespace strata::testing::tiny_llama
