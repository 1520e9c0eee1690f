// Random weight matrices in every ggml format MatMul reads, and random activations, for the
// matmul tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "strata/model/fp16.h"
#include "strata/model/ggml_type.h"

namespace strata::backend::cpu {

using model::GgmlType;

// Writes a random fp16 scale of magnitude [lo, hi) and random sign at p.
inline void PutScale(uint8_t* p, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> magnitude(lo, hi);
  const float v = (rng() & 1) != 0 ? magnitude(rng) : -magnitude(rng);
  const uint16_t h = model::FloatToFp16(v);
  std::memcpy(p, &h, sizeof(h));
}

// A random [rows, cols] matrix of `type`: random bits everywhere (quants, packed sub-block
// scales), then every fp16 block scale overwritten with a sane finite value, so the matrix holds
// every quant pattern but no NaN or infinity.
inline std::vector<uint8_t> RandomWeights(model::GgmlType type, int64_t rows, int64_t cols,
                                          std::mt19937& rng) {
  const model::GgmlTypeTraits traits = model::TraitsOf(type);
  const int64_t blocks = rows * cols / traits.block_size;
  std::vector<uint8_t> data(blocks * traits.type_size);
  for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < blocks; ++i) {
    uint8_t* blk = data.data() + i * traits.type_size;
    switch (type) {
      case GgmlType::kF32: {
        const float v = normal(rng);
        std::memcpy(blk, &v, sizeof(v));
        break;
      }
      case GgmlType::kF16: {
        const uint16_t h = model::FloatToFp16(normal(rng));
        std::memcpy(blk, &h, sizeof(h));
        break;
      }
      case GgmlType::kBF16: {
        const uint16_t h = model::FloatToBf16(normal(rng));
        std::memcpy(blk, &h, sizeof(h));
        break;
      }
      case GgmlType::kQ8_0:
      case GgmlType::kQ4_0:
      case GgmlType::kQ5_0:
        PutScale(blk, rng, 1e-3f, 1e-1f);
        break;
      case GgmlType::kQ4_1:
      case GgmlType::kQ5_1:
      case GgmlType::kQ4_K:
      case GgmlType::kQ5_K:
        PutScale(blk, rng, 1e-3f, 1e-1f);      // d
        PutScale(blk + 2, rng, 1e-3f, 1e-1f);  // m or dmin
        break;
      case GgmlType::kQ2_K:
        PutScale(blk + 80, rng, 1e-3f, 1e-1f);
        PutScale(blk + 82, rng, 1e-3f, 1e-1f);
        break;
      case GgmlType::kQ3_K:
        PutScale(blk + 108, rng, 1e-3f, 1e-1f);
        break;
      case GgmlType::kQ6_K:
        PutScale(blk + 208, rng, 1e-4f, 1e-2f);
        break;
      default:
        ADD_FAILURE() << "no generator for " << model::GgmlTypeName(type);
    }
  }
  return data;
}

inline std::vector<float> RandomActivations(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

}  // namespace strata::backend::cpu
