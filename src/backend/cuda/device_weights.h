// The model's tensors in device memory (backend/cuda internal), uploaded once by UploadWeights.
//
// What each matrix becomes on the device:
//   Q8_0, Q4_K, Q6_K   as stored (the quantized matmul reads them for up to 16 tokens; larger
//                      token counts dequantize them to an fp16 workspace for cuBLAS)
//   F16                as stored
//   F32                as stored (cuBLAS fp32 GEMM: exact products, like the CPU backend)
//   BF16               widened to F32 on the host (exact; fp16 could overflow bf16's range)
//   any other format   dequantized on the host (model::Dequantize) and stored as F16
// Vectors (norms, biases, RoPE factors) are fp32. Read-only after upload.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "device_memory.h"
#include "strata/common/status.h"
#include "strata/model/ggml_type.h"
#include "strata/model/model_config.h"
#include "strata/model/model_weights.h"

namespace strata::backend::cuda {

// A row-major [rows, cols] matrix on the device; `type` is one of F32, F16, Q8_0, Q4_K, Q6_K.
struct DeviceMatrix {
  std::string name;
  model::GgmlType type = model::GgmlType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
};

// True for the block formats kept quantized on the device.
bool IsDeviceQuantized(model::GgmlType type);

struct DeviceLayer {
  const float* attn_norm = nullptr;  // [n_embd]
  DeviceMatrix wq, wk, wv, wo, gate, up, down;
  const float* bq = nullptr;              // [n_heads * head_dim_k] or null
  const float* bk = nullptr;              // [n_kv_heads * head_dim_k] or null
  const float* bv = nullptr;              // [n_kv_heads * head_dim_v] or null
  const float* q_norm = nullptr;          // [head_dim_k] or null
  const float* k_norm = nullptr;          // [head_dim_k] or null
  const float* post_attn_norm = nullptr;  // [n_embd] or null
  const float* ffn_norm = nullptr;        // [n_embd]
  const float* post_ffn_norm = nullptr;   // [n_embd] or null
};

struct DeviceWeights {
  DeviceMatrix token_embd;             // [vocab, n_embd]
  DeviceMatrix output;                 // [vocab, n_embd]; shares token_embd's memory when tied
  const float* output_norm = nullptr;  // [n_embd]
  const float* rope_freqs = nullptr;   // [rope_dim / 2] or null
  std::vector<DeviceLayer> layers;

  int64_t bytes = 0;  // device memory held
  // Elements of the largest quantized matrix (the fp16 dequantization workspace's size).
  int64_t max_quantized_elements = 0;
  // The widest input (cols) of any matrix: sizes the fp16 activation scratch.
  int64_t max_cols = 0;

  std::vector<DeviceBuffer> storage;  // owns everything above
};

// Copies the weights to the device through `stream` (synchronized before returning).
// FAILED_PRECONDITION when they do not fit; INTERNAL for a device error.
StatusOr<DeviceWeights> UploadWeights(const model::ModelWeights& weights,
                                      const model::ModelConfig& config, cudaStream_t stream);

}  // namespace strata::backend::cuda
