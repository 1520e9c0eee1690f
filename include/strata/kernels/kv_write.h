// Launch API of the paged KV-cache write (kernels/kv_write.cu). Plain C++: callers need no CUDA
// headers. Pointers are device pointers; `stream` is a cudaStream_t (nullptr: the default
// stream). Returns the cudaError_t of the launch as an int (0 = success); a shape it refuses
// returns cudaErrorInvalidValue without launching.
//
// Layout: the CPU backend's (include/strata/backend/cpu/kv_storage.h). Per layer, K is
// [num_blocks, block_size, num_kv_heads, head_dim_k] then V is
// [num_blocks, block_size, num_kv_heads, head_dim_v]; all offsets are 64-bit element counts.
// This kernel writes into one layer: k_cache / v_cache point at that layer's K and V regions
// (element offsets KvLayout::KOffset(layer, 0, 0) and VOffset(layer, 0, 0)).
//
// Slots: each token's place is given as a slot index, vLLM's slot mapping:
//   slot = block_id * block_size + pos % block_size,   block_id = block_ids[pos / block_size]
// so the token's K row starts at element slot * num_kv_heads * head_dim_k of k_cache (and V
// likewise with head_dim_v). A slot < 0 or >= num_slots (= num_blocks * block_size) is skipped:
// negative slots mark padding tokens; the bound keeps a bad slot from writing out of the cache.
//
// Conversion: kF32 copies; kF16 rounds to nearest even (__float2half_rn), bit-identical to the
// CPU's model::FloatToFp16 for every non-NaN value (overflow to infinity, subnormals, signed
// zeros). NaNs stay NaN but the payload may differ (the device writes its canonical NaN).
#pragma once

#include <cstdint>

namespace strata::kernels {

// Element type of the cache; mirrors backend::cpu::KvDtype.
enum class KvCacheDtype { kF16, kF32 };

// The slot of position `pos` of a sequence whose block_size-token block number pos / block_size
// is `block_id` (the caller looks block_id up in the sequence's block table). Host code.
inline int64_t KvSlot(int64_t block_id, int64_t block_size, int64_t pos) {
  return block_id * block_size + pos % block_size;
}

// Writes num_tokens tokens' K and V rows into their slots.
//
// k:        [num_tokens, num_kv_heads, head_dim_k] fp32.
// v:        [num_tokens, num_kv_heads, head_dim_v] fp32.
// slots:    [num_tokens] int64 slot indices (above).
// k_cache:  [num_slots, num_kv_heads, head_dim_k] of `dtype` (= [num_blocks, block_size, ...]).
// v_cache:  [num_slots, num_kv_heads, head_dim_v] of `dtype`.
// Two tokens must not share a slot (the write order between them would be unspecified).
// num_tokens in [0, 2^31) (0: nothing to do); num_kv_heads, head dims >= 1, with
// num_kv_heads * head_dim < 2^31; num_slots >= 1.
int LaunchKvWrite(const float* k, const float* v, const int64_t* slots, int64_t num_tokens,
                  int64_t num_kv_heads, int64_t head_dim_k, int64_t head_dim_v, void* k_cache,
                  void* v_cache, int64_t num_slots, KvCacheDtype dtype, void* stream);

}  // namespace strata::kernels
