#include "strata/kernels/kv_write.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "per_token_test_util.h"
#include "strata/model/fp16.h"
#include "support/device_buffer.h"

namespace strata::kernels {
namespace {

using test::BitsEqual;
using test::DeviceBuffer;
using test::LaunchSucceeded;

// K/V values: normals plus fp16's edge cases (overflow to infinity, the largest finite, ties,
// subnormals, values that round to zero, signed zeros).
std::vector<float> KvValues(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  const float specials[] = {70000.0f,
                            -65520.0f,
                            65504.0f,
                            65519.0f,
                            1.0f + 0x1p-11f,
                            0x1p-24f,
                            0x1p-25f,
                            -0x1.8p-25f,
                            0x1p-15f,
                            3e-6f,
                            -0.0f,
                            0.0f,
                            std::numeric_limits<float>::infinity()};
  for (size_t i = 0; i < n && i < std::size(specials); ++i) v[(i * 7919) % n] = specials[i];
  return v;
}

struct KvShape {
  int64_t kv_heads;
  int64_t head_dim_k;
  int64_t head_dim_v;
};

// dtype, block size, shape, tokens
class KvWriteSweep
    : public ::testing::TestWithParam<std::tuple<KvCacheDtype, int64_t, KvShape, int64_t>> {};

// Expected cache bits for one element (fp16: the CPU's FloatToFp16; fp32: the float's bits).
uint32_t Stored(float x, KvCacheDtype dtype) {
  return dtype == KvCacheDtype::kF16 ? model::FloatToFp16(x) : std::bit_cast<uint32_t>(x);
}

// Downloads a cache of `elements` elements of `dtype` as raw bit patterns.
std::vector<uint32_t> DownloadBits(const DeviceBuffer<uint8_t>& buf, int64_t elements,
                                   KvCacheDtype dtype) {
  const std::vector<uint8_t> bytes = buf.Download();
  std::vector<uint32_t> bits(elements);
  for (int64_t i = 0; i < elements; ++i) {
    if (dtype == KvCacheDtype::kF16) {
      uint16_t h;
      std::memcpy(&h, &bytes[2 * i], 2);
      bits[i] = h;
    } else {
      std::memcpy(&bits[i], &bytes[4 * i], 4);
    }
  }
  return bits;
}

TEST_P(KvWriteSweep, WritesEachTokenAtItsSlotAndNothingElse) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  const auto [dtype, block_size, shape, tokens] = GetParam();
  const int64_t k_row = shape.kv_heads * shape.head_dim_k;
  const int64_t v_row = shape.kv_heads * shape.head_dim_v;
  const int64_t elem = dtype == KvCacheDtype::kF16 ? 2 : 4;
  const uint32_t seed = static_cast<uint32_t>(block_size * 100000 + k_row * 100 + tokens);
  std::mt19937 rng(seed);

  // Two sequences share the tokens; their blocks are a random permutation of the pool (with
  // spare blocks), so slots are scattered. The token after them is padding (slot -1) and one
  // more has a slot past the cache: neither may write anything.
  const int64_t num_blocks = (tokens + block_size - 1) / block_size + 8;
  std::vector<int64_t> block_ids(num_blocks);
  std::iota(block_ids.begin(), block_ids.end(), 0);
  std::shuffle(block_ids.begin(), block_ids.end(), rng);
  const int64_t first_len = tokens / 2;
  const int64_t second_start = 5;  // the second sequence continues at position 5
  const int64_t first_blocks = (first_len + block_size - 1) / block_size;
  std::vector<int64_t> slots;
  for (int64_t t = 0; t < tokens; ++t) {
    if (t < first_len) {
      slots.push_back(KvSlot(block_ids[t / block_size], block_size, t));
    } else {
      const int64_t pos = second_start + (t - first_len);
      slots.push_back(KvSlot(block_ids[first_blocks + pos / block_size], block_size, pos));
    }
  }
  const int64_t num_slots = num_blocks * block_size;
  slots.push_back(-1);
  slots.push_back(num_slots);
  const int64_t launched = tokens + 2;
  // Slots must be distinct for the check below to be meaningful.
  {
    std::vector<int64_t> sorted(slots.begin(), slots.begin() + tokens);
    std::sort(sorted.begin(), sorted.end());
    ASSERT_TRUE(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
    ASSERT_LT(sorted.back(), num_slots);
  }

  const std::vector<float> k = KvValues(launched * k_row, seed + 1);
  const std::vector<float> v = KvValues(launched * v_row, seed + 2);
  // Caches pre-filled with a sentinel byte pattern; every unwritten element must keep it.
  const std::vector<uint8_t> k_init(num_slots * k_row * elem, 0x5a);
  const std::vector<uint8_t> v_init(num_slots * v_row * elem, 0xa5);
  DeviceBuffer<float> d_k(k), d_v(v);
  DeviceBuffer<int64_t> d_slots(slots);
  DeviceBuffer<uint8_t> d_kc(k_init), d_vc(v_init);
  ASSERT_TRUE(d_k.ok() && d_v.ok() && d_slots.ok() && d_kc.ok() && d_vc.ok());
  ASSERT_TRUE(LaunchSucceeded(LaunchKvWrite(d_k.get(), d_v.get(), d_slots.get(), launched,
                                            shape.kv_heads, shape.head_dim_k, shape.head_dim_v,
                                            d_kc.get(), d_vc.get(), num_slots, dtype, nullptr)));

  const uint32_t k_sentinel = dtype == KvCacheDtype::kF16 ? 0x5a5au : 0x5a5a5a5au;
  const uint32_t v_sentinel = dtype == KvCacheDtype::kF16 ? 0xa5a5u : 0xa5a5a5a5u;
  std::vector<uint32_t> want_k(num_slots * k_row, k_sentinel);
  std::vector<uint32_t> want_v(num_slots * v_row, v_sentinel);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < k_row; ++i)
      want_k[slots[t] * k_row + i] = Stored(k[t * k_row + i], dtype);
    for (int64_t i = 0; i < v_row; ++i)
      want_v[slots[t] * v_row + i] = Stored(v[t * v_row + i], dtype);
  }
  EXPECT_TRUE(BitsEqual(DownloadBits(d_kc, num_slots * k_row, dtype), want_k)) << "K";
  EXPECT_TRUE(BitsEqual(DownloadBits(d_vc, num_slots * v_row, dtype), want_v)) << "V";
}

// Names of the KvWriteSweep cases, spelling out each parameter.
std::string KvWriteSweepName(const ::testing::TestParamInfo<KvWriteSweep::ParamType>& info) {
  const auto [dtype, block_size, shape, tokens] = info.param;
  return std::string(dtype == KvCacheDtype::kF16 ? "F16" : "F32") + "Block" +
         std::to_string(block_size) + "Heads" + std::to_string(shape.kv_heads) + "K" +
         std::to_string(shape.head_dim_k) + "V" + std::to_string(shape.head_dim_v) + "Tokens" +
         std::to_string(tokens);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, KvWriteSweep,
    ::testing::Combine(::testing::Values(KvCacheDtype::kF16, KvCacheDtype::kF32),
                       ::testing::Values<int64_t>(1, 16),
                       ::testing::Values(KvShape{1, 1, 1}, KvShape{2, 7, 5}, KvShape{3, 97, 64},
                                         KvShape{8, 128, 128}, KvShape{1, 256, 256}),
                       ::testing::Values<int64_t>(1, 7, 15, 17, 97)),
    KvWriteSweepName);

TEST(KvSlot, IsBlockTimesBlockSizePlusTheOffsetInTheBlock) {
  EXPECT_EQ(KvSlot(0, 16, 0), 0);
  EXPECT_EQ(KvSlot(3, 16, 17), 49);
  EXPECT_EQ(KvSlot(5, 1, 1234), 5);
  EXPECT_EQ(KvSlot(int64_t{1} << 30, 16, 15), (int64_t{1} << 34) + 15);
}

TEST(KvWrite, SlotsPastTwoToThe31ElementsLandAtTheirFull64BitOffsets) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  // fp16, 8 heads x 128: 1024 elements a row. With block size 16, block ids above
  // 2^31 / (16 * 1024) = 131072 put rows past element 2^31 (byte 2^32).
  const int64_t kv_heads = 8, head_dim = 128, row = kv_heads * head_dim, block_size = 16;
  const int64_t num_blocks = 131072 + 2;
  const int64_t num_slots = num_blocks * block_size;
  const size_t cache_bytes = static_cast<size_t>(num_slots * row * 2);
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  if (free_bytes < 2 * cache_bytes + (size_t{1} << 30)) {
    GTEST_SKIP() << "needs " << 2 * cache_bytes << " bytes of device memory";
  }
  // Not initialised: only the written rows are read back.
  DeviceBuffer<uint16_t> k_buf(static_cast<size_t>(num_slots * row));
  DeviceBuffer<uint16_t> v_buf(static_cast<size_t>(num_slots * row));
  ASSERT_TRUE(k_buf.ok() && v_buf.ok());
  void* k_cache = k_buf.get();
  void* v_cache = v_buf.get();
  const std::vector<int64_t> slots = {KvSlot(num_blocks - 1, block_size, 15),
                                      KvSlot(num_blocks - 1, block_size, 0),
                                      KvSlot(131072, block_size, 0),  // element 2^31 exactly
                                      KvSlot(131071, block_size, 15), 0};
  const int64_t tokens = static_cast<int64_t>(slots.size());
  const std::vector<float> k = KvValues(tokens * row, 1);
  const std::vector<float> v = KvValues(tokens * row, 2);
  DeviceBuffer<float> d_k(k), d_v(v);
  DeviceBuffer<int64_t> d_slots(slots);
  ASSERT_TRUE(d_k.ok() && d_v.ok() && d_slots.ok());
  EXPECT_TRUE(LaunchSucceeded(LaunchKvWrite(d_k.get(), d_v.get(), d_slots.get(), tokens, kv_heads,
                                            head_dim, head_dim, k_cache, v_cache, num_slots,
                                            KvCacheDtype::kF16, nullptr)));
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<uint16_t> got_k(row), got_v(row), want_k(row), want_v(row);
    const size_t offset = static_cast<size_t>(slots[t] * row * 2);
    ASSERT_EQ(cudaMemcpy(got_k.data(), static_cast<char*>(k_cache) + offset, row * 2,
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got_v.data(), static_cast<char*>(v_cache) + offset, row * 2,
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (int64_t i = 0; i < row; ++i) {
      want_k[i] = model::FloatToFp16(k[t * row + i]);
      want_v[i] = model::FloatToFp16(v[t * row + i]);
    }
    EXPECT_TRUE(BitsEqual(got_k, want_k)) << "K of slot " << slots[t];
    EXPECT_TRUE(BitsEqual(got_v, want_v)) << "V of slot " << slots[t];
  }
}

TEST(KvWrite, RefusesEmptyRowsAndCachesWhoseOffsetsOverflow) {
  STRATA_SKIP_WITHOUT_CUDA_DEVICE();
  DeviceBuffer<float> f(64);
  DeviceBuffer<int64_t> s(std::vector<int64_t>{0});
  ASSERT_TRUE(f.ok() && s.ok());
  float* p = f.get();
  const auto f16 = KvCacheDtype::kF16;
  EXPECT_EQ(LaunchKvWrite(p, p, s.get(), 1, 0, 8, 8, p, p, 4, f16, nullptr), test::kInvalidValue);
  EXPECT_EQ(LaunchKvWrite(p, p, s.get(), 1, 1, 8, 8, p, p, 0, f16, nullptr), test::kInvalidValue);
  EXPECT_EQ(LaunchKvWrite(p, p, s.get(), -1, 1, 8, 8, p, p, 4, f16, nullptr), test::kInvalidValue);
  EXPECT_EQ(LaunchKvWrite(p, p, s.get(), 1, 1, 8, 8, p, p, INT64_MAX / 4, f16, nullptr),
            test::kInvalidValue);
  EXPECT_EQ(LaunchKvWrite(p, p, s.get(), 0, 1, 8, 8, p, p, 4, f16, nullptr), 0);
}

}  // namespace
}  // namespace strata::kernels
