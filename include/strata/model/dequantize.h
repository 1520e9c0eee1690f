// Dequantization of ggml tensor formats to fp32, bit-exact with the reference in the `gguf`
// Python package (gguf.quants.dequantize) for: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K. Pure functions; any thread.
#pragma once

#include <cstdint>
#include <span>

#include "strata/common/status.h"
#include "strata/model/ggml_type.h"

namespace strata::model {

// True when Dequantize supports `type`.
bool CanDequantize(GgmlType type);

// Dequantizes `num_elements` values of `type` from `src` into `dst` (num_elements floats).
// INVALID_ARGUMENT when num_elements is not a multiple of the block size or `src` is not
// exactly num_elements / block_size * type_size bytes; UNIMPLEMENTED for unsupported types.
Status Dequantize(GgmlType type, std::span<const uint8_t> src, uint64_t num_elements, float* dst);

}  // namespace strata::model
