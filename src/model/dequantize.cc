#include "strata/model/dequantize.h"

#include <string>

#include "dequantize_internal.h"
#include "strata/common/check.h"
#include "strata/common/checked_math.h"

namespace strata::model {
namespace {

using Kernel = void (*)(const uint8_t* src, uint64_t num_blocks, float* dst);

Kernel KernelFor(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return internal::DequantizeF32;
    case GgmlType::kF16:
      return internal::DequantizeF16;
    case GgmlType::kBF16:
      return internal::DequantizeBF16;
    case GgmlType::kQ4_0:
      return internal::DequantizeQ4_0;
    case GgmlType::kQ4_1:
      return internal::DequantizeQ4_1;
    case GgmlType::kQ5_0:
      return internal::DequantizeQ5_0;
    case GgmlType::kQ5_1:
      return internal::DequantizeQ5_1;
    case GgmlType::kQ8_0:
      return internal::DequantizeQ8_0;
    case GgmlType::kQ2_K:
      return internal::DequantizeQ2_K;
    case GgmlType::kQ3_K:
      return internal::DequantizeQ3_K;
    case GgmlType::kQ4_K:
      return internal::DequantizeQ4_K;
    case GgmlType::kQ5_K:
      return internal::DequantizeQ5_K;
    case GgmlType::kQ6_K:
      return internal::DequantizeQ6_K;
    default:
      return nullptr;
  }
}

}  // namespace

bool CanDequantize(GgmlType type) { return KernelFor(type) != nullptr; }

Status Dequantize(GgmlType type, std::span<const uint8_t> src, uint64_t num_elements, float* dst) {
  const uint32_t raw_type = static_cast<uint32_t>(type);
  const auto traits = GgmlTypeTraitsOf(raw_type);
  const Kernel kernel = KernelFor(type);
  if (kernel == nullptr) {
    const std::string name =
        traits ? std::string(traits->name) : "unknown type " + std::to_string(raw_type);
    return UnimplementedError("dequantization of " + name + " is not implemented");
  }
  if (num_elements % traits->block_size != 0) {
    return InvalidArgumentError(std::string(traits->name) + ": " + std::to_string(num_elements) +
                                " elements is not a multiple of the block size " +
                                std::to_string(traits->block_size));
  }
  const uint64_t num_blocks = num_elements / traits->block_size;
  uint64_t expected_bytes = 0;
  if (!CheckedMul(num_blocks, traits->type_size, &expected_bytes) || expected_bytes != src.size()) {
    return InvalidArgumentError(std::string(traits->name) + ": " + std::to_string(num_elements) +
                                " elements take " + std::to_string(num_blocks) + " blocks of " +
                                std::to_string(traits->type_size) + " bytes, got " +
                                std::to_string(src.size()) + " bytes");
  }
  if (num_blocks == 0) return OkStatus();
  STRATA_CHECK(dst != nullptr);
  kernel(src.data(), num_blocks, dst);
  return OkStatus();
}

}  // namespace strata::model
