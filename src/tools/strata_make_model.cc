// strata-make-model: writes a llama-architecture GGUF file with seeded random weights, shaped
// like a real model (presets) or any shape (--custom), for benchmarks and sizing on machines
// without the real weights. See strata/model/synthetic_model.h for what the file holds.
//
//   strata-make-model --preset llama3-8b --ftype q4_k --out /tmp/llama3-8b-q4_k.gguf
//   strata-make-model --custom --n-embd 256 --layers 2 --heads 4 --kv-heads 2 --head-dim 64
//                     --ff 512 --vocab 512 --context 256 --ftype f16 --out tiny.gguf
//
// Exit codes: 0 written, 1 a write error, 2 a bad flag (one line on stderr naming it).
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

#include "strata/common/tool_args.h"
#include "strata/model/synthetic_model.h"

namespace {

constexpr strata::ToolArgs kArgs("strata-make-model", /*usage_exit_code=*/2);

using strata::model::SyntheticModelSpec;

constexpr char kUsage[] =
    "usage: strata-make-model (--preset NAME | --custom SHAPE-FLAGS) --out FILE.gguf [flags]\n"
    "  --preset NAME       llama3-8b or llama3.2-1b\n"
    "  --custom            a shape given by the flags below (all but --tied and --rope-factor\n"
    "                      required); with --preset they override the preset's values\n"
    "    --n-embd N --layers N --heads N --kv-heads N --head-dim N --ff N --vocab N\n"
    "    --context N --rope-base X --rms-eps X --tied --untied\n"
    "  --rope-factor X     llama3 RoPE frequency factors with scale X (0: none)\n"
    "  --ftype T           f16 (default), bf16 or q4_k (Q4_K, Q6_K output and ffn_down)\n"
    "  --seed S            weights' seed (default 1)\n"
    "  --threads N         generator threads (default: one per core)\n"
    "  --out FILE          where to write (required)\n";

}  // namespace

int main(int argc, char** argv) {
  std::string preset;
  bool custom = false;
  std::string out;
  int threads = 0;
  SyntheticModelSpec spec;
  spec.seed = 1;
  bool ftype_set = false;
  strata::model::SyntheticFtype ftype = strata::model::SyntheticFtype::kF16;
  // Shape flags are applied after the preset, so they override it.
  SyntheticModelSpec overrides;
  bool set_tied = false, tied = false, set_factor = false, set_rope_base = false,
       set_rms_eps = false;
  float factor = 0;

  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--custom") {
      custom = true;
      continue;
    }
    if (arg == "--tied" || arg == "--untied") {
      set_tied = true;
      tied = arg == "--tied";
      continue;
    }
    if (i + 1 >= argc) kArgs.Fail(arg + " needs a value (or is unknown)\n" + kUsage, 2);
    const char* value = argv[++i];
    if (arg == "--preset") {
      preset = value;
    } else if (arg == "--out") {
      out = value;
    } else if (arg == "--ftype") {
      auto parsed = strata::model::ParseSyntheticFtype(value);
      if (!parsed.ok()) kArgs.Fail("--ftype: " + parsed.status().message(), 2);
      ftype = *parsed;
      ftype_set = true;
    } else if (arg == "--seed") {
      spec.seed = static_cast<uint64_t>(kArgs.Int(arg, value, 0));
    } else if (arg == "--threads") {
      threads = static_cast<int>(kArgs.Int(arg, value, 0));
    } else if (arg == "--n-embd") {
      overrides.n_embd = kArgs.Int(arg, value, 1);
    } else if (arg == "--layers") {
      overrides.n_layers = kArgs.Int(arg, value, 1);
    } else if (arg == "--heads") {
      overrides.n_heads = kArgs.Int(arg, value, 1);
    } else if (arg == "--kv-heads") {
      overrides.n_kv_heads = kArgs.Int(arg, value, 1);
    } else if (arg == "--head-dim") {
      overrides.head_dim = kArgs.Int(arg, value, 1);
    } else if (arg == "--ff") {
      overrides.n_ff = kArgs.Int(arg, value, 1);
    } else if (arg == "--vocab") {
      overrides.vocab_size = kArgs.Int(arg, value, 1);
    } else if (arg == "--context") {
      overrides.context_length = kArgs.Int(arg, value, 1);
    } else if (arg == "--rope-base") {
      overrides.rope_base = static_cast<float>(kArgs.Number(arg, value));
      set_rope_base = true;
    } else if (arg == "--rms-eps") {
      overrides.rms_eps = static_cast<float>(kArgs.Number(arg, value));
      set_rms_eps = true;
    } else if (arg == "--rope-factor") {
      factor = static_cast<float>(kArgs.Number(arg, value));
      set_factor = true;
    } else {
      kArgs.Fail("unknown flag '" + arg + "'\n" + kUsage, 2);
    }
  }

  if (preset.empty() == !custom) {
    kArgs.Fail("give exactly one of --preset NAME or --custom\n" + std::string(kUsage), 2);
  }
  if (out.empty()) kArgs.Fail("--out FILE is required", 2);
  if (!preset.empty()) {
    auto p = strata::model::SyntheticModelPreset(preset);
    if (!p.ok()) kArgs.Fail("--preset: " + p.status().message(), 2);
    const uint64_t seed = spec.seed;
    spec = *p;
    spec.seed = seed;
  } else {
    spec.name = "custom";
    const std::pair<const char*, int64_t> required[] = {
        {"--n-embd", overrides.n_embd},     {"--layers", overrides.n_layers},
        {"--heads", overrides.n_heads},     {"--kv-heads", overrides.n_kv_heads},
        {"--head-dim", overrides.head_dim}, {"--ff", overrides.n_ff},
        {"--vocab", overrides.vocab_size},  {"--context", overrides.context_length}};
    for (const auto& [flag, v] : required) {
      if (v == 0) kArgs.Fail(std::string("--custom needs ") + flag, 2);
    }
  }
  if (overrides.n_embd) spec.n_embd = overrides.n_embd;
  if (overrides.n_layers) spec.n_layers = overrides.n_layers;
  if (overrides.n_heads) spec.n_heads = overrides.n_heads;
  if (overrides.n_kv_heads) spec.n_kv_heads = overrides.n_kv_heads;
  if (overrides.head_dim) spec.head_dim = overrides.head_dim;
  if (overrides.n_ff) spec.n_ff = overrides.n_ff;
  if (overrides.vocab_size) spec.vocab_size = overrides.vocab_size;
  if (overrides.context_length) spec.context_length = overrides.context_length;
  if (set_rope_base) spec.rope_base = overrides.rope_base;
  if (set_rms_eps) spec.rms_eps = overrides.rms_eps;
  if (set_tied) spec.tied_embeddings = tied;
  if (set_factor) spec.llama3_rope_factor = factor;
  if (ftype_set) spec.ftype = ftype;

  strata::Status valid = strata::model::ValidateSyntheticModelSpec(spec);
  if (!valid.ok()) kArgs.Fail(valid.message(), 2);

  const uint64_t bytes = strata::model::SyntheticModelDataBytes(spec);
  std::fprintf(stderr, "strata-make-model: writing %s (%s, %s, %.2f GiB of tensors)\n", out.c_str(),
               spec.name.c_str(),
               std::string(strata::model::SyntheticFtypeName(spec.ftype)).c_str(),
               static_cast<double>(bytes) / (1 << 30));
  const auto start = std::chrono::steady_clock::now();
  strata::Status s = strata::model::WriteSyntheticModel(spec, out, threads);
  if (!s.ok()) kArgs.Fail(s.ToString(), 1);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "strata-make-model: done in %.1f s (%.2f GiB/s)\n", seconds,
               static_cast<double>(bytes) / (1 << 30) / seconds);
  return 0;
}
