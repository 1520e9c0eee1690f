// Element-wise and per-row operations of the CPU transformer forward pass. Pure functions on
// caller-owned buffers; any thread. Formulas follow the models' reference implementations
// (and llama.cpp's, so logits agree): RMSNorm (Zhang & Sennrich 2019), RoPE (Su et al. 2021)
// in its two pairings, GeGLU/SwiGLU (Shazeer 2020).
#pragma once

#include <cstdint>
#include <vector>

namespace strata::backend::cpu {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i], i < n. The sum of squares is taken in
// double. `out` may alias `x`.
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);

// cos/sin of every rotated pair for one position: theta_i = pos * freq_scale * base^(-2i/dim)
// / freq_factors[i] (freq_factors may be null). The powers are accumulated by repeated
// multiplication in float, as llama.cpp does, so both see the same angles.
// table: [rope_dim] interleaved (cos_0, sin_0, cos_1, sin_1, ...).
void RopeTable(int64_t pos, int64_t rope_dim, float base, float freq_scale,
               const float* freq_factors, float* table);

// Rotates the first rope_dim dimensions of each of n_heads heads of x ([n_heads, head_dim])
// in place with a RopeTable. Neox pairs (i, i + rope_dim/2); Norm pairs (2i, 2i+1).
void RopeNeox(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dim, const float* table);
void RopeNorm(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dim, const float* table);

// out[i] = gelu_tanh(gate[i]) * up[i]: GeGLU with the tanh approximation of GELU, in fp32.
// (llama.cpp evaluates it through an fp16 table; we keep the exact function.) On AVX2+FMA
// machines GELU and SiLU run 8 lanes at a time in their sigmoid form, x / (1 + exp(-t)), with a
// vector exp within 2 ulp; elsewhere (and for |t| > 87) through libm. Both stay within a few
// ulp of the exact value.
void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out);
// out[i] = silu(gate[i]) * up[i]: SwiGLU.
// Both may write in place: out may be gate or up (the CPU backend writes over gate).
void SiluMul(const float* gate, const float* up, int64_t n, float* out);

// For tests: use the portable libm path of GeluTanhMul/SiluMul (true) or the best this CPU
// has (false). Not to be called while another thread runs them.
void SetOpsForceScalar(bool force);

// x[i] += y[i].
void AddInPlace(float* x, const float* y, int64_t n);
// x[i] *= s.
void ScaleInPlace(float* x, float s, int64_t n);
// x[i] = cap * tanh(x[i] / cap).
void SoftCapInPlace(float* x, float cap, int64_t n);

}  // namespace strata::backend::cpu
