// A tiny BERT sentence-transformers folder with seeded random weights, written to disk for
// the encoder's tests, and a plain float64 reference of its embeddings.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "strata/model/fp16.h"
#include "support/safetensors_builder.h"

namespace strata::embedding::testing {

struct TinyBertSpec {
  int vocab = 32;  // the tokenizer's 32 entries
  int hidden = 12;
  int layers = 2;
  int heads = 3;
  int intermediate = 20;
  int max_positions = 24;
  int type_vocab = 2;
  double eps = 1e-12;
  uint32_t seed = 7;
  std::string dtype = "F32";  // or "F16": weights rounded to fp16 in the file
  std::string prefix;         // e.g. "bert."
};

// The tokenizer's vocabulary: specials, a few words and pieces.
inline std::vector<std::string> TinyVocab() {
  return {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the",  "cat",   "sat",
          "on",    "mat",   "dog",   "ran",   "a",      "big",  "small", "##s",
          "##ed",  "!",     ",",     ".",     "red",    "blue", "house", "car",
          "fast",  "slow",  "is",    "and",   "##ing",  "play", "green", "tree"};
}

inline std::string TinyTokenizerJson() {
  std::string vocab;
  const auto words = TinyVocab();
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) vocab += ",";
    vocab += "\"" + words[i] + "\":" + std::to_string(i);
  }
  return R"({"version":"1.0","added_tokens":[)"
         R"({"id":0,"content":"[PAD]","special":true,"normalized":false},)"
         R"({"id":1,"content":"[UNK]","special":true,"normalized":false},)"
         R"({"id":2,"content":"[CLS]","special":true,"normalized":false},)"
         R"({"id":3,"content":"[SEP]","special":true,"normalized":false},)"
         R"({"id":4,"content":"[MASK]","special":true,"normalized":false}],)"
         R"("normalizer":{"type":"BertNormalizer","clean_text":true,)"
         R"("handle_chinese_chars":true,"strip_accents":null,"lowercase":true},)"
         R"("pre_tokenizer":{"type":"BertPreTokenizer"},)"
         R"("post_processor":{"type":"BertProcessing","sep":["[SEP]",3],"cls":["[CLS]",2]},)"
         R"("model":{"type":"WordPiece","unk_token":"[UNK]","continuing_subword_prefix":"##",)"
         R"("max_input_chars_per_word":100,"vocab":{)" +
         vocab + "}}}";
}

// The weights by Hugging Face name (without prefix), as the file stores them (fp16-rounded
// for F16), so the reference sees exactly what the encoder reads.
struct TinyBert {
  TinyBertSpec spec;
  std::map<std::string, std::vector<float>> weights;
  std::map<std::string, std::vector<uint64_t>> shapes;

  explicit TinyBert(const TinyBertSpec& s) : spec(s) {
    std::mt19937 rng(s.seed);
    std::normal_distribution<float> normal(0.0f, 0.4f);
    const auto add = [&](const std::string& name, std::vector<uint64_t> shape, float mean = 0) {
      size_t n = 1;
      for (uint64_t d : shape) n *= d;
      std::vector<float> v(n);
      for (float& x : v) {
        x = mean + normal(rng);
        if (s.dtype == "F16") x = model::Fp16ToFloat(model::FloatToFp16(x));
      }
      weights[name] = v;
      shapes[name] = shape;
    };
    const uint64_t h = s.hidden, ff = s.intermediate;
    add("embeddings.word_embeddings.weight", {uint64_t(s.vocab), h});
    add("embeddings.position_embeddings.weight", {uint64_t(s.max_positions), h});
    add("embeddings.token_type_embeddings.weight", {uint64_t(s.type_vocab), h});
    add("embeddings.LayerNorm.weight", {h}, 1.0f);
    add("embeddings.LayerNorm.bias", {h});
    for (int l = 0; l < s.layers; ++l) {
      const std::string p = "encoder.layer." + std::to_string(l) + ".";
      for (const char* m : {"attention.self.query", "attention.self.key", "attention.self.value",
                            "attention.output.dense"}) {
        add(p + m + ".weight", {h, h});
        add(p + m + ".bias", {h});
      }
      add(p + "attention.output.LayerNorm.weight", {h}, 1.0f);
      add(p + "attention.output.LayerNorm.bias", {h});
      add(p + "intermediate.dense.weight", {ff, h});
      add(p + "intermediate.dense.bias", {ff});
      add(p + "output.dense.weight", {h, ff});
      add(p + "output.dense.bias", {h});
      add(p + "output.LayerNorm.weight", {h}, 1.0f);
      add(p + "output.LayerNorm.bias", {h});
    }
  }

  static std::string Number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.17g", v);
    return buf;
  }

  std::string ConfigJson() const {
    return "{\"model_type\":\"bert\",\"hidden_act\":\"gelu\",\"position_embedding_type\":"
           "\"absolute\",\"vocab_size\":" +
           std::to_string(spec.vocab) + ",\"hidden_size\":" + std::to_string(spec.hidden) +
           ",\"num_hidden_layers\":" + std::to_string(spec.layers) +
           ",\"num_attention_heads\":" + std::to_string(spec.heads) +
           ",\"intermediate_size\":" + std::to_string(spec.intermediate) +
           ",\"max_position_embeddings\":" + std::to_string(spec.max_positions) +
           ",\"type_vocab_size\":" + std::to_string(spec.type_vocab) +
           ",\"layer_norm_eps\":" + Number(spec.eps) + "}";
  }

  std::string Safetensors() const {
    strata::testing::SafetensorsBuilder b;
    b.AddMetadata("format", "pt");
    for (const auto& [name, values] : weights) {
      if (spec.dtype == "F16") {
        std::string bytes(values.size() * 2, '\0');
        for (size_t i = 0; i < values.size(); ++i) {
          const uint16_t h = model::FloatToFp16(values[i]);
          std::memcpy(bytes.data() + 2 * i, &h, 2);
        }
        b.Add(spec.prefix + name, "F16", shapes.at(name), bytes);
      } else {
        b.AddF32(spec.prefix + name, shapes.at(name), values);
      }
    }
    b.Add(spec.prefix + "embeddings.position_ids", "I64", {1, uint64_t(spec.max_positions)},
          std::string(8 * spec.max_positions, '\0'));
    return b.Build();
  }

  // Writes the folder (config.json, tokenizer.json, model.safetensors) and returns its path.
  std::string Write(const std::string& name) const {
    const std::string dir =
        ::testing::TempDir() + "tiny_bert_" + name + "_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    WriteFile(dir + "/config.json", ConfigJson());
    WriteFile(dir + "/tokenizer.json", TinyTokenizerJson());
    WriteFile(dir + "/model.safetensors", Safetensors());
    return dir;
  }

  static void WriteFile(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary).write(text.data(), std::streamsize(text.size()));
  }

  // The float64 embedding of `ids`: BERT forward, mean pooling, L2 normalization.
  std::vector<double> Embed(const std::vector<int32_t>& ids) const {
    const int n = static_cast<int>(ids.size()), h = spec.hidden, ff = spec.intermediate;
    const int heads = spec.heads, dh = h / heads;
    const auto w = [&](const std::string& name) -> const std::vector<float>& {
      return weights.at(name);
    };
    using Mat = std::vector<std::vector<double>>;
    const auto layer_norm = [&](Mat& x, const std::string& p) {
      for (auto& row : x) {
        double mean = 0, var = 0;
        for (double v : row) mean += v;
        mean /= h;
        for (double v : row) var += (v - mean) * (v - mean);
        var /= h;
        for (int d = 0; d < h; ++d) {
          row[d] =
              (row[d] - mean) / std::sqrt(var + spec.eps) * w(p + ".weight")[d] + w(p + ".bias")[d];
        }
      }
    };
    const auto linear = [&](const Mat& x, const std::string& p, int out, int in) {
      Mat y(x.size(), std::vector<double>(out));
      for (size_t t = 0; t < x.size(); ++t) {
        for (int o = 0; o < out; ++o) {
          double acc = w(p + ".bias")[o];
          for (int i = 0; i < in; ++i) acc += x[t][i] * double(w(p + ".weight")[o * in + i]);
          y[t][o] = acc;
        }
      }
      return y;
    };
    Mat x(n, std::vector<double>(h));
    for (int t = 0; t < n; ++t) {
      for (int d = 0; d < h; ++d) {
        x[t][d] = double(w("embeddings.word_embeddings.weight")[ids[t] * h + d]) +
                  w("embeddings.position_embeddings.weight")[t * h + d] +
                  w("embeddings.token_type_embeddings.weight")[d];
      }
    }
    layer_norm(x, "embeddings.LayerNorm");
    for (int l = 0; l < spec.layers; ++l) {
      const std::string p = "encoder.layer." + std::to_string(l) + ".";
      const Mat q = linear(x, p + "attention.self.query", h, h);
      const Mat k = linear(x, p + "attention.self.key", h, h);
      const Mat v = linear(x, p + "attention.self.value", h, h);
      Mat ctx(n, std::vector<double>(h, 0.0));
      for (int head = 0; head < heads; ++head) {
        for (int i = 0; i < n; ++i) {
          std::vector<double> s(n);
          double mx = -1e300, sum = 0;
          for (int j = 0; j < n; ++j) {
            double dot = 0;
            for (int d = 0; d < dh; ++d) dot += q[i][head * dh + d] * k[j][head * dh + d];
            s[j] = dot / std::sqrt(double(dh));
            mx = std::max(mx, s[j]);
          }
          for (int j = 0; j < n; ++j) sum += (s[j] = std::exp(s[j] - mx));
          for (int j = 0; j < n; ++j) {
            for (int d = 0; d < dh; ++d) ctx[i][head * dh + d] += s[j] / sum * v[j][head * dh + d];
          }
        }
      }
      Mat a = linear(ctx, p + "attention.output.dense", h, h);
      for (int t = 0; t < n; ++t) {
        for (int d = 0; d < h; ++d) a[t][d] += x[t][d];
      }
      layer_norm(a, p + "attention.output.LayerNorm");
      x = a;
      Mat m = linear(x, p + "intermediate.dense", ff, h);
      for (auto& row : m) {
        for (double& z : row) z = 0.5 * z * (1 + std::erf(z / std::sqrt(2.0)));
      }
      Mat o = linear(m, p + "output.dense", h, ff);
      for (int t = 0; t < n; ++t) {
        for (int d = 0; d < h; ++d) o[t][d] += x[t][d];
      }
      layer_norm(o, p + "output.LayerNorm");
      x = o;
    }
    std::vector<double> pooled(h, 0.0);
    for (int t = 0; t < n; ++t) {
      for (int d = 0; d < h; ++d) pooled[d] += x[t][d] / n;
    }
    double norm = 0;
    for (double v : pooled) norm += v * v;
    norm = std::max(std::sqrt(norm), 1e-12);
    for (double& v : pooled) v /= norm;
    return pooled;
  }
};

}  // namespace strata::embedding::testing
