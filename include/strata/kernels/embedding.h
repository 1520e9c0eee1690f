// Launch API of the token-embedding gather (kernels/embedding.cu). Plain C++: callers need no
// CUDA headers. Pointers are device pointers; `stream` is a cudaStream_t (nullptr: the default
// stream). Returns the cudaError_t of the launch as an int (0 = success); a shape it refuses
// returns cudaErrorInvalidValue without launching.
//
// Semantics are those of the CPU backend's Embed (src/backend/cpu/cpu_backend.cc): each token's
// row of the embedding table is dequantized exactly as strata::model::Dequantize does
// (src/model/dequantize_legacy.cc, dequantize_kquants.cc: the same products in the same order,
// each rounded, no FMA), then multiplied by `scale` in fp32 unless scale is 1 (Gemma:
// sqrt(n_embd)). The device floats are bit-identical to the CPU's for finite table values.
#pragma once

#include <cstdint>

namespace strata::kernels {

// Table formats the gather decodes. Values are the GGUF/ggml type numbers (model::GgmlType), so
// a backend converts with a cast. Block layouts are ggml's (little-endian, packed, no alignment
// required of the table pointer):
//   kF32 (1 element, 4 B), kF16 (1 element, 2 B),
//   kQ8_0 (32 elements, 34 B), kQ4_K (256 elements, 144 B), kQ6_K (256 elements, 210 B).
enum class EmbeddingType : uint32_t { kF32 = 0, kF16 = 1, kQ8_0 = 8, kQ4_K = 12, kQ6_K = 14 };

// Bytes of one table row of n elements of `type`: n / block_elements * block_bytes. -1 when
// `type` is not one of the above (any uint32_t value may be passed), n < 1, or n is not a
// multiple of the block's element count. Pure host arithmetic.
int64_t EmbeddingRowBytes(uint32_t type, int64_t n);

// out[t, :] = dequantize(table row token_ids[t]) * scale.
//
// table:     [vocab_size rows of EmbeddingRowBytes(type, n) bytes].
// token_ids: [num_tokens] int32. An id outside [0, vocab_size) gives a row of zeros (the host
//            validates ids before a forward pass, so this only keeps a bad id from reading out of
//            bounds).
// out:       [num_tokens, n] fp32.
// n must be a positive multiple of the type's block size (and < 2^31); num_tokens >= 0 (0:
// nothing to do).
int LaunchEmbeddingGather(const void* table, EmbeddingType type, int64_t vocab_size, int64_t n,
                          const int32_t* token_ids, int64_t num_tokens, float scale, float* out,
                          void* stream);

}  // namespace strata::kernels
