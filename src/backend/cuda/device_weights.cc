#include "device_weights.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "cuda_status.h"
#include "strata/kernels/dequantize.h"
#include "strata/model/dequantize.h"
#include "strata/model/fp16.h"

namespace strata::backend::cuda {
namespace {

using model::GgmlType;

// Rows converted on the host per chunk when a matrix is dequantized (bounds the host memory a
// conversion takes to ~64 MiB of floats).
constexpr int64_t kConvertChunkElements = int64_t{16} << 20;

class Uploader {
 public:
  Uploader(DeviceWeights* out, cudaStream_t stream) : out_(out), stream_(stream) {}

  // Copies `bytes` host bytes into a new device buffer; returns its pointer.
  StatusOr<void*> Copy(const void* host, int64_t bytes, const std::string& name) {
    STRATA_ASSIGN_OR_RETURN(DeviceBuffer buf, DeviceBuffer::Allocate(bytes, "tensor " + name));
    if (bytes > 0) {
      STRATA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(buf.get(), host, static_cast<size_t>(bytes),
                                                  cudaMemcpyHostToDevice, stream_));
      // The host source may be a temporary: wait until the copy has read it.
      STRATA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    }
    void* p = buf.get();
    out_->bytes += bytes;
    out_->storage.push_back(std::move(buf));
    return p;
  }

  // An fp32 vector; null for an empty (absent) one.
  StatusOr<const float*> Vector(const std::vector<float>& v, const std::string& name) {
    if (v.empty()) return static_cast<const float*>(nullptr);
    STRATA_ASSIGN_OR_RETURN(void* p, Copy(v.data(), static_cast<int64_t>(v.size() * 4), name));
    return static_cast<const float*>(p);
  }

  StatusOr<DeviceMatrix> Matrix(const model::MatrixView& m) {
    DeviceMatrix d;
    d.name = m.name;
    d.rows = m.rows;
    d.cols = m.cols;
    out_->max_cols = std::max(out_->max_cols, m.cols);
    switch (m.type) {
      case GgmlType::kF32:
      case GgmlType::kF16:
      case GgmlType::kQ8_0:
      case GgmlType::kQ4_K:
      case GgmlType::kQ6_K: {
        d.type = m.type;
        STRATA_ASSIGN_OR_RETURN(void* p, Copy(m.data, static_cast<int64_t>(m.bytes), m.name));
        d.data = p;
        if (IsDeviceQuantized(m.type)) {
          out_->max_quantized_elements = std::max(out_->max_quantized_elements, m.rows * m.cols);
        }
        return d;
      }
      default:
        break;
    }
    // Converted on the host, chunk by chunk of rows: BF16 to F32 (exact), the rest to F16.
    d.type = m.type == GgmlType::kBF16 ? GgmlType::kF32 : GgmlType::kF16;
    const int64_t out_elem_bytes = d.type == GgmlType::kF32 ? 4 : 2;
    STRATA_ASSIGN_OR_RETURN(
        DeviceBuffer buf,
        DeviceBuffer::Allocate(m.rows * m.cols * out_elem_bytes, "tensor " + m.name));
    const model::GgmlTypeTraits traits = model::TraitsOf(m.type);
    const uint64_t row_bytes = static_cast<uint64_t>(m.cols) / traits.block_size * traits.type_size;
    const int64_t chunk_rows = std::max<int64_t>(1, kConvertChunkElements / m.cols);
    std::vector<float> f32;
    std::vector<uint16_t> f16;
    for (int64_t r0 = 0; r0 < m.rows; r0 += chunk_rows) {
      const int64_t rows = std::min(chunk_rows, m.rows - r0);
      const uint64_t elements = static_cast<uint64_t>(rows * m.cols);
      f32.resize(elements);
      Status s = model::Dequantize(
          m.type, std::span<const uint8_t>(m.data + r0 * row_bytes, rows * row_bytes), elements,
          f32.data());
      if (!s.ok()) return s.WithContext("tensor '" + m.name + "'");
      const void* src = f32.data();
      if (d.type == GgmlType::kF16) {
        f16.resize(elements);
        for (uint64_t i = 0; i < elements; ++i) f16[i] = model::FloatToFp16(f32[i]);
        src = f16.data();
      }
      uint8_t* dst = buf.as<uint8_t>() + r0 * m.cols * out_elem_bytes;
      STRATA_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(dst, src, elements * out_elem_bytes, cudaMemcpyHostToDevice, stream_));
      STRATA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    }
    d.data = buf.get();
    out_->bytes += buf.bytes();
    out_->storage.push_back(std::move(buf));
    return d;
  }

 private:
  DeviceWeights* out_;
  cudaStream_t stream_;
};

// Calls f(matrix) for every matrix MatMul reads: each layer's seven and the output (the token
// embedding is looked up by row, never multiplied).
template <typename Weights, typename F>
void ForEachMatMulMatrix(Weights& w, F&& f) {
  for (auto& l : w.layers) {
    for (auto* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down}) f(*m);
  }
  f(w.output);
}

}  // namespace

bool IsDeviceQuantized(model::GgmlType type) {
  return type == GgmlType::kQ8_0 || type == GgmlType::kQ4_K || type == GgmlType::kQ6_K;
}

StatusOr<DeviceWeights> UploadWeights(const model::ModelWeights& weights,
                                      const model::ModelConfig& config, cudaStream_t stream) {
  DeviceWeights d;
  Uploader up(&d, stream);
  STRATA_ASSIGN_OR_RETURN(d.token_embd, up.Matrix(weights.token_embd));
  if (weights.tied_output) {
    d.output = d.token_embd;
  } else {
    STRATA_ASSIGN_OR_RETURN(d.output, up.Matrix(weights.output));
  }
  STRATA_ASSIGN_OR_RETURN(d.output_norm, up.Vector(weights.output_norm, "output_norm"));
  STRATA_ASSIGN_OR_RETURN(d.rope_freqs, up.Vector(weights.rope_freqs, "rope_freqs"));
  d.layers.resize(config.n_layers);
  for (int64_t il = 0; il < config.n_layers; ++il) {
    const model::LayerWeights& w = weights.layers[il];
    DeviceLayer& l = d.layers[il];
    const std::string p = "blk." + std::to_string(il) + ".";
    STRATA_ASSIGN_OR_RETURN(l.attn_norm, up.Vector(w.attn_norm, p + "attn_norm"));
    STRATA_ASSIGN_OR_RETURN(l.wq, up.Matrix(w.wq));
    STRATA_ASSIGN_OR_RETURN(l.wk, up.Matrix(w.wk));
    STRATA_ASSIGN_OR_RETURN(l.wv, up.Matrix(w.wv));
    STRATA_ASSIGN_OR_RETURN(l.wo, up.Matrix(w.wo));
    STRATA_ASSIGN_OR_RETURN(l.bq, up.Vector(w.bq, p + "attn_q.bias"));
    STRATA_ASSIGN_OR_RETURN(l.bk, up.Vector(w.bk, p + "attn_k.bias"));
    STRATA_ASSIGN_OR_RETURN(l.bv, up.Vector(w.bv, p + "attn_v.bias"));
    STRATA_ASSIGN_OR_RETURN(l.q_norm, up.Vector(w.q_norm, p + "attn_q_norm"));
    STRATA_ASSIGN_OR_RETURN(l.k_norm, up.Vector(w.k_norm, p + "attn_k_norm"));
    STRATA_ASSIGN_OR_RETURN(l.post_attn_norm, up.Vector(w.post_attn_norm, p + "post_attn_norm"));
    STRATA_ASSIGN_OR_RETURN(l.ffn_norm, up.Vector(w.ffn_norm, p + "ffn_norm"));
    STRATA_ASSIGN_OR_RETURN(l.gate, up.Matrix(w.gate));
    STRATA_ASSIGN_OR_RETURN(l.up, up.Matrix(w.up));
    STRATA_ASSIGN_OR_RETURN(l.down, up.Matrix(w.down));
    STRATA_ASSIGN_OR_RETURN(l.post_ffn_norm, up.Vector(w.post_ffn_norm, p + "post_ffn_norm"));
  }
  return d;
}

int64_t F16CopyBytes(const DeviceWeights& weights) {
  int64_t bytes = 0;
  ForEachMatMulMatrix(weights, [&](const DeviceMatrix& m) {
    if (IsDeviceQuantized(m.type)) bytes += m.rows * m.cols * 2;
  });
  return bytes;
}

Status MakeF16Copies(DeviceWeights* weights, cudaStream_t stream) {
  Status status;
  ForEachMatMulMatrix(*weights, [&](DeviceMatrix& m) {
    if (!status.ok() || !IsDeviceQuantized(m.type) || m.f16 != nullptr) return;
    const int64_t elements = m.rows * m.cols;
    StatusOr<DeviceBuffer> buf = DeviceBuffer::Allocate(elements * 2, "fp16 copy of " + m.name);
    if (!buf.ok()) {
      status = buf.status();
      return;
    }
    // The per-call path's own kernel: the copy holds the very values it would compute.
    status = CudaStatus(
        kernels::LaunchDequantizeToF16(m.data, static_cast<kernels::DequantizeType>(m.type),
                                       buf->get(), elements, stream),
        "dequantize " + m.name + " to its fp16 copy");
    if (!status.ok()) return;
    m.f16 = buf->get();
    weights->bytes += buf->bytes();
    weights->f16_copy_bytes += buf->bytes();
    weights->storage.push_back(std::move(*buf));
  });
  STRATA_RETURN_IF_ERROR(status);
  STRATA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return OkStatus();
}

}  // namespace strata::backend::cuda
