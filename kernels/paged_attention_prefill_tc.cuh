// The tensor-core prefill attention kernel (paged_attention_prefill_tc.cu), launched by
// LaunchPagedAttentionPrefill (paged_attention_prefill.cu) for the shapes it covers. Included by
// .cu files only.
#pragma once

#include <cuda_runtime.h>

#include "strata/kernels/paged_attention.h"

namespace strata::kernels::paged_attention {

// fp16 KV, head_dim_k == head_dim_v in {64, 128, 256}, K and V 16-byte aligned, on a device of
// compute capability 8.0 or newer with room for the kernel's shared memory.
bool TcPrefillApplies(const PagedAttentionPrefillArgs& args);

// Same grid and outputs as the generic prefill kernel (one kernel, no workspace).
cudaError_t LaunchTcPrefill(const PagedAttentionPrefillArgs& args, cudaStream_t stream);

}  // namespace strata::kernels::paged_attention
