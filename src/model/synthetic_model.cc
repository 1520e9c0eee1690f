#include "strata/model/synthetic_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <future>
#include <numbers>
#include <thread>
#include <vector>

#include "strata/model/fp16.h"
#include "strata/model/gguf_writer.h"

namespace strata::model {
namespace {

constexpr int64_t kQK_K = 256;
constexpr int64_t kSpecialTokens = 3;                    // <unk>, <s>, </s>
constexpr int64_t kMinVocab = kSpecialTokens + 256 + 1;  // and "▁" (the SPM space)

// SplitMix64 (Steele, Lea & Flood 2014): one multiply-xorshift chain per output, good enough for
// weights and fast enough for 8B of them.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Approximately N(0, 1): the Irwin-Hall sum of four 16-bit uniforms, centred and scaled.
  float Normal() {
    const uint64_t r = Next();
    const uint64_t sum = (r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48);
    constexpr float kMean = 4 * 32767.5f;
    constexpr float kInvStd = 1.0f / 37837.2f;  // sqrt(4 * (65536^2 - 1) / 12)
    return (static_cast<float>(sum) - kMean) * kInvStd;
  }

 private:
  uint64_t state_;
};

// The stream of chunk `chunk` of tensor `tensor`: independent of which thread runs it.
uint64_t ChunkSeed(uint64_t seed, uint64_t tensor, uint64_t chunk) {
  SplitMix64 mix(seed ^ (tensor * 0x9e3779b97f4a7c15ull) ^ (chunk * 0xd1b54a32d192ed03ull));
  return mix.Next();
}

enum class Kind { kMatrix, kNorm, kRopeFreqs };

struct TensorPlan {
  std::string name;
  std::vector<uint64_t> dims;
  GgmlType type;
  Kind kind;
  float stddev = 0;  // matrices
};

GgmlType MatrixType(SyntheticFtype ftype, bool wants_q6) {
  switch (ftype) {
    case SyntheticFtype::kF16:
      return GgmlType::kF16;
    case SyntheticFtype::kBF16:
      return GgmlType::kBF16;
    case SyntheticFtype::kQ4_K:
      return wants_q6 ? GgmlType::kQ6_K : GgmlType::kQ4_K;
  }
  return GgmlType::kF16;
}

std::vector<TensorPlan> Plan(const SyntheticModelSpec& s) {
  std::vector<TensorPlan> plan;
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  auto matrix = [&](std::string name, int64_t rows, int64_t cols, bool wants_q6 = false) {
    plan.push_back({std::move(name),
                    {u(cols), u(rows)},
                    MatrixType(s.ftype, wants_q6),
                    Kind::kMatrix,
                    1.0f / std::sqrt(static_cast<float>(cols))});
  };
  auto norm = [&](std::string name, int64_t n) {
    plan.push_back({std::move(name), {u(n)}, GgmlType::kF32, Kind::kNorm});
  };
  matrix("token_embd.weight", s.vocab_size, s.n_embd);
  norm("output_norm.weight", s.n_embd);
  if (!s.tied_embeddings) matrix("output.weight", s.vocab_size, s.n_embd, /*wants_q6=*/true);
  if (s.llama3_rope_factor > 0) {
    plan.push_back({"rope_freqs.weight", {u(s.head_dim / 2)}, GgmlType::kF32, Kind::kRopeFreqs});
  }
  const int64_t q_width = s.n_heads * s.head_dim;
  const int64_t kv_width = s.n_kv_heads * s.head_dim;
  for (int64_t il = 0; il < s.n_layers; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    norm(p + "attn_norm.weight", s.n_embd);
    matrix(p + "attn_q.weight", q_width, s.n_embd);
    matrix(p + "attn_k.weight", kv_width, s.n_embd);
    matrix(p + "attn_v.weight", kv_width, s.n_embd);
    matrix(p + "attn_output.weight", s.n_embd, q_width);
    norm(p + "ffn_norm.weight", s.n_embd);
    matrix(p + "ffn_gate.weight", s.n_ff, s.n_embd);
    matrix(p + "ffn_up.weight", s.n_ff, s.n_embd);
    matrix(p + "ffn_down.weight", s.n_embd, s.n_ff, /*wants_q6=*/true);
  }
  return plan;
}

uint64_t PlanBytes(const TensorPlan& t) {
  uint64_t n = 1;
  for (uint64_t d : t.dims) n *= d;
  const GgmlTypeTraits traits = TraitsOf(t.type);
  return n / traits.block_size * traits.type_size;
}

void StoreU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// Q4_K block (144 B, see dequantize_kquants.cc): x = d * sc * q - dmin * m with q uniform in
// 0..15 (std 4.61, mean 7.5). Scales sc in 8..15 and m = sc with dmin = 7.5 d centre every
// sub-block: x = d * sc * (q - 7.5), so d = stddev / (4.61 * 11.5) keeps the requested spread
// with d a normal fp16 number for any realistic width.
void FillQ4K(SplitMix64& rng, float stddev, uint8_t* block) {
  const float d = stddev / (4.61f * 11.5f);
  StoreU16(block, FloatToFp16(d));
  StoreU16(block + 2, FloatToFp16(7.5f * d));
  uint8_t sc[8];
  const uint64_t r = rng.Next();
  for (int j = 0; j < 8; ++j) sc[j] = static_cast<uint8_t>(8 + ((r >> (4 * j)) & 7));
  uint8_t* s = block + 4;
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));  // mins equal the scales
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((sc[j + 4] & 0x0f) << 4));
  }
  for (int i = 0; i < 128; i += 8) {
    const uint64_t q = rng.Next();
    std::memcpy(block + 16 + i, &q, 8);
  }
}

// Q6_K block (210 B): x = d * sc * (q - 32), q uniform in 0..63 (std 18.5); int8 scales in 4..7.
void FillQ6K(SplitMix64& rng, float stddev, uint8_t* block) {
  for (int i = 0; i < 192; i += 8) {
    const uint64_t q = rng.Next();
    std::memcpy(block + i, &q, 8);
  }
  const uint64_t r = rng.Next();
  for (int j = 0; j < 16; ++j) block[192 + j] = static_cast<uint8_t>(4 + ((r >> (2 * j)) & 3));
  StoreU16(block + 208, FloatToFp16(stddev / (18.5f * 5.5f)));
}

// Fills one matrix's bytes in chunks of rows spread over `threads` threads.
void FillMatrix(const TensorPlan& t, uint64_t seed, uint64_t tensor_index, int threads,
                std::vector<uint8_t>* out) {
  const int64_t cols = static_cast<int64_t>(t.dims[0]);
  const int64_t rows = static_cast<int64_t>(t.dims[1]);
  const GgmlTypeTraits traits = TraitsOf(t.type);
  const int64_t row_bytes = cols / traits.block_size * traits.type_size;
  out->resize(static_cast<size_t>(rows * row_bytes));
  constexpr int64_t kRowsPerChunk = 64;
  const int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  auto work = [&](int worker) {
    for (int64_t c = worker; c < chunks; c += threads) {
      SplitMix64 rng(ChunkSeed(seed, tensor_index, static_cast<uint64_t>(c)));
      const int64_t r0 = c * kRowsPerChunk;
      const int64_t r1 = std::min(rows, r0 + kRowsPerChunk);
      uint8_t* p = out->data() + r0 * row_bytes;
      const int64_t n = (r1 - r0) * cols;
      switch (t.type) {
        case GgmlType::kF16:
          for (int64_t i = 0; i < n; ++i) StoreU16(p + 2 * i, FloatToFp16(rng.Normal() * t.stddev));
          break;
        case GgmlType::kBF16:
          for (int64_t i = 0; i < n; ++i) StoreU16(p + 2 * i, FloatToBf16(rng.Normal() * t.stddev));
          break;
        case GgmlType::kQ4_K:
          for (int64_t b = 0; b < n / kQK_K; ++b) FillQ4K(rng, t.stddev, p + b * 144);
          break;
        case GgmlType::kQ6_K:
          for (int64_t b = 0; b < n / kQK_K; ++b) FillQ6K(rng, t.stddev, p + b * 210);
          break;
        default:
          break;  // Plan() makes no other matrix types
      }
    }
  };
  std::vector<std::thread> pool;
  for (int w = 1; w < threads; ++w) pool.emplace_back(work, w);
  work(0);
  for (std::thread& th : pool) th.join();
}

// Llama 3's RoPE frequency factors (Meta's apply_scaling; llama.cpp stores them as
// rope_freqs.weight and divides each frequency by its factor).
std::vector<float> Llama3RopeFactors(const SyntheticModelSpec& s) {
  constexpr double kLowFreqFactor = 1.0;
  constexpr double kHighFreqFactor = 4.0;
  constexpr double kOriginalContext = 8192.0;
  const double low_wavelen = kOriginalContext / kLowFreqFactor;
  const double high_wavelen = kOriginalContext / kHighFreqFactor;
  std::vector<float> factors(static_cast<size_t>(s.head_dim / 2));
  for (size_t i = 0; i < factors.size(); ++i) {
    const double freq = std::pow(static_cast<double>(s.rope_base),
                                 -2.0 * static_cast<double>(i) / static_cast<double>(s.head_dim));
    const double wavelen = 2.0 * std::numbers::pi / freq;
    double factor = 1.0;
    if (wavelen > low_wavelen) {
      factor = s.llama3_rope_factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth =
          (kOriginalContext / wavelen - kLowFreqFactor) / (kHighFreqFactor - kLowFreqFactor);
      factor = 1.0 / ((1.0 - smooth) / s.llama3_rope_factor + smooth);
    }
    factors[i] = static_cast<float>(factor);
  }
  return factors;
}

void AddVocab(const SyntheticModelSpec& s, GgufWriter* w) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};  // unknown, control, control
  char byte[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(byte, sizeof(byte), "<0x%02X>", b);
    tokens.emplace_back(byte);
    types.push_back(6);  // byte
  }
  // The space piece, so that text with spaces decodes back to itself (SPM writes a space as
  // U+2581), then filler pieces, distinct and never a byte token's text: "▁t260", ...
  tokens.emplace_back("\xe2\x96\x81");
  types.push_back(1);  // normal
  for (int64_t i = kMinVocab; i < s.vocab_size; ++i) {
    tokens.push_back("\xe2\x96\x81t" + std::to_string(i));
    types.push_back(1);  // normal
  }
  std::vector<float> scores(tokens.size());
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
  w->AddString("tokenizer.ggml.model", "llama");
  w->AddStringArray("tokenizer.ggml.tokens", tokens);
  w->AddFloat32Array("tokenizer.ggml.scores", scores);
  w->AddInt32Array("tokenizer.ggml.token_type", types);
  w->AddUint32("tokenizer.ggml.unknown_token_id", 0);
  w->AddUint32("tokenizer.ggml.bos_token_id", 1);
  w->AddUint32("tokenizer.ggml.eos_token_id", 2);
  w->AddBool("tokenizer.ggml.add_bos_token", true);
  w->AddBool("tokenizer.ggml.add_eos_token", false);
}

uint32_t FileType(SyntheticFtype ftype) {
  switch (ftype) {
    case SyntheticFtype::kF16:
      return 1;  // LLAMA_FTYPE_MOSTLY_F16
    case SyntheticFtype::kBF16:
      return 32;  // LLAMA_FTYPE_MOSTLY_BF16
    case SyntheticFtype::kQ4_K:
      return 15;  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  }
  return 0;
}

}  // namespace

StatusOr<SyntheticModelSpec> SyntheticModelPreset(std::string_view name) {
  SyntheticModelSpec s;
  s.name = std::string(name);
  s.n_heads = 32;
  s.n_kv_heads = 8;
  s.vocab_size = 128256;
  s.context_length = 8192;
  s.rope_base = 500000.0f;
  if (name == "llama3-8b") {
    s.n_embd = 4096;
    s.n_layers = 32;
    s.head_dim = 128;
    s.n_ff = 14336;
  } else if (name == "llama3.2-1b") {
    s.n_embd = 2048;
    s.n_layers = 16;
    s.head_dim = 64;
    s.n_ff = 8192;
    s.tied_embeddings = true;
    s.llama3_rope_factor = 32.0f;
  } else {
    return InvalidArgumentError("unknown model preset '" + std::string(name) +
                                "' (choices: llama3-8b, llama3.2-1b)");
  }
  return s;
}

StatusOr<SyntheticFtype> ParseSyntheticFtype(std::string_view name) {
  if (name == "f16") return SyntheticFtype::kF16;
  if (name == "bf16") return SyntheticFtype::kBF16;
  if (name == "q4_k") return SyntheticFtype::kQ4_K;
  return InvalidArgumentError("unknown ftype '" + std::string(name) +
                              "' (choices: f16, bf16, q4_k)");
}

std::string_view SyntheticFtypeName(SyntheticFtype ftype) {
  switch (ftype) {
    case SyntheticFtype::kF16:
      return "f16";
    case SyntheticFtype::kBF16:
      return "bf16";
    case SyntheticFtype::kQ4_K:
      return "q4_k";
  }
  return "unknown";
}

Status ValidateSyntheticModelSpec(const SyntheticModelSpec& s) {
  const std::pair<const char*, int64_t> sizes[] = {{"n_embd", s.n_embd},
                                                   {"n_layers", s.n_layers},
                                                   {"n_heads", s.n_heads},
                                                   {"n_kv_heads", s.n_kv_heads},
                                                   {"head_dim", s.head_dim},
                                                   {"n_ff", s.n_ff},
                                                   {"context_length", s.context_length}};
  for (const auto& [field, value] : sizes) {
    if (value < 1 || value > (int64_t{1} << 20)) {
      return InvalidArgumentError(std::string(field) + " must be between 1 and 1048576, got " +
                                  std::to_string(value));
    }
  }
  if (s.n_layers > 4096 || s.n_heads > 4096 || s.head_dim > 4096) {
    return InvalidArgumentError("n_layers, n_heads and head_dim must each be at most 4096");
  }
  if (s.n_heads % s.n_kv_heads != 0) {
    return InvalidArgumentError("n_heads (" + std::to_string(s.n_heads) +
                                ") must be a multiple of n_kv_heads (" +
                                std::to_string(s.n_kv_heads) + ")");
  }
  if (s.head_dim % 2 != 0) {
    return InvalidArgumentError("head_dim must be even (RoPE rotates pairs), got " +
                                std::to_string(s.head_dim));
  }
  if (s.vocab_size < kMinVocab || s.vocab_size > (int64_t{1} << 24)) {
    return InvalidArgumentError(
        "vocab_size must be between 260 (3 special, 256 byte tokens and the space) "
        "and 16777216, got " +
        std::to_string(s.vocab_size));
  }
  if (!(s.rope_base > 0) || !std::isfinite(s.rope_base)) {
    return InvalidArgumentError("rope_base must be a positive number");
  }
  if (!(s.rms_eps > 0 && s.rms_eps < 1)) return InvalidArgumentError("rms_eps must be in (0, 1)");
  if (s.llama3_rope_factor < 0 || !std::isfinite(s.llama3_rope_factor)) {
    return InvalidArgumentError("the llama3 rope factor must be positive (or 0: none)");
  }
  if (s.ftype == SyntheticFtype::kQ4_K) {
    // Every matrix row (n_embd, n_heads * head_dim, n_ff elements) holds whole 256-blocks.
    const std::pair<const char*, int64_t> rows[] = {
        {"n_embd", s.n_embd}, {"n_heads * head_dim", s.n_heads * s.head_dim}, {"n_ff", s.n_ff}};
    for (const auto& [field, value] : rows) {
      if (value % kQK_K != 0) {
        return InvalidArgumentError(std::string(field) + " (" + std::to_string(value) +
                                    ") must be a multiple of 256 for --ftype q4_k");
      }
    }
  }
  return OkStatus();
}

uint64_t SyntheticModelDataBytes(const SyntheticModelSpec& spec) {
  uint64_t total = 0;
  for (const TensorPlan& t : Plan(spec)) total += PlanBytes(t);
  return total;
}

Status WriteSyntheticModel(const SyntheticModelSpec& s, const std::string& path, int threads) {
  STRATA_RETURN_IF_ERROR(ValidateSyntheticModelSpec(s));
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());

  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddString("general.name", s.name);
  w.AddUint32("general.file_type", FileType(s.ftype));
  if (s.ftype == SyntheticFtype::kQ4_K) w.AddUint32("general.quantization_version", 2);
  const auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  w.AddUint32("llama.vocab_size", u32(s.vocab_size));
  w.AddUint32("llama.context_length", u32(s.context_length));
  w.AddUint32("llama.embedding_length", u32(s.n_embd));
  w.AddUint32("llama.block_count", u32(s.n_layers));
  w.AddUint32("llama.feed_forward_length", u32(s.n_ff));
  w.AddUint32("llama.attention.head_count", u32(s.n_heads));
  w.AddUint32("llama.attention.head_count_kv", u32(s.n_kv_heads));
  w.AddUint32("llama.attention.key_length", u32(s.head_dim));
  w.AddUint32("llama.attention.value_length", u32(s.head_dim));
  w.AddUint32("llama.rope.dimension_count", u32(s.head_dim));
  w.AddFloat32("llama.rope.freq_base", s.rope_base);
  w.AddFloat32("llama.attention.layer_norm_rms_epsilon", s.rms_eps);
  AddVocab(s, &w);

  const std::vector<TensorPlan> plan = Plan(s);
  for (const TensorPlan& t : plan) STRATA_RETURN_IF_ERROR(w.AddTensor(t.name, t.dims, t.type));
  STRATA_RETURN_IF_ERROR(w.Open(path));

  // Tensor i + 1 is generated while a writer thread writes tensor i: two buffers, one in
  // each stage (so at most two tensors are ever in memory).
  std::vector<uint8_t> buffers[2];
  std::future<Status> writing;  // declared after the buffers: an early return waits for it
  for (size_t i = 0; i < plan.size(); ++i) {
    const TensorPlan& t = plan[i];
    std::vector<uint8_t>& bytes = buffers[i % 2];
    if (t.kind == Kind::kMatrix) {
      FillMatrix(t, s.seed, i, threads, &bytes);
    } else {
      std::vector<float> values;
      if (t.kind == Kind::kRopeFreqs) {
        values = Llama3RopeFactors(s);
      } else {
        SplitMix64 rng(ChunkSeed(s.seed, i, 0));
        values.resize(t.dims[0]);
        for (float& v : values) v = 1.0f + 0.01f * rng.Normal();
      }
      bytes.resize(values.size() * sizeof(float));
      std::memcpy(bytes.data(), values.data(), bytes.size());
    }
    if (writing.valid()) STRATA_RETURN_IF_ERROR(writing.get());
    writing = std::async(std::launch::async, [&w, &bytes] { return w.WriteTensorData(bytes); });
  }
  if (writing.valid()) STRATA_RETURN_IF_ERROR(writing.get());
  return w.Close();
}

}  // namespace strata::model
