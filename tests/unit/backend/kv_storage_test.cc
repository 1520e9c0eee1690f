#include "strata/backend/cpu/kv_storage.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <ostream>
#include <random>
#include <thread>
#include <vector>

#include "strata/model/fp16.h"

namespace strata::backend::cpu {

// Readable parameters in gtest's messages.
inline void PrintTo(KvDtype dtype, std::ostream* os) { *os << KvDtypeName(dtype); }
inline void PrintTo(KvIsa isa, std::ostream* os) {
  *os << (isa == KvIsa::kAvx2 ? "avx2" : "scalar");
}
namespace {

KvCacheConfig Gemma3Config() {
  KvCacheConfig config;
  config.num_layers = 18;
  config.num_kv_heads = 1;
  config.head_dim_k = 256;
  config.head_dim_v = 256;
  config.block_size = 16;
  config.dtype = KvDtype::kF16;
  return config;
}

std::vector<KvIsa> SupportedIsas() {
  std::vector<KvIsa> isas = {KvIsa::kScalar};
  if (KvIsaSupported(KvIsa::kAvx2)) isas.push_back(KvIsa::kAvx2);
  return isas;
}

TEST(KvBudget, BytesPerBlockCountsEveryLayerKAndV) {
  KvCacheConfig config = Gemma3Config();
  // 18 layers * 16 tokens * 1 head * (256 + 256) dims * 2 bytes.
  EXPECT_EQ(KvBytesPerBlock(config), 18 * 16 * 512 * 2);
  config.dtype = KvDtype::kF32;
  EXPECT_EQ(KvBytesPerBlock(config), 18 * 16 * 512 * 4);
  // Llama-3-8B: 32 layers, 8 KV heads, head_dim 128: 128 KiB per token in fp16.
  KvCacheConfig llama{32, 8, 128, 128, 16, 0, KvDtype::kF16};
  EXPECT_EQ(KvBytesPerBlock(llama), int64_t{16} * 128 * 1024);
  // K and V head dims may differ.
  KvCacheConfig mixed{1, 2, 64, 32, 1, 0, KvDtype::kF32};
  EXPECT_EQ(KvBytesPerBlock(mixed), 2 * (64 + 32) * 4);
  // q8_0: a byte per element and a 2-byte scale per 64 elements (the last group may be short).
  config.dtype = KvDtype::kQ8_0;
  EXPECT_EQ(KvBytesPerBlock(config), 18 * 16 * 2 * (256 + 4 * 2));
  EXPECT_EQ(KvRowBytes(KvDtype::kQ8_0, 64), 66);
  EXPECT_EQ(KvRowBytes(KvDtype::kQ8_0, 65), 65 + 4);
  EXPECT_EQ(KvRowBytes(KvDtype::kQ8_0, 13), 15);
}

TEST(KvBudget, Q8HoldsAtLeast1Point9TimesTheTokensOfF16) {
  KvCacheConfig f16 = Gemma3Config();
  KvCacheConfig q8 = f16;
  q8.dtype = KvDtype::kQ8_0;
  const int64_t budget = int64_t{256} << 20;
  EXPECT_GE(static_cast<double>(KvBlocksForBudget(q8, budget)),
            1.9 * KvBlocksForBudget(f16, budget));
  KvCacheConfig llama{32, 8, 128, 128, 16, 0, KvDtype::kF16};
  KvCacheConfig llama_q8 = llama;
  llama_q8.dtype = KvDtype::kQ8_0;
  EXPECT_GE(static_cast<double>(KvBlocksForBudget(llama_q8, budget)),
            1.9 * KvBlocksForBudget(llama, budget));
}

TEST(KvDtypeNames, ParseTheirOwnNamesOnly) {
  for (KvDtype d : {KvDtype::kF16, KvDtype::kF32, KvDtype::kQ8_0}) {
    KvDtype parsed = KvDtype::kF32;
    ASSERT_TRUE(ParseKvDtype(KvDtypeName(d), &parsed)) << KvDtypeName(d);
    EXPECT_EQ(parsed, d);
  }
  KvDtype untouched = KvDtype::kF16;
  for (const char* bad : {"", "Q8_0", "q8", "q4_0", "f16 ", "fp16"}) {
    EXPECT_FALSE(ParseKvDtype(bad, &untouched)) << bad;
    EXPECT_EQ(untouched, KvDtype::kF16);
  }
}

TEST(KvBudget, BlocksForBudgetRoundsDown) {
  const KvCacheConfig config = Gemma3Config();
  const int64_t per_block = KvBytesPerBlock(config);
  EXPECT_EQ(KvBlocksForBudget(config, 0), 0);
  EXPECT_EQ(KvBlocksForBudget(config, -1), 0);
  EXPECT_EQ(KvBlocksForBudget(config, per_block - 1), 0);
  EXPECT_EQ(KvBlocksForBudget(config, per_block), 1);
  EXPECT_EQ(KvBlocksForBudget(config, 97 * per_block + per_block - 1), 97);
  EXPECT_EQ(KvBlocksForBudget(config, int64_t{1} << 30), (int64_t{1} << 30) / per_block);
}

TEST(KvBudget, BlocksForBudgetIgnoresNumBlocksAndSaturates) {
  KvCacheConfig config{1, 1, 8, 8, 1, 12345, KvDtype::kF16};  // 32 bytes per block
  EXPECT_EQ(KvBlocksForBudget(config, 32 * 10), 10);
  EXPECT_EQ(KvBlocksForBudget(config, std::numeric_limits<int64_t>::max()),
            std::numeric_limits<int32_t>::max());
}

TEST(KvLayout, OffsetsTileTheAllocationWithoutOverlap) {
  const KvCacheConfig config{3, 2, 8, 4, 5, 7, KvDtype::kF16};
  const KvLayout layout(config);
  EXPECT_EQ(layout.k_row_bytes(), 16);
  EXPECT_EQ(layout.k_token_stride(), 32);
  EXPECT_EQ(layout.v_token_stride(), 16);
  EXPECT_EQ(layout.k_block_stride(), 160);
  EXPECT_EQ(layout.v_block_stride(), 80);
  EXPECT_EQ(layout.total_bytes(), KvBytesPerBlock(config) * config.num_blocks);
  std::vector<int> covered(static_cast<size_t>(layout.total_bytes()), 0);
  for (int32_t layer = 0; layer < config.num_layers; ++layer) {
    for (kv::BlockId block = 0; block < config.num_blocks; ++block) {
      for (int32_t slot = 0; slot < config.block_size; ++slot) {
        for (int64_t e = 0; e < layout.k_token_stride(); ++e) {
          ++covered[static_cast<size_t>(layout.KOffset(layer, block, slot) + e)];
        }
        for (int64_t e = 0; e < layout.v_token_stride(); ++e) {
          ++covered[static_cast<size_t>(layout.VOffset(layer, block, slot) + e)];
        }
      }
    }
  }
  for (size_t i = 0; i < covered.size(); ++i) ASSERT_EQ(covered[i], 1) << "byte " << i;
}

TEST(KvLayout, OffsetsUse64BitArithmeticFarBeyond2Pow31Bytes) {
  // A sparse layout no machine here could allocate: 64 layers, 8 heads of 256, 2^31-1 blocks.
  const KvCacheConfig config{64,           8, 256, 256, 16, std::numeric_limits<int32_t>::max(),
                             KvDtype::kF16};
  const KvLayout layout(config);
  using u128 = unsigned __int128;
  const u128 k_block = u128{16} * 8 * 256 * 2;
  const u128 layer_stride = 2 * k_block * static_cast<u128>(config.num_blocks);
  const int32_t layer = 63;
  const kv::BlockId block = config.num_blocks - 1;
  const int32_t slot = 15;
  const u128 k_expected = layer * layer_stride + block * k_block + slot * u128{8 * 256 * 2};
  const u128 v_expected = k_expected + k_block * static_cast<u128>(config.num_blocks);
  EXPECT_EQ(static_cast<u128>(layout.KOffset(layer, block, slot)), k_expected);
  EXPECT_EQ(static_cast<u128>(layout.VOffset(layer, block, slot)), v_expected);
  EXPECT_GT(layout.KOffset(0, block, 0), int64_t{1} << 32);  // within one layer already
  EXPECT_EQ(static_cast<u128>(layout.total_bytes()), layer_stride * 64);
}

TEST(KvStorage, CreateRejectsBadShapes) {
  for (int field = 0; field < 6; ++field) {
    KvCacheConfig config = Gemma3Config();
    config.num_blocks = 4;
    int32_t* fields[] = {&config.num_layers, &config.num_kv_heads, &config.head_dim_k,
                         &config.head_dim_v, &config.block_size,   &config.num_blocks};
    *fields[field] = field % 2 == 0 ? 0 : -3;
    auto storage = KvStorage::Create(config);
    ASSERT_FALSE(storage.ok()) << "field " << field;
    EXPECT_EQ(storage.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(KvStorage, CreateRejectsASizeThatOverflows) {
  KvCacheConfig config{std::numeric_limits<int32_t>::max(),
                       std::numeric_limits<int32_t>::max(),
                       1 << 20,
                       1 << 20,
                       1 << 20,
                       std::numeric_limits<int32_t>::max(),
                       KvDtype::kF32};
  auto storage = KvStorage::Create(config);
  ASSERT_FALSE(storage.ok());
  EXPECT_EQ(storage.status().code(), StatusCode::kInvalidArgument);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
TEST(KvStorage, CreateReportsResourceExhaustedWhenMemoryIsShort) {
  // ~2^62 bytes: fits int64 but no machine has it. (Skipped under sanitizers, whose allocators
  // abort on such a request instead of returning null.)
  KvCacheConfig config{1 << 20, 1 << 10, 1 << 10, 1 << 10, 1 << 8, 1 << 6, KvDtype::kF16};
  auto storage = KvStorage::Create(config);
  ASSERT_FALSE(storage.ok());
  EXPECT_EQ(storage.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(storage.status().message().find("KV cache"), std::string::npos);
}
#endif

TEST(KvStorage, StartsZeroedAndAligned) {
  KvCacheConfig config = Gemma3Config();
  config.num_blocks = 3;
  auto storage = KvStorage::Create(config);
  ASSERT_TRUE(storage.ok()) << storage.status().ToString();
  EXPECT_EQ((*storage)->size_bytes(), 3 * KvBytesPerBlock(config));
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*storage)->KBlock(0, 0)) % 64, 0u);
  const kv::BlockId blocks[] = {2};
  std::vector<float> k(256, 1.0f), v(256, 1.0f);
  (*storage)->Read(17, blocks, 15, k.data(), v.data());
  for (int d = 0; d < 256; ++d) ASSERT_EQ(k[d], 0.0f);
}

class KvStorageRoundTrip : public ::testing::TestWithParam<std::tuple<KvDtype, KvIsa>> {};

TEST_P(KvStorageRoundTrip, WriteThenReadGivesTheValuesRoundedToTheStorageType) {
  const auto [dtype, isa] = GetParam();
  if (!KvIsaSupported(isa)) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C";
  // Odd head dims (not multiples of 8) exercise the vector tails.
  const KvCacheConfig config{2, 3, 13, 7, 5, 6, dtype};
  auto created = KvStorage::Create(config);
  ASSERT_TRUE(created.ok());
  KvStorage& storage = **created;
  const std::vector<kv::BlockId> blocks = {4, 0, 5, 2};  // shuffled, not every block
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> dist(-70000.0f, 70000.0f);  // past fp16's max, too
  std::vector<std::vector<float>> ks, vs;
  for (int64_t pos = 0; pos < 20; ++pos) {
    std::vector<float> k(3 * 13), v(3 * 7);
    for (float& x : k) x = dist(rng) * (pos % 3 == 0 ? 1e-9f : 1.0f);  // fp16 subnormals too
    for (float& x : v) x = dist(rng) / 1000.0f;
    storage.Write(1, blocks, pos, k.data(), v.data(), isa);
    ks.push_back(k);
    vs.push_back(v);
  }
  for (int64_t pos = 0; pos < 20; ++pos) {
    std::vector<float> k(3 * 13), v(3 * 7);
    storage.Read(1, blocks, pos, k.data(), v.data());
    for (size_t i = 0; i < k.size(); ++i) {
      const float want =
          dtype == KvDtype::kF32 ? ks[pos][i] : model::Fp16ToFloat(model::FloatToFp16(ks[pos][i]));
      ASSERT_EQ(k[i], want) << "pos " << pos << " k[" << i << "] from " << ks[pos][i];
    }
    for (size_t i = 0; i < v.size(); ++i) {
      const float want =
          dtype == KvDtype::kF32 ? vs[pos][i] : model::Fp16ToFloat(model::FloatToFp16(vs[pos][i]));
      ASSERT_EQ(v[i], want) << "pos " << pos << " v[" << i << "]";
    }
    // Layer 0 is untouched.
    storage.Read(0, blocks, pos, k.data(), v.data());
    for (float x : k) ASSERT_EQ(x, 0.0f);
  }
  // The raw block pointers see the same slot: position 7 is block blocks[1] = 0, slot 2.
  const size_t elt = dtype == KvDtype::kF32 ? 4 : 2;
  const auto* k_block = static_cast<const unsigned char*>(storage.KBlock(1, 0));
  std::vector<unsigned char> want(3 * 13 * elt);
  for (size_t i = 0; i < 3 * 13; ++i) {
    if (dtype == KvDtype::kF32) {
      std::memcpy(want.data() + i * 4, &ks[7][i], 4);
    } else {
      const uint16_t h = model::FloatToFp16(ks[7][i]);
      std::memcpy(want.data() + i * 2, &h, 2);
    }
  }
  EXPECT_EQ(std::memcmp(k_block + 2 * 3 * 13 * elt, want.data(), want.size()), 0);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, KvStorageRoundTrip,
                         ::testing::Combine(::testing::Values(KvDtype::kF16, KvDtype::kF32),
                                            ::testing::Values(KvIsa::kScalar, KvIsa::kAvx2)));

// q8_0: each group of 64 (and the short last one) scaled by fp16(max |x| / 127); every value
// read back within half a step of its group, the group's largest value exactly +-127 steps.
TEST(KvStorage, Q8RoundTripIsWithinHalfAStepOfEachGroup) {
  // head dims 130 (groups of 64, 64 and 2) and 13 (one short group); 3 KV heads.
  const KvCacheConfig config{2, 3, 130, 13, 4, 5, KvDtype::kQ8_0};
  auto created = KvStorage::Create(config);
  ASSERT_TRUE(created.ok());
  KvStorage& storage = **created;
  const std::vector<kv::BlockId> blocks = {3, 0, 4};
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t pos = 0; pos < 12; ++pos) {
    std::vector<float> k(3 * 130), v(3 * 13);
    // Ordinary magnitudes, fp16-subnormal scales (1e-5), groups below them (1e-12) and zeros.
    const float amplitude = pos == 3   ? 1e-12f
                            : pos == 5 ? 0.0f
                            : pos == 7 ? 1e-5f
                                       : std::pow(10.0f, static_cast<float>(pos % 4));
    for (float& x : k) x = amplitude * dist(rng);
    for (float& x : v) x = amplitude * dist(rng);
    storage.Write(1, blocks, pos, k.data(), v.data());
    std::vector<float> k_back(k.size()), v_back(v.size());
    storage.Read(1, blocks, pos, k_back.data(), v_back.data());
    auto check = [&](const std::vector<float>& in, const std::vector<float>& out, int dim) {
      for (int h = 0; h < 3; ++h) {
        for (int g0 = 0; g0 < dim; g0 += kQ8Group) {
          const int g1 = std::min(dim, g0 + kQ8Group);
          float amax = 0.0f;
          for (int d = g0; d < g1; ++d) amax = std::max(amax, std::fabs(in[h * dim + d]));
          uint16_t bits = model::FloatToFp16(amax / 127.0f);
          if (model::Fp16ToFloat(bits) * 127.0f < amax) ++bits;  // never clip the largest
          const float step = model::Fp16ToFloat(bits);
          for (int d = g0; d < g1; ++d) {
            const float x = in[h * dim + d];
            const float y = out[h * dim + d];
            if (step == 0.0f) {
              // A group below fp16's smallest scale (2^-24) reads back as zeros.
              ASSERT_EQ(y, 0.0f);
              ASSERT_LT(std::fabs(x), 127.0f * std::ldexp(1.0f, -24));
              continue;
            }
            ASSERT_LE(std::fabs(x - y), 0.5f * step * 1.001f)
                << "pos " << pos << " head " << h << " dim " << d << ": " << x << " -> " << y;
            // Every value is a whole number of steps, at most 127 of them.
            ASSERT_EQ(y / step, std::nearbyint(y / step));
            ASSERT_LE(std::fabs(y / step), 127.0f);
          }
        }
      }
    };
    check(k, k_back, 130);
    check(v, v_back, 13);
  }
  // Values past what fp16 scales can express saturate instead of turning into inf or NaN.
  std::vector<float> huge(3 * 130, 1e30f), small(3 * 13, -1e30f);
  huge[5] = std::numeric_limits<float>::quiet_NaN();
  storage.Write(0, blocks, 0, huge.data(), small.data());
  std::vector<float> k_back(huge.size()), v_back(small.size());
  storage.Read(0, blocks, 0, k_back.data(), v_back.data());
  for (size_t i = 0; i < k_back.size(); ++i) {
    ASSERT_TRUE(std::isfinite(k_back[i])) << i;
    ASSERT_EQ(k_back[i], i == 5 ? 0.0f : 127.0f * 65504.0f) << i;
  }
  for (float y : v_back) ASSERT_EQ(y, -127.0f * 65504.0f);
}

TEST(KvStorage, Fp16WritesAreBitIdenticalOnEveryPath) {
  const KvCacheConfig config{1, 1, 4096, 8, 1, 2, KvDtype::kF16};
  auto created = KvStorage::Create(config);
  ASSERT_TRUE(created.ok());
  KvStorage& storage = **created;
  std::vector<float> k(4096);
  std::mt19937 rng(5);
  for (size_t i = 0; i < k.size(); ++i) {
    // Random bit patterns (no NaN) cover normals, subnormals, ties and overflow.
    uint32_t bits = static_cast<uint32_t>(rng());
    if ((bits & 0x7f800000u) == 0x7f800000u) bits &= 0xff800000u;  // NaN -> +-inf
    std::memcpy(&k[i], &bits, 4);
  }
  const std::vector<float> v(8, 0.5f);
  const std::vector<kv::BlockId> blocks = {0, 1};
  for (KvIsa isa : SupportedIsas()) {
    storage.Write(0, blocks, isa == KvIsa::kScalar ? 0 : 1, k.data(), v.data(), isa);
  }
  if (SupportedIsas().size() < 2) GTEST_SKIP() << "only the scalar path on this CPU";
  EXPECT_EQ(std::memcmp(storage.KBlock(0, 0), storage.KBlock(0, 1), 4096 * 2), 0);
}

TEST(KvStorage, ThreadsWriteDifferentSlotsConcurrently) {
  const KvCacheConfig config{4, 2, 64, 64, 16, 8, KvDtype::kF16};
  auto created = KvStorage::Create(config);
  ASSERT_TRUE(created.ok());
  KvStorage& storage = **created;
  const std::vector<kv::BlockId> blocks = {7, 1, 3, 0, 6, 2, 5, 4};
  auto value = [](int32_t layer, int64_t pos, int i) {
    return static_cast<float>(layer * 1000 + pos) + static_cast<float>(i) / 128.0f;
  };
  std::vector<std::thread> threads;
  for (int32_t layer = 0; layer < 4; ++layer) {
    threads.emplace_back([&, layer] {
      std::vector<float> k(128), v(128);
      for (int64_t pos = 0; pos < 128; ++pos) {
        for (int i = 0; i < 128; ++i) k[i] = v[i] = value(layer, pos, i) / 8.0f;
        storage.Write(layer, blocks, pos, k.data(), v.data());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<float> k(128), v(128);
  for (int32_t layer = 0; layer < 4; ++layer) {
    for (int64_t pos = 0; pos < 128; ++pos) {
      storage.Read(layer, blocks, pos, k.data(), v.data());
      for (int i = 0; i < 128; ++i) {
        const float want = model::Fp16ToFloat(model::FloatToFp16(value(layer, pos, i) / 8.0f));
        ASSERT_EQ(k[i], want) << "layer " << layer << " pos " << pos;
        ASSERT_EQ(v[i], want);
      }
    }
  }
}

}  // namespace
}  // namespace strata::backend::cpu
