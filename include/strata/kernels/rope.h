// Launch API of the rotary position embedding kernel (kernels/rope.cu; RoPE, Su et al. 2021).
// Plain C++: callers need no CUDA headers. Pointers are device pointers; `stream` is a
// cudaStream_t (nullptr: the default stream). Returns the cudaError_t of the launch as an int
// (0 = success); a shape it refuses returns cudaErrorInvalidValue without launching.
//
// Semantics are those of the CPU backend's RopeTable + RopeNeox/RopeNorm
// (src/backend/cpu/ops.cc). For pair i < rope_dim / 2 of a token at position p:
//   theta_scale = powf(base, -2 / rope_dim)             (on the host, the CPU's expression)
//   theta_i     = float(p) * theta_scale^i              (repeated fp32 multiplication, in order)
//   angle_i     = freq_scale * (theta_i / freq_factors[i])
// so the fp32 angles are bit-identical to the CPU table's. cos/sin are evaluated in double and
// rounded to float (the CPU takes glibc's cosf/sinf, which are within an ulp of that and almost
// always equal). The rotation then rounds each product separately (no FMA), as the CPU does:
//   kNorm (adjacent pairs, llama):  (v[2i], v[2i+1])
//   kNeox (split halves, gemma3/qwen2): (v[i], v[i + rope_dim/2])
//   v0' = v0 * cos - v1 * sin;  v1' = v0 * sin + v1 * cos
// Dimensions at and after rope_dim are left untouched. Expected difference from the CPU: at most
// an ulp or two of max(|v0|, |v1|) per element, from cos/sin rounding.
#pragma once

#include <cstdint>

namespace strata::kernels {

// Pairing of rotated dimensions; mirrors model::RopeStyle (kernels know no model types).
enum class RopeStyle { kNorm, kNeox };

// Rotates, in place, the first rope_dim dimensions of every head of q and (optionally) k, each
// token by its own position. One launch covers q and k so the angle table is built once.
//
// q:            [num_tokens, q_heads, head_dim] fp32, in place.
// k:            [num_tokens, k_heads, head_dim] fp32, in place; nullptr (with k_heads 0) for none.
// positions:    [num_tokens] int64, the tokens' positions in their sequences (>= 0).
// freq_factors: [rope_dim / 2] fp32 divisors of the frequencies (llama3 / longrope scaling), or
//               nullptr for none.
// base, freq_scale: per call, so sliding-window layers can pass their own (gemma3).
//
// Needs rope_dim even, 0 <= rope_dim <= head_dim (0: nothing to rotate, returns 0),
// num_tokens in [0, 2^31), heads >= 0, base > 0.
int LaunchRope(float* q, int64_t q_heads, float* k, int64_t k_heads, const int64_t* positions,
               int64_t num_tokens, int64_t head_dim, int64_t rope_dim, RopeStyle style, float base,
               float freq_scale, const float* freq_factors, void* stream);

// theta_scale above, computed on the host exactly as the CPU backend's RopeTable does
// (std::pow in float). Exposed for tests.
float RopeThetaScale(float base, int64_t rope_dim);

}  // namespace strata::kernels
