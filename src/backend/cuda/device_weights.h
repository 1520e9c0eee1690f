// The model's tensors in device memory (backend/cuda internal), uploaded once by UploadWeights.
//
// What each matrix becomes on the device:
//   Q8_0, Q4_K, Q6_K   as stored (the quantized matmul reads them for up to 16 tokens); for
//                      larger token counts cuBLAS reads an fp16 version: the matrix's persistent
//                      copy when CudaBackend made them (MakeF16Copies, once at load), else one
//                      dequantized into a shared workspace on every call
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
  // Quantized types only, or null: [rows, cols] fp16 (IEEE binary16), row-major, exactly what
  // kernels::LaunchDequantizeToF16 makes of `data` (MakeF16Copies).
  const void* f16 = nullptr;
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

  int64_t bytes = 0;           // device memory held (the fp16 copies included)
  int64_t f16_copy_bytes = 0;  // of which the fp16 copies (0 without them)
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

// Bytes the fp16 copies of the quantized matrices that MatMul reads would take: the layers'
// and the output's (the token embedding is only looked up, so it is copied only when it doubles
// as the output, and then once).
int64_t F16CopyBytes(const DeviceWeights& weights);

// Makes those copies (DeviceMatrix::f16) on `stream` and synchronizes; afterwards no quantized
// matrix that MatMul reads lacks one. FAILED_PRECONDITION when they do not fit; INTERNAL for a
// device error.
Status MakeF16Copies(DeviceWeights* weights, cudaStream_t stream);

}  // namespace strata::backend::cuda
