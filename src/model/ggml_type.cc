#include "strata/model/ggml_type.h"

#include "strata/common/check.h"

namespace strata::model {

std::optional<GgmlTypeTraits> GgmlTypeTraitsOf(uint32_t raw_type) {
  // Block layouts from the GGUF specification and ggml's block_* structs.
  switch (static_cast<GgmlType>(raw_type)) {
    case GgmlType::kF32:
      return GgmlTypeTraits{"F32", 1, 4};
    case GgmlType::kF16:
      return GgmlTypeTraits{"F16", 1, 2};
    case GgmlType::kQ4_0:
      return GgmlTypeTraits{"Q4_0", 32, 18};
    case GgmlType::kQ4_1:
      return GgmlTypeTraits{"Q4_1", 32, 20};
    case GgmlType::kQ5_0:
      return GgmlTypeTraits{"Q5_0", 32, 22};
    case GgmlType::kQ5_1:
      return GgmlTypeTraits{"Q5_1", 32, 24};
    case GgmlType::kQ8_0:
      return GgmlTypeTraits{"Q8_0", 32, 34};
    case GgmlType::kQ8_1:
      return GgmlTypeTraits{"Q8_1", 32, 36};
    case GgmlType::kQ2_K:
      return GgmlTypeTraits{"Q2_K", 256, 84};
    case GgmlType::kQ3_K:
      return GgmlTypeTraits{"Q3_K", 256, 110};
    case GgmlType::kQ4_K:
      return GgmlTypeTraits{"Q4_K", 256, 144};
    case GgmlType::kQ5_K:
      return GgmlTypeTraits{"Q5_K", 256, 176};
    case GgmlType::kQ6_K:
      return GgmlTypeTraits{"Q6_K", 256, 210};
    case GgmlType::kQ8_K:
      return GgmlTypeTraits{"Q8_K", 256, 292};
    case GgmlType::kIQ2_XXS:
      return GgmlTypeTraits{"IQ2_XXS", 256, 66};
    case GgmlType::kIQ2_XS:
      return GgmlTypeTraits{"IQ2_XS", 256, 74};
    case GgmlType::kIQ3_XXS:
      return GgmlTypeTraits{"IQ3_XXS", 256, 98};
    case GgmlType::kIQ1_S:
      return GgmlTypeTraits{"IQ1_S", 256, 50};
    case GgmlType::kIQ4_NL:
      return GgmlTypeTraits{"IQ4_NL", 32, 18};
    case GgmlType::kIQ3_S:
      return GgmlTypeTraits{"IQ3_S", 256, 110};
    case GgmlType::kIQ2_S:
      return GgmlTypeTraits{"IQ2_S", 256, 82};
    case GgmlType::kIQ4_XS:
      return GgmlTypeTraits{"IQ4_XS", 256, 136};
    case GgmlType::kI8:
      return GgmlTypeTraits{"I8", 1, 1};
    case GgmlType::kI16:
      return GgmlTypeTraits{"I16", 1, 2};
    case GgmlType::kI32:
      return GgmlTypeTraits{"I32", 1, 4};
    case GgmlType::kI64:
      return GgmlTypeTraits{"I64", 1, 8};
    case GgmlType::kF64:
      return GgmlTypeTraits{"F64", 1, 8};
    case GgmlType::kIQ1_M:
      return GgmlTypeTraits{"IQ1_M", 256, 56};
    case GgmlType::kBF16:
      return GgmlTypeTraits{"BF16", 1, 2};
    case GgmlType::kTQ1_0:
      return GgmlTypeTraits{"TQ1_0", 256, 54};
    case GgmlType::kTQ2_0:
      return GgmlTypeTraits{"TQ2_0", 256, 66};
    case GgmlType::kMXFP4:
      return GgmlTypeTraits{"MXFP4", 32, 17};
  }
  return std::nullopt;
}

GgmlTypeTraits TraitsOf(GgmlType type) {
  auto traits = GgmlTypeTraitsOf(static_cast<uint32_t>(type));
  STRATA_CHECK(traits.has_value());
  return *traits;
}

}  // namespace strata::model
