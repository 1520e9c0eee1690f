// Token masks: which token ids a logits row may be sampled from, one bit per id (bit i % 32 of
// word i / 32), as a structured-output constraint produces them (engine::TokenConstraint) and
// every sampling path applies them before anything else: the host here, the CUDA device with
// kernels::LaunchApplyTokenMask (the same result).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace strata::sampling {

// Words a mask over `vocab` ids takes.
inline size_t TokenMaskWords(int64_t vocab) { return static_cast<size_t>((vocab + 31) / 32); }

// Whether any bit is set.
bool AnyTokenAllowed(std::span<const uint32_t> allowed);

// Sets logits[i] to -inf for every id i whose bit is clear (every i beyond the mask's words).
void ApplyTokenMask(std::span<const uint32_t> allowed, std::span<float> logits);

}  // namespace strata::sampling
