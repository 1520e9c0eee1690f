#include "strata/backend/cpu/kv_storage.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "strata/common/check.h"
#include "strata/common/checked_math.h"
#include "strata/model/fp16.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define STRATA_KV_X86 1
#endif

namespace strata::backend::cpu {
namespace {

constexpr uint64_t kAlignment = 64;
constexpr float kFp16Max = 65504.0f;
constexpr uint16_t kFp16MaxBits = 0x7bff;

bool ShapeIsPositive(const KvCacheConfig& c) {
  return c.num_layers > 0 && c.num_kv_heads > 0 && c.head_dim_k > 0 && c.head_dim_v > 0 &&
         c.block_size > 0;
}

// Bytes per block, or false on overflow.
bool BytesPerBlock(const KvCacheConfig& c, uint64_t* out) {
  uint64_t bytes = 0;
  if (!CheckedAdd(static_cast<uint64_t>(KvRowBytes(c.dtype, c.head_dim_k)),
                  static_cast<uint64_t>(KvRowBytes(c.dtype, c.head_dim_v)), &bytes) ||
      !CheckedMul(bytes, static_cast<uint64_t>(c.num_kv_heads), &bytes) ||
      !CheckedMul(bytes, static_cast<uint64_t>(c.block_size), &bytes) ||
      !CheckedMul(bytes, static_cast<uint64_t>(c.num_layers), &bytes) ||
      bytes > static_cast<uint64_t>(INT64_MAX)) {
    return false;
  }
  *out = bytes;
  return true;
}

void FloatToF16Scalar(const float* src, int64_t n, uint16_t* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = model::FloatToFp16(src[i]);
}

#ifdef STRATA_KV_X86
__attribute__((target("avx2,fma,f16c"))) void FloatToF16Avx2(const float* src, int64_t n,
                                                             uint16_t* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = model::FloatToFp16(src[i]);
}
#endif

// One head's row of n elements as q8_0 (see the header): one quantizer for every path.
void QuantizeQ8Row(const float* src, int32_t n, std::byte* dst) {
  auto* q = reinterpret_cast<int8_t*>(dst);
  std::byte* scales = dst + n;
  for (int32_t g0 = 0; g0 < n; g0 += kQ8Group) {
    const int32_t g1 = std::min(n, g0 + kQ8Group);
    float amax = 0.0f;
    for (int32_t d = g0; d < g1; ++d) amax = std::max(amax, std::fabs(src[d]));  // NaN skipped
    uint16_t h = model::FloatToFp16(std::min(amax / 127.0f, kFp16Max));
    // Rounded down, the scale would clip the largest value: take the next fp16 up.
    if (model::Fp16ToFloat(h) * 127.0f < amax && h < kFp16MaxBits) ++h;
    const float scale = model::Fp16ToFloat(h);
    const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
    for (int32_t d = g0; d < g1; ++d) {
      float r = src[d] * inv;
      r = r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r);
      if (std::isnan(r)) r = 0.0f;
      q[d] = static_cast<int8_t>(std::nearbyint(r));
    }
    std::memcpy(scales + 2 * (g0 / kQ8Group), &h, sizeof(h));
  }
}

// One token's rows of num_heads heads of head_dim elements, converted to `dtype`.
void StoreRow(const float* src, int32_t num_heads, int32_t head_dim, KvDtype dtype, KvIsa isa,
              std::byte* dst) {
  const int64_t n = int64_t{num_heads} * head_dim;
  if (dtype == KvDtype::kQ8_0) {
    const int64_t row_bytes = KvRowBytes(dtype, head_dim);
    for (int32_t h = 0; h < num_heads; ++h) {
      QuantizeQ8Row(src + int64_t{h} * head_dim, head_dim, dst + h * row_bytes);
    }
    return;
  }
  if (dtype == KvDtype::kF32) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
    return;
  }
  auto* out = reinterpret_cast<uint16_t*>(dst);
#ifdef STRATA_KV_X86
  if (isa == KvIsa::kAvx2) {
    FloatToF16Avx2(src, n, out);
    return;
  }
#endif
  (void)isa;
  FloatToF16Scalar(src, n, out);
}

void LoadRow(const std::byte* src, int32_t num_heads, int32_t head_dim, KvDtype dtype, float* dst) {
  const int64_t n = int64_t{num_heads} * head_dim;
  if (dtype == KvDtype::kQ8_0) {
    const int64_t row_bytes = KvRowBytes(dtype, head_dim);
    for (int32_t h = 0; h < num_heads; ++h) {
      DequantizeQ8Row(src + h * row_bytes, head_dim, dst + int64_t{h} * head_dim);
    }
    return;
  }
  if (dtype == KvDtype::kF32) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
    return;
  }
  const auto* in = reinterpret_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = model::Fp16ToFloat(in[i]);
}

bool DetectAvx2() {
#ifdef STRATA_KV_X86
  // clang has no "f16c" for __builtin_cpu_supports; CPUID leaf 1 ECX bit 29 is F16C. avx2 and fma
  // from __builtin_cpu_supports also tell that the OS saves the YMM registers.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

}  // namespace

void DequantizeQ8Row(const void* row, int32_t n, float* dst) {
  const auto* q = static_cast<const int8_t*>(row);
  const auto* scales = static_cast<const std::byte*>(row) + n;
  for (int32_t g0 = 0; g0 < n; g0 += kQ8Group) {
    uint16_t h = 0;
    std::memcpy(&h, scales + 2 * (g0 / kQ8Group), sizeof(h));
    const float scale = model::Fp16ToFloat(h);
    for (int32_t d = g0; d < std::min(n, g0 + kQ8Group); ++d) dst[d] = q[d] * scale;
  }
}

int64_t KvRowBytes(KvDtype dtype, int32_t head_dim) {
  STRATA_CHECK(head_dim > 0);
  switch (dtype) {
    case KvDtype::kF16:
      return int64_t{head_dim} * 2;
    case KvDtype::kF32:
      return int64_t{head_dim} * 4;
    case KvDtype::kQ8_0:
      return head_dim + 2 * ((int64_t{head_dim} + kQ8Group - 1) / kQ8Group);
  }
  STRATA_CHECK(false);
  return 0;
}

const char* KvDtypeName(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF16:
      return "f16";
    case KvDtype::kF32:
      return "f32";
    case KvDtype::kQ8_0:
      return "q8_0";
  }
  return "?";
}

bool ParseKvDtype(std::string_view name, KvDtype* dtype) {
  for (KvDtype d : {KvDtype::kF16, KvDtype::kF32, KvDtype::kQ8_0}) {
    if (name == KvDtypeName(d)) {
      *dtype = d;
      return true;
    }
  }
  return false;
}

int64_t KvBytesPerBlock(const KvCacheConfig& config) {
  STRATA_CHECK(ShapeIsPositive(config));
  uint64_t bytes = 0;
  STRATA_CHECK(BytesPerBlock(config, &bytes));
  return static_cast<int64_t>(bytes);
}

int32_t KvBlocksForBudget(const KvCacheConfig& config_without_num_blocks, int64_t budget_bytes) {
  const int64_t per_block = KvBytesPerBlock(config_without_num_blocks);
  if (budget_bytes <= 0) return 0;
  const int64_t blocks = budget_bytes / per_block;
  return blocks > INT32_MAX ? INT32_MAX : static_cast<int32_t>(blocks);
}

KvLayout::KvLayout(const KvCacheConfig& config)
    : num_layers_(config.num_layers),
      num_blocks_(config.num_blocks),
      block_size_(config.block_size),
      k_row_bytes_(KvRowBytes(config.dtype, config.head_dim_k)),
      v_row_bytes_(KvRowBytes(config.dtype, config.head_dim_v)),
      k_token_stride_(config.num_kv_heads * k_row_bytes_),
      v_token_stride_(config.num_kv_heads * v_row_bytes_),
      k_block_stride_(k_token_stride_ * config.block_size),
      v_block_stride_(v_token_stride_ * config.block_size),
      layer_stride_((k_block_stride_ + v_block_stride_) * config.num_blocks) {}

int64_t KvLayout::KOffset(int32_t layer, kv::BlockId block, int32_t slot) const {
  STRATA_CHECK(layer >= 0 && layer < num_layers_);
  STRATA_CHECK(block >= 0 && block < num_blocks_);
  STRATA_CHECK(slot >= 0 && slot < block_size_);
  return layer * layer_stride_ + block * k_block_stride_ + slot * k_token_stride_;
}

int64_t KvLayout::VOffset(int32_t layer, kv::BlockId block, int32_t slot) const {
  STRATA_CHECK(layer >= 0 && layer < num_layers_);
  STRATA_CHECK(block >= 0 && block < num_blocks_);
  STRATA_CHECK(slot >= 0 && slot < block_size_);
  return layer * layer_stride_ + k_block_stride_ * num_blocks_ + block * v_block_stride_ +
         slot * v_token_stride_;
}

bool KvIsaSupported(KvIsa isa) {
  static const bool avx2 = DetectAvx2();
  return isa == KvIsa::kScalar || avx2;
}

KvIsa BestKvIsa() { return KvIsaSupported(KvIsa::kAvx2) ? KvIsa::kAvx2 : KvIsa::kScalar; }

StatusOr<std::unique_ptr<KvStorage>> KvStorage::Create(const KvCacheConfig& config) {
  if (!ShapeIsPositive(config) || config.num_blocks <= 0) {
    return InvalidArgumentError(
        "KV cache config needs positive num_layers, num_kv_heads, head dims, block_size and "
        "num_blocks, got layers=" +
        std::to_string(config.num_layers) + " kv_heads=" + std::to_string(config.num_kv_heads) +
        " head_dim_k=" + std::to_string(config.head_dim_k) + " head_dim_v=" +
        std::to_string(config.head_dim_v) + " block_size=" + std::to_string(config.block_size) +
        " num_blocks=" + std::to_string(config.num_blocks));
  }
  uint64_t per_block = 0;
  uint64_t total = 0;
  uint64_t padded = 0;
  if (!BytesPerBlock(config, &per_block) ||
      !CheckedMul(per_block, static_cast<uint64_t>(config.num_blocks), &total) ||
      !CheckedAdd(total, kAlignment, &padded) || padded > static_cast<uint64_t>(INT64_MAX) ||
      padded > static_cast<uint64_t>(SIZE_MAX)) {
    return InvalidArgumentError("KV cache size overflows: " + std::to_string(config.num_blocks) +
                                " blocks of the configured shape");
  }
  // calloc: large allocations come straight from mmap, so the zero fill is lazy and pages are
  // committed as blocks are first written.
  void* raw = std::calloc(static_cast<std::size_t>(padded), 1);
  if (raw == nullptr) {
    return ResourceExhaustedError("cannot allocate " + std::to_string(total) +
                                  " bytes for the KV cache (" + std::to_string(config.num_blocks) +
                                  " blocks); lower the KV cache budget");
  }
  auto* bytes = static_cast<std::byte*>(raw);
  const auto address = reinterpret_cast<uintptr_t>(bytes);
  std::byte* data = bytes + ((kAlignment - address % kAlignment) % kAlignment);
  return std::unique_ptr<KvStorage>(
      new KvStorage(config, bytes, data, static_cast<int64_t>(total)));
}

KvStorage::KvStorage(const KvCacheConfig& config, std::byte* raw, std::byte* data,
                     int64_t size_bytes)
    : config_(config), layout_(config), raw_(raw), data_(data), size_bytes_(size_bytes) {}

KvStorage::~KvStorage() { std::free(raw_); }

void KvStorage::Write(int32_t layer, std::span<const kv::BlockId> block_ids, int64_t pos,
                      const float* k, const float* v) {
  Write(layer, block_ids, pos, k, v, BestKvIsa());
}

void KvStorage::Write(int32_t layer, std::span<const kv::BlockId> block_ids, int64_t pos,
                      const float* k, const float* v, KvIsa isa) {
  STRATA_CHECK(KvIsaSupported(isa));
  STRATA_CHECK(pos >= 0 && pos / config_.block_size < static_cast<int64_t>(block_ids.size()));
  const kv::BlockId block = block_ids[static_cast<std::size_t>(pos / config_.block_size)];
  const auto slot = static_cast<int32_t>(pos % config_.block_size);
  StoreRow(k, config_.num_kv_heads, config_.head_dim_k, config_.dtype, isa,
           data_ + layout_.KOffset(layer, block, slot));
  StoreRow(v, config_.num_kv_heads, config_.head_dim_v, config_.dtype, isa,
           data_ + layout_.VOffset(layer, block, slot));
}

void KvStorage::Read(int32_t layer, std::span<const kv::BlockId> block_ids, int64_t pos, float* k,
                     float* v) const {
  STRATA_CHECK(pos >= 0 && pos / config_.block_size < static_cast<int64_t>(block_ids.size()));
  const kv::BlockId block = block_ids[static_cast<std::size_t>(pos / config_.block_size)];
  const auto slot = static_cast<int32_t>(pos % config_.block_size);
  LoadRow(data_ + layout_.KOffset(layer, block, slot), config_.num_kv_heads, config_.head_dim_k,
          config_.dtype, k);
  LoadRow(data_ + layout_.VOffset(layer, block, slot), config_.num_kv_heads, config_.head_dim_v,
          config_.dtype, v);
}

const void* KvStorage::KBlock(int32_t layer, kv::BlockId block) const {
  return data_ + layout_.KOffset(layer, block, 0);
}

const void* KvStorage::VBlock(int32_t layer, kv::BlockId block) const {
  return data_ + layout_.VOffset(layer, block, 0);
}

}  // namespace strata::backend::cpu
