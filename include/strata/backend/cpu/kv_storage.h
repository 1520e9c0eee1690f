// KvStorage: the memory of a paged KV cache on the CPU, and its sizing arithmetic.
//
// The storage knows nothing about sequences: kv::BlockPool hands out block ids and each sequence's
// kv::BlockTable lists its blocks; Write and the attention kernels take those ids.
//
// Layout (one allocation, 64-byte aligned, zero-filled): for each layer in order, K as
// [num_blocks, block_size, num_kv_heads, K row] then V as [num_blocks, block_size, num_kv_heads,
// V row], where a row is one head's head_dim elements in `dtype` (see KvRowBytes). All offsets
// are 64-bit byte counts (a cache may exceed 2^31 bytes).
//
// q8_0 rows: head_dim signed bytes q[d], then one fp16 scale per group of kQ8Group elements
// (the last group may be shorter); element d is q[d] * scale[d / kQ8Group], exact in fp32. A
// group is quantized with scale = fp16(max |x| / 127) (the next fp16 up where rounding to
// nearest would clip the largest value) and q = round(x / scale) clamped to [-127, 127]: every
// value within half a step. A scale beyond fp16's range saturates the group at +-127 * 65504; a
// group below 2^-24 * 127 reads back as zeros; NaN reads back as 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "strata/common/status.h"
#include "strata/kv/block_pool.h"

namespace strata::backend::cpu {

enum class KvDtype { kF16, kF32, kQ8_0 };

// Elements that share one scale in a q8_0 row. 64, not ggml's 32: with Gemma 3's 256-dim heads a
// q8_0 row takes 264 bytes against f16's 512 (1.94x the tokens in the same memory; 1.88x at 32).
inline constexpr int32_t kQ8Group = 64;

// Bytes of one head's row of `head_dim` elements (> 0) stored as `dtype`.
int64_t KvRowBytes(KvDtype dtype, int32_t head_dim);

// Element d of a q8_0 row of n elements, for d < n: out[d] = q[d] * scale (exact).
void DequantizeQ8Row(const void* row, int32_t n, float* out);

// "f16", "f32" or "q8_0"; parsing accepts exactly those names.
const char* KvDtypeName(KvDtype dtype);
bool ParseKvDtype(std::string_view name, KvDtype* dtype);

struct KvCacheConfig {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim_k = 0;
  int32_t head_dim_v = 0;
  int32_t block_size = 16;  // tokens per block
  int32_t num_blocks = 0;
  KvDtype dtype = KvDtype::kF16;
};

// Bytes one block takes across all layers, K and V. The shape fields (all but num_blocks) must be
// positive and the product must fit in int64 (a programmer error otherwise: validate the model
// config first).
int64_t KvBytesPerBlock(const KvCacheConfig& config);

// Blocks that fit in `budget_bytes` (0 when not even one fits or the budget is <= 0), at most
// INT32_MAX. config.num_blocks is ignored.
int32_t KvBlocksForBudget(const KvCacheConfig& config_without_num_blocks, int64_t budget_bytes);

// Byte offsets of the layout above, without any memory: pure arithmetic, any thread.
class KvLayout {
 public:
  explicit KvLayout(const KvCacheConfig& config);

  // Bytes of one head's K (V) row of one token (KvRowBytes).
  int64_t k_row_bytes() const { return k_row_bytes_; }
  int64_t v_row_bytes() const { return v_row_bytes_; }
  // Bytes between consecutive tokens of a block (num_kv_heads rows).
  int64_t k_token_stride() const { return k_token_stride_; }
  int64_t v_token_stride() const { return v_token_stride_; }
  // Bytes of one block of one layer: block_size * token stride.
  int64_t k_block_stride() const { return k_block_stride_; }
  int64_t v_block_stride() const { return v_block_stride_; }
  // Byte offset of K (or V) of `layer`, `block`, token `slot` (< block_size), head 0.
  int64_t KOffset(int32_t layer, kv::BlockId block, int32_t slot) const;
  int64_t VOffset(int32_t layer, kv::BlockId block, int32_t slot) const;
  // Bytes of the whole cache.
  int64_t total_bytes() const { return layer_stride_ * num_layers_; }

 private:
  int32_t num_layers_;
  int32_t num_blocks_;
  int32_t block_size_;
  int64_t k_row_bytes_;
  int64_t v_row_bytes_;
  int64_t k_token_stride_;
  int64_t v_token_stride_;
  int64_t k_block_stride_;
  int64_t v_block_stride_;
  int64_t layer_stride_;  // K and V of one layer
};

// Which code path converts and reads KV rows. kAvx2 uses AVX2 + FMA + F16C, chosen at run time
// (the build needs no -mavx2); the attention kernels also need head dims that are multiples of 8
// and otherwise fall back to kScalar. Both paths store bit-identical fp16 (and q8_0, which has
// one quantizer).
enum class KvIsa { kScalar, kAvx2 };
// The fastest path this CPU supports.
KvIsa BestKvIsa();
// Whether this CPU can run `isa`.
bool KvIsaSupported(KvIsa isa);

// Storage of every layer's K and V (see the layout above).
//
// Thread rules: Write may be called from several threads at once for different (layer, position)
// slots (they touch disjoint bytes); a Write and a read of the same slot (attention, Read) must be
// ordered by the caller, e.g. by the thread pool's barrier between the KV write and the attention
// of a layer. The accessors are const and thread-safe.
class KvStorage {
 public:
  // RESOURCE_EXHAUSTED when the memory can't be allocated; INVALID_ARGUMENT for non-positive
  // shape fields or a size that overflows.
  static StatusOr<std::unique_ptr<KvStorage>> Create(const KvCacheConfig& config);
  ~KvStorage();

  KvStorage(const KvStorage&) = delete;
  KvStorage& operator=(const KvStorage&) = delete;

  const KvCacheConfig& config() const { return config_; }
  const KvLayout& layout() const { return layout_; }
  int64_t size_bytes() const { return size_bytes_; }

  // Writes one token's K and V at position `pos` of the sequence whose blocks are `block_ids`
  // (pos / block_size indexes block_ids; the slot is pos % block_size), converting to `dtype`
  // (round to nearest even; q8_0 as described at the top).
  // k: [num_kv_heads, head_dim_k]; v: [num_kv_heads, head_dim_v].
  void Write(int32_t layer, std::span<const kv::BlockId> block_ids, int64_t pos, const float* k,
             const float* v);
  // The same with a chosen code path (tests); `isa` must be supported.
  void Write(int32_t layer, std::span<const kv::BlockId> block_ids, int64_t pos, const float* k,
             const float* v, KvIsa isa);

  // Reads back one token's K and V as float (exact: q8_0 is dequantized as the attention kernels
  // do). k: [num_kv_heads, head_dim_k];
  // v: [num_kv_heads, head_dim_v]. For tests and debugging.
  void Read(int32_t layer, std::span<const kv::BlockId> block_ids, int64_t pos, float* k,
            float* v) const;

  // Raw pointers (uint16_t fp16 bits for kF16, float for kF32, q8_0 rows) to the start of one
  // block of one layer: K is [block_size, num_kv_heads, K row], V is
  // [block_size, num_kv_heads, V row].
  const void* KBlock(int32_t layer, kv::BlockId block) const;
  const void* VBlock(int32_t layer, kv::BlockId block) const;

 private:
  KvStorage(const KvCacheConfig& config, std::byte* raw, std::byte* data, int64_t size_bytes);

  KvCacheConfig config_;
  KvLayout layout_;
  std::byte* raw_;   // what calloc returned (freed in the destructor)
  std::byte* data_;  // raw_ rounded up to 64 bytes
  int64_t size_bytes_;
};

}  // namespace strata::backend::cpu
