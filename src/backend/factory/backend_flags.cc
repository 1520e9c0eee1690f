#include "strata/backend/backend_flags.h"

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace strata::backend {

const char kBackendFlagsUsage[] =
    "  --backend auto|cpu|cuda  where the model runs (default auto: cuda when built with it and\n"
    "                           a device is visible, else cpu)\n"
    "  --device N               CUDA device ordinal (default 0)\n"
    "  --gpu-memory-fraction F  CUDA: share of free memory for the KV cache (default 0.9)\n"
    "  --cuda-graphs true|false CUDA: replay decode steps as graphs (default true)\n"
    "  --cuda-f16-weights auto|on|off\n"
    "                           CUDA: fp16 copies of quantized weights for batches of more than\n"
    "                           16 tokens (default auto: when they leave the KV cache at least\n"
    "                           half of its memory)\n"
    "  --threads N              CPU threads (default: one per core)\n"
    "  --kv-budget-bytes N      KV cache memory (default: cpu 268435456, cuda from the fraction)\n"
    "  --kv-dtype f16|f32|q8_0  KV cache storage type (default f16; f32 and q8_0 on cpu only)\n"
    "  --matmul-precision fp32|int8|auto\n"
    "                           CPU matmul activations (default fp32; int8: faster on AVX-512\n"
    "                           VNNI CPUs, one token or many, slightly different logits; auto:\n"
    "                           per weight type, the one measured faster at start-up)\n";

namespace {

Status Bad(std::string_view flag, std::string_view value, std::string_view want) {
  return InvalidArgumentError(std::string(flag) + " must be " + std::string(want) + ", got '" +
                              std::string(value) + "'");
}

bool ParseInt(std::string_view value, int64_t min, int64_t max, int64_t* out) {
  int64_t v = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, v);
  if (ec != std::errc() || ptr != end || v < min || v > max) return false;
  *out = v;
  return true;
}

}  // namespace

bool IsBackendFlag(std::string_view flag) {
  return flag == "--backend" || flag == "--device" || flag == "--gpu-memory-fraction" ||
         flag == "--cuda-graphs" || flag == "--cuda-f16-weights" || flag == "--threads" ||
         flag == "--kv-budget-bytes" || flag == "--kv-dtype" || flag == "--matmul-precision";
}

Status ApplyBackendFlag(std::string_view flag, std::string_view value, BackendSpec* spec) {
  int64_t n = 0;
  if (flag == "--backend") {
    StatusOr<BackendKind> kind = ParseBackendKind(value);
    if (!kind.ok()) return Bad(flag, value, "auto, cpu or cuda");
    spec->kind = *kind;
  } else if (flag == "--device") {
    if (!ParseInt(value, 0, 1024, &n)) return Bad(flag, value, "an integer from 0 to 1024");
    spec->device = static_cast<int32_t>(n);
  } else if (flag == "--gpu-memory-fraction") {
    const std::string text(value);
    char* end = nullptr;
    const double f = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(f > 0.0 && f <= 1.0)) {
      return Bad(flag, value, "a number in (0, 1]");
    }
    spec->gpu_memory_fraction = f;
  } else if (flag == "--cuda-graphs") {
    if (value == "true" || value == "on" || value == "1") {
      spec->cuda_graphs = true;
    } else if (value == "false" || value == "off" || value == "0") {
      spec->cuda_graphs = false;
    } else {
      return Bad(flag, value, "true or false");
    }
  } else if (flag == "--cuda-f16-weights") {
    StatusOr<cuda::F16WeightCopies> copies = ParseF16WeightCopies(value);
    if (!copies.ok()) return Bad(flag, value, "auto, on or off");
    spec->cuda_f16_weights = *copies;
  } else if (flag == "--threads") {
    if (!ParseInt(value, 0, 1024, &n)) return Bad(flag, value, "an integer from 0 to 1024");
    spec->threads = static_cast<int32_t>(n);
  } else if (flag == "--kv-budget-bytes") {
    if (!ParseInt(value, 0, INT64_MAX, &n)) return Bad(flag, value, "an integer >= 0");
    spec->kv_budget_bytes = n;
  } else if (flag == "--kv-dtype") {
    if (!cpu::ParseKvDtype(value, &spec->kv_dtype)) return Bad(flag, value, "f16, f32 or q8_0");
  } else if (flag == "--matmul-precision") {
    cpu::MatMulPrecisionSetting precision;
    if (!cpu::ParseMatMulPrecisionSetting(value, &precision)) {
      return Bad(flag, value, "fp32, int8 or auto");
    }
    spec->matmul_precision = precision;
  } else {
    return InvalidArgumentError("unknown backend flag " + std::string(flag));
  }
  return OkStatus();
}

}  // namespace strata::backend
