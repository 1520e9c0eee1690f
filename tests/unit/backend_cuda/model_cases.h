// The synthetic models the CUDA backend tests run (each with CUDA graphs on and off), and
// their test names.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <ostream>
#include <string>
#include <vector>

#include "strata/model/ggml_type.h"
#include "unit/backend_cuda/synthetic_model.h"

namespace strata::backend::cuda::testing {

struct ModelCase {
  std::string name;
  testing::SyntheticSpec spec;
  bool graphs = true;
};

// gtest prints a case by its name rather than its bytes.
inline void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.name; }

// Formats kept quantized on the device (their large batches take the fp16 cuBLAS path).
inline bool IsQuantized(model::GgmlType t) {
  return t != model::GgmlType::kF32 && t != model::GgmlType::kF16;
}

// Seeds are chosen so that the CPU's greedy choices on the device tests' schedules are clear
// (SyntheticModelOnCpu checks it); changing a shape or a schedule may need new ones.
inline std::vector<ModelCase> Cases() {
  std::vector<ModelCase> cases;
  for (bool graphs : {true, false}) {
    const std::string suffix = graphs ? "_graphs" : "_eager";
    for (model::GgmlType t : {model::GgmlType::kF32, model::GgmlType::kF16, model::GgmlType::kQ8_0,
                              model::GgmlType::kQ4_K, model::GgmlType::kQ6_K}) {
      ModelCase c;
      c.spec.weight_type = t;
      c.spec.seed = 9 + static_cast<uint32_t>(t);
      c.graphs = graphs;
      c.name = "llama_" + std::string(model::GgmlTypeName(t)) + suffix;
      cases.push_back(c);
    }
    {
      // Qwen2: q/k/v biases and NeoX-style RoPE.
      ModelCase c;
      c.spec.arch = "qwen2";
      c.spec.weight_type = model::GgmlType::kQ8_0;
      c.spec.seed = 2;
      c.graphs = graphs;
      c.name = "qwen2_Q8_0" + suffix;
      cases.push_back(c);
    }
    for (model::GgmlType t : {model::GgmlType::kF16, model::GgmlType::kQ4_K}) {
      // Gemma 3: sliding-window layers (0 and 1; 2 is global), q/k norms, post norms, GeGLU,
      // embedding scale, a tied output and a soft-cap.
      ModelCase c;
      c.spec.arch = "gemma3";
      c.spec.weight_type = t;
      c.spec.layers = 3;
      c.spec.sliding_window = 8;
      c.spec.softcap = 5.0f;
      c.spec.tied_output = true;
      c.spec.seed = 101 + static_cast<uint32_t>(t);
      c.graphs = graphs;
      c.name = "gemma3_" + std::string(model::GgmlTypeName(t)) + suffix;
      cases.push_back(c);
    }
  }
  return cases;
}

inline std::string CaseName(const ::testing::TestParamInfo<ModelCase>& info) {
  std::string name = info.param.name;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

}  // namespace strata::backend::cuda::testing
