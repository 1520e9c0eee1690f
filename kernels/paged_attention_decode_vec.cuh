// The vectorized fp16 decode attention kernel (paged_attention_decode_vec.cu), launched by
// LaunchPagedAttentionDecode (paged_attention_decode.cu) for the shapes it covers; the split-K
// workspace and the merge kernel are the launcher's. Included by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "strata/kernels/paged_attention.h"

namespace strata::kernels::paged_attention {

// fp16 KV, head_dim_k == head_dim_v in {64, 128, 256}, q, K and V 16-byte aligned.
bool VecDecodeApplies(const PagedAttentionDecodeArgs& args);

// Same grid, partitioning and outputs as the generic kernel: a sequence whose keys take one
// partition gets its normalized output in args.out, others (max in natural-log units, sum,
// unnormalized output) per partition in ws_m / ws_l / ws_acc for the merge.
cudaError_t LaunchVecDecode(const PagedAttentionDecodeArgs& args, int32_t num_partitions,
                            int32_t chunk_tokens, float* ws_m, float* ws_l, float* ws_acc,
                            cudaStream_t stream);

}  // namespace strata::kernels::paged_attention
