// CpuBackend: the transformer forward pass on CPU threads, over quantized weights that stay in
// the mapped GGUF file and a paged KV cache in host memory.
//
// Thread rules: one driving thread calls Forward (see Backend); the backend's own thread pool
// runs the parallel parts. The GgufFile passed to Create must outlive the backend.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <utility>

#include "strata/backend/backend.h"
#include "strata/backend/cpu/kv_storage.h"
#include "strata/backend/cpu/matmul.h"
#include "strata/backend/cpu/matmul_plan.h"
#include "strata/backend/cpu/thread_pool.h"
#include "strata/model/gguf_file.h"
#include "strata/model/model_config.h"
#include "strata/model/model_weights.h"

namespace strata::backend::cpu {

struct CpuBackendOptions {
  int num_threads = 0;                  // 0: one per core
  int64_t kv_budget_bytes = 256 << 20;  // memory for the KV cache
  KvDtype kv_dtype = KvDtype::kF16;
  int32_t block_size = 16;  // tokens per KV block
  // Activation precision of the weight matmuls (matmul.h, matmul_plan.h). kInt8 and kAuto are
  // opt-in: int8 is faster on AVX-512 VNNI CPUs, with logits that differ slightly from fp32's;
  // kAuto times the model's matrices both ways when the backend is created (a fraction of a
  // second for small models) and runs each weight type at the faster precision.
  MatMulPrecisionSetting matmul_precision = MatMulPrecisionSetting::kFp32;
  // When set, used as is instead of the setting (tests; a plan measured before).
  std::optional<MatMulPlan> matmul_plan;
  // > 0: run only the model's first `max_layers` layers, then its output norm and head (the
  // draft of self-speculation: the same weights, truncated). 0 or >= the model's: all.
  int32_t max_layers = 0;
};

class CpuBackend final : public Backend {
 public:
  // Reads the config and weights; FAILED_PRECONDITION when the KV budget holds no block.
  static StatusOr<std::unique_ptr<CpuBackend>> Create(const model::GgufFile& file,
                                                      const CpuBackendOptions& options);

  Status Forward(const Batch& batch, std::vector<float>* logits) override;
  const model::ModelConfig& config() const override { return config_; }
  KvGeometry kv_geometry() const override;
  std::string_view name() const override { return "cpu"; }
  std::string Describe() const override;
  // On pool_, whose workers wait between steps.
  void ParallelForHost(int64_t n, const std::function<void(int64_t, int64_t)>& fn) override;

  const model::ModelWeights& weights() const { return weights_; }
  int num_threads() const { return pool_->size(); }
  const MatMulPlan& matmul_plan() const { return matmul_plan_; }

 private:
  CpuBackend() = default;

  // The plan the options ask for; kAuto measures it on pool_.
  MatMulPlan ChooseMatMulPlan();
  Status Validate(const Batch& batch) const;
  void Embed(const Batch& batch, float* x);
  void AttentionBlock(int64_t layer, const Batch& batch, int64_t n_tokens);
  void FeedForwardBlock(int64_t layer, int64_t n_tokens);
  void MatMul(const model::MatrixView& w, const float* x, int64_t n_tokens, float* y);
  // The same for several matrices over one input (MatMulSameInput: one quantization of x and
  // one parallel region for the int8 ones).
  void MatMulSameInput(std::initializer_list<std::pair<const model::MatrixView*, float*>> outputs,
                       const float* x, int64_t n_tokens);

  model::ModelConfig config_;
  model::ModelWeights weights_;
  CpuBackendOptions options_;
  MatMulPlan matmul_plan_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<KvStorage> kv_;

  // Activations of the current step, sized for the largest batch seen so far.
  std::vector<float> x_;      // [n_tokens, n_embd] residual stream
  std::vector<float> h_;      // [n_tokens, n_embd] normed input of a block
  std::vector<float> q_;      // [n_tokens, n_heads * head_dim_k]
  std::vector<float> k_;      // [n_tokens, n_kv_heads * head_dim_k]
  std::vector<float> v_;      // [n_tokens, n_kv_heads * head_dim_v]
  std::vector<float> attn_;   // [n_tokens, n_heads * head_dim_v]
  std::vector<float> o_;      // [n_tokens, n_embd]
  std::vector<float> gate_;   // [n_tokens, n_ff]
  std::vector<float> up_;     // [n_tokens, n_ff]
  std::vector<int64_t> pos_;  // [n_tokens] absolute positions
  std::vector<float> rope_;   // [n_tokens, 2 tables, rope_dim]: global and sliding bases
};

}  // namespace strata::backend::cpu
