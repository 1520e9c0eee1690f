// The small synthetic model (strata-make-model's generator) that the CPU backend tests run:
// 2 layers of 256 columns, 4 query and 2 KV heads, a 320-token vocabulary, llama3 RoPE.
#pragma once

#include <cstdint>

#include "strata/model/synthetic_model.h"

namespace strata::backend::cpu {

inline model::SyntheticModelSpec SmallSyntheticSpec(model::SyntheticFtype ftype, uint64_t seed) {
  model::SyntheticModelSpec spec;
  spec.n_embd = 256;
  spec.n_layers = 2;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.head_dim = 64;
  spec.n_ff = 512;
  spec.vocab_size = 320;
  spec.context_length = 64;
  spec.rope_base = 500000.0f;
  spec.llama3_rope_factor = 8.0f;
  spec.ftype = ftype;
  spec.seed = seed;
  return spec;
}

}  // namespace strata::backend::cpu
