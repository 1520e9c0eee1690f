#include "strata/model/model_weights.h"

#include "strata/model/dequantize.h"

namespace strata::model {
namespace {

std::string Dims(const GgufTensorInfo& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.dims.size(); ++i) s += (i ? ", " : "") + std::to_string(t.dims[i]);
  return s + "]";
}

class Loader {
 public:
  explicit Loader(const GgufFile& file) : file_(file) {}

  // A 2-D matrix with ne0 = cols and ne1 = rows (rows = 0: any).
  StatusOr<MatrixView> Matrix(const std::string& name, int64_t rows, int64_t cols,
                              bool required = true) {
    const GgufTensorInfo* t = file_.FindTensor(name);
    if (t == nullptr) {
      if (!required) return MatrixView{};
      return NotFoundError("tensor '" + name + "' is missing");
    }
    if (t->dims.size() != 2 || static_cast<int64_t>(t->dims[0]) != cols ||
        (rows != 0 && static_cast<int64_t>(t->dims[1]) != rows)) {
      return InvalidArgumentError("tensor '" + name + "' has shape " + Dims(*t) + ", expected [" +
                                  std::to_string(cols) + ", " +
                                  (rows ? std::to_string(rows) : std::string("*")) + "]");
    }
    if (!CanDequantize(t->type)) {
      return UnimplementedError("tensor '" + name + "' has type " +
                                std::string(GgmlTypeName(t->type)) + ", which is not supported");
    }
    MatrixView m;
    m.name = name;
    m.type = t->type;
    m.data = file_.TensorData(*t).data();
    m.rows = static_cast<int64_t>(t->dims[1]);
    m.cols = cols;
    m.bytes = t->num_bytes;
    return m;
  }

  // A 1-D vector of `n` values, converted to fp32 (empty when absent and not required).
  StatusOr<std::vector<float>> Vector(const std::string& name, int64_t n, bool required = true) {
    const GgufTensorInfo* t = file_.FindTensor(name);
    if (t == nullptr) {
      if (!required) return std::vector<float>{};
      return NotFoundError("tensor '" + name + "' is missing");
    }
    if (t->dims.size() != 1 || static_cast<int64_t>(t->dims[0]) != n) {
      return InvalidArgumentError("tensor '" + name + "' has shape " + Dims(*t) + ", expected [" +
                                  std::to_string(n) + "]");
    }
    std::vector<float> out(n);
    Status s = Dequantize(t->type, file_.TensorData(*t), n, out.data());
    if (!s.ok()) return s.WithContext("tensor '" + name + "'");
    return out;
  }

 private:
  const GgufFile& file_;
};

}  // namespace

StatusOr<ModelWeights> ModelWeights::FromGguf(const GgufFile& file, ModelConfig* config) {
  ModelConfig& c = *config;
  Loader load(file);
  ModelWeights w;
  STRATA_ASSIGN_OR_RETURN(w.token_embd, load.Matrix("token_embd.weight", 0, c.n_embd));
  c.vocab_size = w.token_embd.rows;
  STRATA_ASSIGN_OR_RETURN(w.output, load.Matrix("output.weight", c.vocab_size, c.n_embd, false));
  if (!w.output.present()) {
    w.output = w.token_embd;
    w.tied_output = true;
  }
  STRATA_ASSIGN_OR_RETURN(w.output_norm, load.Vector("output_norm.weight", c.n_embd));
  STRATA_ASSIGN_OR_RETURN(w.rope_freqs, load.Vector("rope_freqs.weight", c.rope_dim / 2, false));

  const int64_t q_width = c.n_heads * c.head_dim_k;
  const int64_t k_width = c.n_kv_heads * c.head_dim_k;
  const int64_t v_width = c.n_kv_heads * c.head_dim_v;
  const int64_t o_width = c.n_heads * c.head_dim_v;
  w.layers.resize(c.n_layers);
  for (int64_t il = 0; il < c.n_layers; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[il];
    STRATA_ASSIGN_OR_RETURN(l.attn_norm, load.Vector(p + "attn_norm.weight", c.n_embd));
    STRATA_ASSIGN_OR_RETURN(l.wq, load.Matrix(p + "attn_q.weight", q_width, c.n_embd));
    STRATA_ASSIGN_OR_RETURN(l.wk, load.Matrix(p + "attn_k.weight", k_width, c.n_embd));
    STRATA_ASSIGN_OR_RETURN(l.wv, load.Matrix(p + "attn_v.weight", v_width, c.n_embd));
    STRATA_ASSIGN_OR_RETURN(l.wo, load.Matrix(p + "attn_output.weight", c.n_embd, o_width));
    STRATA_ASSIGN_OR_RETURN(l.bq, load.Vector(p + "attn_q.bias", q_width, false));
    STRATA_ASSIGN_OR_RETURN(l.bk, load.Vector(p + "attn_k.bias", k_width, false));
    STRATA_ASSIGN_OR_RETURN(l.bv, load.Vector(p + "attn_v.bias", v_width, false));
    if (c.has_qkv_bias && (l.bq.empty() || l.bk.empty() || l.bv.empty())) {
      return NotFoundError("tensor '" + p + "attn_q/k/v.bias' is missing (" + c.arch_name +
                           " needs them)");
    }
    STRATA_ASSIGN_OR_RETURN(l.ffn_norm, load.Vector(p + "ffn_norm.weight", c.n_embd));
    STRATA_ASSIGN_OR_RETURN(l.gate, load.Matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd));
    STRATA_ASSIGN_OR_RETURN(l.up, load.Matrix(p + "ffn_up.weight", c.n_ff, c.n_embd));
    STRATA_ASSIGN_OR_RETURN(l.down, load.Matrix(p + "ffn_down.weight", c.n_embd, c.n_ff));
    if (c.has_qk_norm) {
      STRATA_ASSIGN_OR_RETURN(l.q_norm, load.Vector(p + "attn_q_norm.weight", c.head_dim_k));
      STRATA_ASSIGN_OR_RETURN(l.k_norm, load.Vector(p + "attn_k_norm.weight", c.head_dim_k));
    }
    if (c.has_post_norms) {
      STRATA_ASSIGN_OR_RETURN(l.post_attn_norm,
                              load.Vector(p + "post_attention_norm.weight", c.n_embd));
      STRATA_ASSIGN_OR_RETURN(l.post_ffn_norm, load.Vector(p + "post_ffw_norm.weight", c.n_embd));
    }
  }
  return w;
}

uint64_t ModelWeights::MatrixBytes() const {
  uint64_t total = output.bytes;
  for (const LayerWeights& l : layers) {
    total += l.wq.bytes + l.wk.bytes + l.wv.bytes + l.wo.bytes + l.gate.bytes + l.up.bytes +
             l.down.bytes;
  }
  return total;
}

}  // namespace strata::model
