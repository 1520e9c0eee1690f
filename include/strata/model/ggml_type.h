// Tensor storage types as numbered by ggml/GGUF, with their block layouts.
//
// A tensor row of `n` elements of type T occupies n / BlockSize(T) blocks of TypeSize(T) bytes;
// n must be a multiple of the block size. Values are the on-disk enum values and never change.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace strata::model {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

struct GgmlTypeTraits {
  std::string_view name;  // "Q4_K", as llama.cpp prints it
  uint32_t block_size;    // elements per block
  uint32_t type_size;     // bytes per block
};

// Traits of a raw on-disk type value; nullopt for values no ggml version defines (or removed
// ones, such as the old Q4_2/Q4_3 and the repacked Q4_0_4_4 family).
std::optional<GgmlTypeTraits> GgmlTypeTraitsOf(uint32_t raw_type);

// Traits of a known type (never fails for an enumerator above).
GgmlTypeTraits TraitsOf(GgmlType type);

inline std::string_view GgmlTypeName(GgmlType type) { return TraitsOf(type).name; }

}  // namespace strata::model
