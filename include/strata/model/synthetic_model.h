// Synthetic models: llama-architecture GGUF files of any shape with seeded random weights, for
// sizing and benchmarking (e.g. a Llama-3-8B-shaped file on a machine with no network). The
// file carries everything ModelConfig, ModelWeights and the tokenizer read: the llama
// hyperparameters, a minimal SentencePiece vocab (<unk>, <s>, </s>, the 256 byte tokens, the space
// piece, then filler pieces), and every tensor.
//
// Weights are drawn so activations stay O(1): matrices ~ N(0, 1/cols) (an Irwin-Hall
// approximation of the normal for F16/BF16; for Q4_K/Q6_K random quants under finite, normal
// fp16 scales chosen for the same standard deviation), norms 1 + N(0, 0.01) in F32. The bytes
// depend only on the spec and the seed, never on the thread count.
//
// Thread rules: WriteSyntheticModel runs worker threads of its own; the spec is read only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "strata/common/status.h"

namespace strata::model {

enum class SyntheticFtype {
  kF16,   // every matrix F16
  kBF16,  // every matrix BF16
  kQ4_K,  // Q4_K matrices, Q6_K output and ffn_down (like llama.cpp's Q4_K_M)
};

struct SyntheticModelSpec {
  std::string name = "synthetic";  // general.name
  int64_t n_embd = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t n_ff = 0;
  int64_t vocab_size = 0;      // >= 260 (3 special + 256 byte tokens + the space)
  int64_t context_length = 0;  // positions
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_embeddings = false;  // no output.weight: the output reuses token_embd
  // rope_freqs.weight with Llama 3's frequency factors (scale factor, low/high frequency
  // factors 1 and 4, original context 8192); 0: no rope_freqs tensor.
  float llama3_rope_factor = 0.0f;
  SyntheticFtype ftype = SyntheticFtype::kF16;
  uint64_t seed = 0;
};

// "llama3-8b" (Llama-3-8B: 4096 wide, 32 layers, 32/8 heads of 128, ff 14336, vocab 128256,
// rope base 500000, context 8192) or "llama3.2-1b" (2048 wide, 16 layers, 32/8 heads of 64,
// ff 8192, tied embeddings, llama3 rope factors of 32); INVALID_ARGUMENT naming the choices.
StatusOr<SyntheticModelSpec> SyntheticModelPreset(std::string_view name);

// Parses "f16", "bf16" or "q4_k".
StatusOr<SyntheticFtype> ParseSyntheticFtype(std::string_view name);
std::string_view SyntheticFtypeName(SyntheticFtype ftype);

// INVALID_ARGUMENT naming the field when the spec cannot make a loadable file (non-positive
// sizes, n_heads not a multiple of n_kv_heads, odd head_dim, a row length that is not a
// multiple of the quant block (256 for q4_k), a vocab under 260).
Status ValidateSyntheticModelSpec(const SyntheticModelSpec& spec);

// Bytes the file's tensor data will take (excluding the header), for a progress line.
uint64_t SyntheticModelDataBytes(const SyntheticModelSpec& spec);

// Writes the model to `path`, tensor by tensor (at most two tensors in memory: one being
// written while the next is generated), generating each with `threads` threads (0: one per
// core) plus one writer thread.
Status WriteSyntheticModel(const SyntheticModelSpec& spec, const std::string& path,
                           int threads = 0);

}  // namespace strata::model
