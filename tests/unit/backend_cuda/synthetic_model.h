// Small synthetic GGUF models for the CUDA backend tests: llama- or gemma3-style, every matrix
// (the token embedding included) in one chosen format, with weights of sane magnitude so that
// activations stay O(1) and logits spread over a few units. The quantized formats are filled
// with random codes under fixed sub-block scales (no quantizer needed): every code pattern
// occurs, and each weight is ~ N-like with standard deviation ~ 1/sqrt(cols).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "strata/common/mapped_file.h"
#include "strata/model/fp16.h"
#include "strata/model/ggml_type.h"
#include "strata/model/gguf_file.h"
#include "support/gguf_builder.h"

namespace strata::backend::cuda::testing {

struct SyntheticSpec {
  std::string arch = "llama";  // "llama", "qwen2" (q/k/v biases, NeoX RoPE) or "gemma3"
  model::GgmlType weight_type = model::GgmlType::kF32;
  int64_t embd = 256;  // multiples of 256, so every K-quant fits
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t ff = 512;
  int64_t layers = 2;
  int64_t context = 128;
  int64_t vocab = 97;
  int32_t sliding_window = 0;  // gemma3: local layers see this many positions
  float softcap = 0.0f;        // gemma3: final logit soft-cap
  bool tied_output = false;    // no output.weight: the embedding doubles as the output
  uint32_t seed = 1;
};

// A [rows, cols] matrix of `type` (cols a multiple of the block size), ~ 1/sqrt(cols) scale.
inline std::vector<uint8_t> SyntheticMatrix(model::GgmlType type, int64_t rows, int64_t cols,
                                            std::mt19937& rng) {
  const float stddev = 1.0f / std::sqrt(static_cast<float>(cols));
  std::normal_distribution<float> normal(0.0f, stddev);
  std::uniform_real_distribution<float> jitter(0.8f, 1.2f);
  const model::GgmlTypeTraits traits = model::TraitsOf(type);
  const int64_t blocks = rows * cols / traits.block_size;
  std::vector<uint8_t> out(blocks * traits.type_size);
  auto put_f16 = [&](uint8_t* p, float v) {
    const uint16_t h = model::FloatToFp16(v);
    std::memcpy(p, &h, 2);
  };
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* blk = out.data() + b * traits.type_size;
    switch (type) {
      case model::GgmlType::kF32: {
        const float v = normal(rng);
        std::memcpy(blk, &v, 4);
        break;
      }
      case model::GgmlType::kF16:
        put_f16(blk, normal(rng));
        break;
      case model::GgmlType::kQ8_0:
        // w = d * q, q uniform in [-127, 127] (sd ~73).
        put_f16(blk, stddev / 73.0f * jitter(rng));
        for (int i = 0; i < 32; ++i) {
          blk[2 + i] =
              static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(rng() % 255) - 127));
        }
        break;
      case model::GgmlType::kQ4_K: {
        // Every sub-block scale 1 and min 8, dmin = d: w = d * (q - 8), q uniform in [0, 15].
        const float d = stddev / 4.6f * jitter(rng);
        put_f16(blk, d);
        put_f16(blk + 2, d);
        for (int i = 0; i < 4; ++i) blk[4 + i] = 1;
        for (int i = 0; i < 4; ++i) blk[8 + i] = 8;
        for (int i = 0; i < 4; ++i) blk[12 + i] = 0x81;
        for (int i = 0; i < 128; ++i) blk[16 + i] = static_cast<uint8_t>(rng());
        break;
      }
      case model::GgmlType::kQ6_K:
        // Every sub-block scale 1: w = d * (q - 32), q uniform in [0, 63] (sd ~18.5).
        for (int i = 0; i < 192; ++i) blk[i] = static_cast<uint8_t>(rng());
        for (int i = 0; i < 16; ++i) blk[192 + i] = 1;
        put_f16(blk + 208, stddev / 18.5f * jitter(rng));
        break;
      default:
        break;
    }
  }
  return out;
}

inline std::vector<uint8_t> SyntheticVector(int64_t n, float mean, float stddev,
                                            std::mt19937& rng) {
  std::normal_distribution<float> normal(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  std::vector<uint8_t> bytes(n * 4);
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

// The model as GGUF bytes.
inline std::vector<uint8_t> BuildSyntheticModel(const SyntheticSpec& s) {
  std::mt19937 rng(s.seed);
  const auto u64 = [](int64_t v) { return static_cast<uint64_t>(v); };
  const uint32_t wt = static_cast<uint32_t>(s.weight_type);
  constexpr uint32_t kF32 = 0;
  const int64_t hd = s.embd / s.heads;
  const std::string a = s.arch + ".";
  strata::testing::GgufBuilder b;
  b.AddString("general.architecture", s.arch)
      .AddU32(a + "context_length", static_cast<uint32_t>(s.context))
      .AddU32(a + "embedding_length", static_cast<uint32_t>(s.embd))
      .AddU32(a + "block_count", static_cast<uint32_t>(s.layers))
      .AddU32(a + "feed_forward_length", static_cast<uint32_t>(s.ff))
      .AddU32(a + "attention.head_count", static_cast<uint32_t>(s.heads))
      .AddU32(a + "attention.head_count_kv", static_cast<uint32_t>(s.kv_heads))
      .AddF32(a + "attention.layer_norm_rms_epsilon", 1e-6f)
      .AddF32(a + "rope.freq_base", 10000.0f);
  if (s.sliding_window > 0) {
    b.AddU32(a + "attention.sliding_window", static_cast<uint32_t>(s.sliding_window));
  }
  if (s.softcap > 0) b.AddF32(a + "final_logit_softcapping", s.softcap);
  const bool gemma = s.arch == "gemma3";
  b.AddTensor("token_embd.weight", {u64(s.embd), u64(s.vocab)}, wt,
              SyntheticMatrix(s.weight_type, s.vocab, s.embd, rng));
  b.AddTensor("output_norm.weight", {u64(s.embd)}, kF32, SyntheticVector(s.embd, 1.0f, 0.1f, rng));
  if (!s.tied_output) {
    b.AddTensor("output.weight", {u64(s.embd), u64(s.vocab)}, wt,
                SyntheticMatrix(s.weight_type, s.vocab, s.embd, rng));
  }
  for (int64_t il = 0; il < s.layers; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
      b.AddTensor(p + name, {u64(cols), u64(rows)}, wt,
                  SyntheticMatrix(s.weight_type, rows, cols, rng));
    };
    auto vec = [&](const std::string& name, int64_t n) {
      b.AddTensor(p + name, {u64(n)}, kF32, SyntheticVector(n, 1.0f, 0.1f, rng));
    };
    vec("attn_norm.weight", s.embd);
    matrix("attn_q.weight", s.heads * hd, s.embd);
    matrix("attn_k.weight", s.kv_heads * hd, s.embd);
    matrix("attn_v.weight", s.kv_heads * hd, s.embd);
    matrix("attn_output.weight", s.embd, s.heads * hd);
    vec("ffn_norm.weight", s.embd);
    matrix("ffn_gate.weight", s.ff, s.embd);
    matrix("ffn_up.weight", s.ff, s.embd);
    matrix("ffn_down.weight", s.embd, s.ff);
    if (s.arch == "qwen2") {
      auto bias = [&](const std::string& name, int64_t n) {
        b.AddTensor(p + name, {u64(n)}, kF32, SyntheticVector(n, 0.0f, 0.5f, rng));
      };
      bias("attn_q.bias", s.heads * hd);
      bias("attn_k.bias", s.kv_heads * hd);
      bias("attn_v.bias", s.kv_heads * hd);
    }
    if (gemma) {
      vec("attn_q_norm.weight", hd);
      vec("attn_k_norm.weight", hd);
      vec("post_attention_norm.weight", s.embd);
      vec("post_ffw_norm.weight", s.embd);
    }
  }
  return b.Build();
}

// A parsed synthetic model; the bytes outlive the file that maps them.
struct SyntheticModelFile {
  std::vector<uint8_t> bytes;
  std::unique_ptr<model::GgufFile> file;
};

// BuildSyntheticModel(spec), parsed; null (with a test failure) when it does not parse.
inline std::unique_ptr<SyntheticModelFile> OpenSyntheticModel(const SyntheticSpec& spec) {
  auto m = std::make_unique<SyntheticModelFile>();
  m->bytes = BuildSyntheticModel(spec);
  auto file = model::GgufFile::Parse(MappedFile::FromBytes(m->bytes));
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return nullptr;
  m->file = std::make_unique<model::GgufFile>(std::move(*file));
  return m;
}

}  // namespace strata::backend::cuda::testing
