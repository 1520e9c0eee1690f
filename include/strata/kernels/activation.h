// Launch API of the gated feed-forward activations (kernels/activation.cu; GLU variants,
// Shazeer 2020). Plain C++: callers need no CUDA headers. Pointers are device pointers; `stream`
// is a cudaStream_t (nullptr: the default stream). Returns the cudaError_t of the launch as an
// int (0 = success); a shape it refuses returns cudaErrorInvalidValue without launching.
//
// Semantics are those of the CPU backend's GeluTanhMul / SiluMul (src/backend/cpu/ops.cc), in
// fp32, in the sigmoid form the CPU's vector path uses (it avoids the cancellation in
// 1 + tanh(u) for negative inputs):
//   kGeluTanh: out = gate / (1 + exp(-2u)) * up,  u = sqrt(2/pi) * gate * (1 + 0.044715 gate^2)
//              (= 0.5 gate (1 + tanh(u)) * up, GELU's tanh approximation)
//   kSilu:     out = gate / (1 + exp(-gate)) * up
// expf is CUDA's full-precision one (2 ulp). Accuracy against the exact function: a few ulp of
// the result, growing to about 2e-5 relative where |2u| nears 87 (there the result is below
// 1e-37 |gate * up| and underflows to zero beyond).
#pragma once

#include <cstdint>

namespace strata::kernels {

enum class GatedActivation { kGeluTanh, kSilu };

// out[t, i] = act(gate[t, i]) * up[t, i] for t < num_tokens, i < n.
//
// gate: [num_tokens, n] fp32 with rows `gate_stride` floats apart.
// up:   [num_tokens, n] fp32 with rows `up_stride` floats apart.
// out:  [num_tokens, n] fp32 with rows `out_stride` floats apart; may be gate or up (the CPU
//       backend writes over gate) as long as the strides then match.
// Separate gate/up buffers (the CPU backend's layout): strides n. Halves of one fused
// [num_tokens, 2n] row: gate = row, up = row + n, strides 2n.
// Strides must be >= n; n in [0, 2^31) (0 or num_tokens 0: nothing to do).
int LaunchGatedActivation(GatedActivation activation, const float* gate, int64_t gate_stride,
                          const float* up, int64_t up_stride, float* out, int64_t out_stride,
                          int64_t num_tokens, int64_t n, void* stream);

}  // namespace strata::kernels
