// Dequantization: hand-built blocks with values worked out by hand from the block layouts
// (ggml's block_* structs), fp16/bf16 conversion edge cases, and input errors. Bit-exactness
// against gguf-py on random blocks and on the real model is tests/fidelity/test_dequant.py.
#include "strata/model/dequantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "strata/model/fp16.h"
#include "strata/model/ggml_type.h"

namespace strata::model {
namespace {

// fp16 bit patterns used below.
constexpr uint16_t kHalfOne = 0x3c00;       // 1.0
constexpr uint16_t kHalfTwo = 0x4000;       // 2.0
constexpr uint16_t kHalfHalf = 0x3800;      // 0.5
constexpr uint16_t kHalfQuarter = 0x3400;   // 0.25
constexpr uint16_t kHalfMinusOne = 0xbc00;  // -1.0

class Block {
 public:
  Block& Half(uint16_t bits) {
    bytes_.push_back(static_cast<uint8_t>(bits & 0xff));
    bytes_.push_back(static_cast<uint8_t>(bits >> 8));
    return *this;
  }
  Block& U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Block& Repeat(uint8_t byte, int count) {
    bytes_.insert(bytes_.end(), count, byte);
    return *this;
  }
  Block& Byte(uint8_t byte) {
    bytes_.push_back(byte);
    return *this;
  }
  uint8_t& operator[](size_t i) { return bytes_[i]; }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

std::vector<float> MustDequantize(GgmlType type, const std::vector<uint8_t>& bytes) {
  const GgmlTypeTraits traits = TraitsOf(type);
  EXPECT_EQ(bytes.size() % traits.type_size, 0u) << "test bug: bad block length";
  const uint64_t n = bytes.size() / traits.type_size * traits.block_size;
  std::vector<float> out(n, std::numeric_limits<float>::quiet_NaN());
  const Status status = Dequantize(type, bytes, n, out.data());
  EXPECT_TRUE(status.ok()) << status.ToString();
  return out;
}

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }

// ---- Hand-built blocks, one per format (values derived in the tests below) ----------------

// Q4_0: d = 2; qs[j] = j in the low nibble, 15 - j in the high nibble.
Block MakeQ4_0Block() {
  Block block;
  block.Half(kHalfTwo);
  for (int j = 0; j < 16; ++j) block.Byte(static_cast<uint8_t>(j | ((15 - j) << 4)));
  return block;
}

// Q4_1: d = 0.25, m = -1; nibbles as Q4_0.
Block MakeQ4_1Block() {
  Block block;
  block.Half(kHalfQuarter).Half(kHalfMinusOne);
  for (int j = 0; j < 16; ++j) block.Byte(static_cast<uint8_t>(j | ((15 - j) << 4)));
  return block;
}

// Q5_0: d = 1; qh = 0x00010002 sets bit 4 of elements 1 and 16; qs[j] = j in both nibbles.
Block MakeQ5_0Block() {
  Block block;
  block.Half(kHalfOne).U32(0x00010002u);
  for (int j = 0; j < 16; ++j) block.Byte(static_cast<uint8_t>(j | (j << 4)));
  return block;
}

// Q5_1: d = 0.5, m = 1; qh bits 0 and 31; every low nibble 15, every high nibble 0.
Block MakeQ5_1Block() {
  Block block;
  block.Half(kHalfHalf).Half(kHalfOne).U32(0x80000001u).Repeat(0x0f, 16);
  return block;
}

// Q8_0: d = 0.5; qs[j] = j - 16, except qs[0] = -128 and qs[31] = 127.
Block MakeQ8_0Block() {
  Block block;
  block.Half(kHalfHalf);
  for (int j = 0; j < 32; ++j) block.Byte(static_cast<uint8_t>(j - 16));
  block[2] = 0x80;
  block[33] = 0x7f;
  return block;
}

// Q2_K: scales[i] = i (scale, low nibble) | (15 - i) << 4 (min); d = 1, dmin = 0.5. qs bytes
// 0xe4 hold 0, 1, 2, 3 in bit pairs 0..3, so element h*128 + s*32 + l is s for h = 0; the
// second 32 bytes are 0x1b (3, 2, 1, 0), giving 3 - s for h = 1; qs[21] = 0xe7 makes
// element 21 a 3.
Block MakeQ2_KBlock() {
  Block block;
  for (int i = 0; i < 16; ++i) block.Byte(static_cast<uint8_t>(i | ((15 - i) << 4)));
  block.Repeat(0xe4, 32).Repeat(0x1b, 32).Half(kHalfOne).Half(kHalfHalf);
  block[16 + 21] = 0xe7;
  return block;
}

// Q3_K: hmask all ones (no -4 offset) except hmask[3] bit 0 and hmask[10] bit 7; qs all 0xe4
// (element h*128 + s*32 + l has low bits s); d = 1. The 16 six-bit scales (stored + 32) are
// 34 for sub-block 0, 0 for sub-block 15 and 33 otherwise, i.e. 2, -32 and 1: low nibbles in
// bytes 0-7 (scales 0-7 low, 8-15 high), top bit pairs in bytes 8-11 (scale i at bits
// 2 (i / 4) of byte 8 + i % 4).
Block MakeQ3_KBlock() {
  Block block;
  block.Repeat(0xff, 32).Repeat(0xe4, 64);
  block[3] = 0xfe;
  block[10] = 0x7f;
  block.Byte(0x12).Repeat(0x11, 6).Byte(0x01);
  block.Byte(0xaa).Byte(0xaa).Byte(0xaa).Byte(0x2a);
  block.Half(kHalfOne);
  return block;
}

// The Q4_K/Q5_K scale bytes for scales {1, 2, 3, 4, 17, 34, 51, 5} and mins
// {0, 4, 8, 12, 16, 32, 48, 1}: bytes 0-3 are scales 0-3 with the top two bits of scales 4-7
// in bits 6-7; bytes 4-7 likewise for the mins; bytes 8-11 hold the low nibbles of scales 4-7
// (low) and mins 4-7 (high).
constexpr uint8_t kKScaleBytes[12] = {0x41, 0x82, 0xc3, 0x04, 0x40, 0x84,
                                      0xc8, 0x0c, 0x01, 0x02, 0x03, 0x15};

// Q4_K: d = 1, dmin = 0.25; qs[k] = k % 16 in the low nibble, 15 - k % 16 in the high one.
Block MakeQ4_KBlock() {
  Block block;
  block.Half(kHalfOne).Half(kHalfQuarter);
  for (uint8_t byte : kKScaleBytes) block.Byte(byte);
  for (int k = 0; k < 128; ++k) block.Byte(static_cast<uint8_t>((k % 16) | ((15 - k % 16) << 4)));
  return block;
}

// Q5_K: as Q4_K, with qh[0] = 0x01, qh[12] = 0x10, qh[31] = 0x80 and the other qh bytes 0.
Block MakeQ5_KBlock() {
  Block block;
  block.Half(kHalfOne).Half(kHalfQuarter);
  for (uint8_t byte : kKScaleBytes) block.Byte(byte);
  block.Repeat(0x00, 32);
  block[16 + 0] = 0x01;
  block[16 + 12] = 0x10;
  block[16 + 31] = 0x80;
  for (int k = 0; k < 128; ++k) block.Byte(static_cast<uint8_t>((k % 16) | ((15 - k % 16) << 4)));
  return block;
}

// Q6_K: ql all 0x21 except ql[70] = 0x5f; qh all 0xe4; scales[i] = i - 4; d = 0.5.
Block MakeQ6_KBlock() {
  Block block;
  block.Repeat(0x21, 128).Repeat(0xe4, 64);
  block[70] = 0x5f;
  for (int i = 0; i < 16; ++i) block.Byte(static_cast<uint8_t>(i - 4));
  block.Half(kHalfHalf);
  return block;
}

// ---- Legacy 32-element formats -----------------------------------------------------------

TEST(Dequantize, Q8_0IsScaleTimesSignedByte) {
  const std::vector<float> out = MustDequantize(GgmlType::kQ8_0, MakeQ8_0Block().bytes());
  ASSERT_EQ(out.size(), 32u);
  EXPECT_EQ(out[0], -64.0f);  // 0.5 * -128
  EXPECT_EQ(out[1], -7.5f);   // 0.5 * (1 - 16)
  EXPECT_EQ(out[16], 0.0f);
  EXPECT_EQ(out[20], 2.0f);
  EXPECT_EQ(out[30], 7.0f);
  EXPECT_EQ(out[31], 63.5f);  // 0.5 * 127
}

TEST(Dequantize, Q4_0TakesLowNibblesThenHighNibblesOffsetByEight) {
  const std::vector<float> expected = {
      -16, -14, -12, -10, -8, -6, -4, -2, 0,  2,  4,  6,  8,   10,  12,  14,   // (j - 8) * 2
      14,  12,  10,  8,   6,  4,  2,  0,  -2, -4, -6, -8, -10, -12, -14, -16,  // (7 - j) * 2
  };
  EXPECT_EQ(MustDequantize(GgmlType::kQ4_0, MakeQ4_0Block().bytes()), expected);
}

TEST(Dequantize, Q4_1IsScaleTimesNibblePlusMin) {
  const std::vector<float> expected = {
      // 0.25 j - 1
      -1,
      -0.75,
      -0.5,
      -0.25,
      0,
      0.25,
      0.5,
      0.75,
      1,
      1.25,
      1.5,
      1.75,
      2,
      2.25,
      2.5,
      2.75,
      // 0.25 (15 - j) - 1
      2.75,
      2.5,
      2.25,
      2,
      1.75,
      1.5,
      1.25,
      1,
      0.75,
      0.5,
      0.25,
      0,
      -0.25,
      -0.5,
      -0.75,
      -1,
  };
  EXPECT_EQ(MustDequantize(GgmlType::kQ4_1, MakeQ4_1Block().bytes()), expected);
}

TEST(Dequantize, Q5_0TakesBitFourOfElementIFromBitIOfQh) {
  const std::vector<float> expected = {
      -16, 1,   -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, -1,  // j (+16) - 16
      0,   -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, -1,
  };
  EXPECT_EQ(MustDequantize(GgmlType::kQ5_0, MakeQ5_0Block().bytes()), expected);
}

TEST(Dequantize, Q5_1IsScaleTimesFiveBitValuePlusMin) {
  std::vector<float> expected(32);
  expected[0] = 16.5f;                               // 0.5 * 31 + 1
  for (int j = 1; j < 16; ++j) expected[j] = 8.5f;   // 0.5 * 15 + 1
  for (int j = 16; j < 31; ++j) expected[j] = 1.0f;  // 0.5 * 0 + 1
  expected[31] = 9.0f;                               // 0.5 * 16 + 1
  EXPECT_EQ(MustDequantize(GgmlType::kQ5_1, MakeQ5_1Block().bytes()), expected);
}

// ---- K-quants -----------------------------------------------------------------------------

TEST(Dequantize, Q2_KAppliesSixteenScaleMinPairsToTwoBitValues) {
  const std::vector<float> out = MustDequantize(GgmlType::kQ2_K, MakeQ2_KBlock().bytes());
  ASSERT_EQ(out.size(), 256u);
  // x = (d * scale) * q - dmin * min with the pair of sub-block element / 16.
  EXPECT_EQ(out[0], -7.5f);    // sub 0, q 0: 0 * 0 - 0.5 * 15
  EXPECT_EQ(out[17], -7.0f);   // sub 1, q 0: 1 * 0 - 0.5 * 14
  EXPECT_EQ(out[21], -4.0f);   // sub 1, q 3 (qs[21] = 0xe7): 1 * 3 - 7
  EXPECT_EQ(out[40], -4.5f);   // sub 2, s 1: 2 * 1 - 0.5 * 13
  EXPECT_EQ(out[53], -3.0f);   // sub 3, s 1 (bits 2-3 of 0xe7 are 1): 3 * 1 - 0.5 * 12
  EXPECT_EQ(out[127], 17.0f);  // sub 7, s 3: 7 * 3 - 0.5 * 8
  EXPECT_EQ(out[128], 20.5f);  // sub 8, h 1, s 0 -> q 3: 8 * 3 - 0.5 * 7
  EXPECT_EQ(out[200], 10.5f);  // sub 12, h 1, s 2 -> q 1: 12 * 1 - 0.5 * 3
  EXPECT_EQ(out[255], 0.0f);   // sub 15, h 1, s 3 -> q 0: 15 * 0 - 0.5 * 0
}

TEST(Dequantize, Q3_KUnpacksSixBitScalesAndSubtractsFourWhereHmaskBitIsClear) {
  const std::vector<float> out = MustDequantize(GgmlType::kQ3_K, MakeQ3_KBlock().bytes());
  ASSERT_EQ(out.size(), 256u);
  // x = (d * (scale - 32)) * q; scales 2, 1 x 14, -32; q = s, minus 4 where hmask says so.
  EXPECT_EQ(out[0], 0.0f);      // sub 0: 2 * 0
  EXPECT_EQ(out[3], -8.0f);     // sub 0, hmask[3] bit 0 clear: 2 * (0 - 4)
  EXPECT_EQ(out[35], 1.0f);     // sub 2, s 1, hmask[3] bit 1 set: 1 * 1
  EXPECT_EQ(out[100], 3.0f);    // sub 6, s 3
  EXPECT_EQ(out[130], 0.0f);    // sub 8, h 1, s 0
  EXPECT_EQ(out[170], 1.0f);    // sub 10, s 1
  EXPECT_EQ(out[234], -1.0f);   // sub 14, s 3, hmask[10] bit 7 clear: 1 * (3 - 4)
  EXPECT_EQ(out[42], 1.0f);     // hmask[10] bit 1 is set: 1 * 1
  EXPECT_EQ(out[250], -96.0f);  // sub 15: -32 * 3
}

TEST(Dequantize, Q4_KUnpacksEightScalesAndMinsFromTwelveBytes) {
  const std::vector<float> out = MustDequantize(GgmlType::kQ4_K, MakeQ4_KBlock().bytes());
  ASSERT_EQ(out.size(), 256u);
  // scales {1, 2, 3, 4, 17, 34, 51, 5}, mins {0, 4, 8, 12, 16, 32, 48, 1}; d = 1,
  // dmin = 0.25; x = (d * scale) * q - dmin * min; q = l % 16 in even sub-blocks (low
  // nibbles), 15 - l % 16 in odd ones (high nibbles).
  EXPECT_EQ(out[0], 0.0f);      // sub 0, l 0: 1 * 0 - 0
  EXPECT_EQ(out[5], 5.0f);      // sub 0, l 5: 1 * 5 - 0
  EXPECT_EQ(out[33], 27.0f);    // sub 1, l 1: 2 * 14 - 1
  EXPECT_EQ(out[84], 10.0f);    // sub 2, l 20: 3 * 4 - 2
  EXPECT_EQ(out[100], 41.0f);   // sub 3, l 4: 4 * 11 - 3
  EXPECT_EQ(out[140], 200.0f);  // sub 4, l 12: 17 * 12 - 4
  EXPECT_EQ(out[170], 162.0f);  // sub 5, l 10: 34 * 5 - 8
  EXPECT_EQ(out[200], 396.0f);  // sub 6, l 8: 51 * 8 - 12
  EXPECT_EQ(out[230], 44.75f);  // sub 7, l 6: 5 * 9 - 0.25
  EXPECT_EQ(out[255], -0.25f);  // sub 7, l 31: 5 * 0 - 0.25
}

TEST(Dequantize, Q5_KTakesBitFourOfSubBlockSFromBitSOfQh) {
  const std::vector<float> out = MustDequantize(GgmlType::kQ5_K, MakeQ5_KBlock().bytes());
  ASSERT_EQ(out.size(), 256u);
  // As Q4_K, plus 16 where bit `sub` of qh[l] is set: qh[0] bit 0, qh[12] bit 4, qh[31] bit 7.
  EXPECT_EQ(out[0], 16.0f);     // sub 0, l 0: 1 * 16 - 0
  EXPECT_EQ(out[5], 5.0f);      // no high bit
  EXPECT_EQ(out[12], 12.0f);    // qh[12] bit 0 is clear
  EXPECT_EQ(out[31], 15.0f);    // qh[31] bit 0 is clear
  EXPECT_EQ(out[33], 27.0f);    // sub 1, l 1: 2 * 14 - 1
  EXPECT_EQ(out[140], 472.0f);  // sub 4, l 12: 17 * (12 + 16) - 4
  EXPECT_EQ(out[172], 94.0f);   // sub 5, l 12: 34 * 3 - 8 (qh[12] bit 5 is clear)
  EXPECT_EQ(out[230], 44.75f);  // sub 7, l 6: 5 * 9 - 0.25
  EXPECT_EQ(out[255], 79.75f);  // sub 7, l 31: 5 * (0 + 16) - 0.25
}

TEST(Dequantize, Q6_KCombinesFourLowAndTwoHighBitsWithInt8Scales) {
  const std::vector<float> out = MustDequantize(GgmlType::kQ6_K, MakeQ6_KBlock().bytes());
  ASSERT_EQ(out.size(), 256u);
  // x = (d * scale) * (q - 32), d = 0.5, scale = sub - 4; within each half of 128 elements,
  // element r takes nibble r / 64 of ql[r % 64] (0x21: 1 then 2) and bits 2 (r / 32) of
  // qh[r % 32] (0xe4: r / 32).
  EXPECT_EQ(out[0], 62.0f);     // sub 0: -2 * (1 - 32)
  EXPECT_EQ(out[6], 62.0f);     // ql[70] belongs to the second half only
  EXPECT_EQ(out[40], 15.0f);    // sub 2: -1 * (1 + 16 - 32)
  EXPECT_EQ(out[70], 0.0f);     // sub 4: 0 * (2 + 32 - 32)
  EXPECT_EQ(out[100], 18.0f);   // sub 6: 1 * (2 + 48 - 32)
  EXPECT_EQ(out[134], -34.0f);  // sub 8, r 6, ql[70] low nibble 15: 2 * (15 - 32)
  EXPECT_EQ(out[160], -45.0f);  // sub 10, r 32: 3 * (1 + 16 - 32)
  EXPECT_EQ(out[198], 20.0f);   // sub 12, r 70, ql[70] high nibble 5: 4 * (5 + 32 - 32)
  EXPECT_EQ(out[255], 99.0f);   // sub 15: 5.5 * (2 + 48 - 32)
}

// Each block carries its own scales: a second block equal to the first but with every fp16
// scale field doubled must dequantize to exactly twice the first block's values.
struct ScaledBlockCase {
  GgmlType type;
  Block (*make)();
  std::vector<size_t> scale_offsets;  // byte offsets of the fp16 scale fields
};

class DequantizeEachBlock : public testing::TestWithParam<ScaledBlockCase> {};

TEST_P(DequantizeEachBlock, UsesItsOwnScales) {
  const ScaledBlockCase& c = GetParam();
  Block first = c.make();
  Block second = c.make();
  for (size_t offset : c.scale_offsets) {
    uint16_t bits = static_cast<uint16_t>(second[offset] | (second[offset + 1] << 8));
    bits = static_cast<uint16_t>(bits + 0x0400);  // exponent + 1 on a normal fp16: doubles it
    second[offset] = static_cast<uint8_t>(bits & 0xff);
    second[offset + 1] = static_cast<uint8_t>(bits >> 8);
  }
  std::vector<uint8_t> bytes = first.bytes();
  bytes.insert(bytes.end(), second.bytes().begin(), second.bytes().end());
  const std::vector<float> out = MustDequantize(c.type, bytes);
  const size_t n = out.size() / 2;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[n + i], 2.0f * out[i]) << GgmlTypeName(c.type) << " element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllBlockFormats, DequantizeEachBlock,
                         testing::Values(ScaledBlockCase{GgmlType::kQ4_0, MakeQ4_0Block, {0}},
                                         ScaledBlockCase{GgmlType::kQ4_1, MakeQ4_1Block, {0, 2}},
                                         ScaledBlockCase{GgmlType::kQ5_0, MakeQ5_0Block, {0}},
                                         ScaledBlockCase{GgmlType::kQ5_1, MakeQ5_1Block, {0, 2}},
                                         ScaledBlockCase{GgmlType::kQ8_0, MakeQ8_0Block, {0}},
                                         ScaledBlockCase{GgmlType::kQ2_K, MakeQ2_KBlock, {80, 82}},
                                         ScaledBlockCase{GgmlType::kQ3_K, MakeQ3_KBlock, {108}},
                                         ScaledBlockCase{GgmlType::kQ4_K, MakeQ4_KBlock, {0, 2}},
                                         ScaledBlockCase{GgmlType::kQ5_K, MakeQ5_KBlock, {0, 2}},
                                         ScaledBlockCase{GgmlType::kQ6_K, MakeQ6_KBlock, {208}}),
                         [](const testing::TestParamInfo<ScaledBlockCase>& info) {
                           return std::string(GgmlTypeName(info.param.type));
                         });

// ---- Plain float types ---------------------------------------------------------------------

TEST(Dequantize, F32CopiesBitPatternsIncludingNanPayloads) {
  const std::vector<uint32_t> bits = {0x3f800000u, 0x80000000u, 0x7fa00001u, 0x00000001u};
  std::vector<uint8_t> bytes(16);
  std::memcpy(bytes.data(), bits.data(), bytes.size());
  const std::vector<float> out = MustDequantize(GgmlType::kF32, bytes);
  for (size_t i = 0; i < bits.size(); ++i) EXPECT_EQ(Bits(out[i]), bits[i]) << i;
}

TEST(Dequantize, F16WidensEachHalf) {
  Block block;
  block.Half(0x3c00).Half(0x8000).Half(0x7c00).Half(0x0001).Half(0xc500);
  const std::vector<float> out = MustDequantize(GgmlType::kF16, block.bytes());
  EXPECT_EQ(Bits(out[0]), Bits(1.0f));
  EXPECT_EQ(Bits(out[1]), Bits(-0.0f));
  EXPECT_EQ(out[2], std::numeric_limits<float>::infinity());
  EXPECT_EQ(out[3], std::ldexp(1.0f, -24));
  EXPECT_EQ(out[4], -5.0f);
}

TEST(Dequantize, BF16IsTheTopHalfOfAFloat) {
  Block block;
  block.Half(0x3f80).Half(0xc0a0).Half(0x0001);
  const std::vector<float> out = MustDequantize(GgmlType::kBF16, block.bytes());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -5.0f);
  EXPECT_EQ(Bits(out[2]), 0x00010000u);
}

// ---- fp16 / bf16 conversions -------------------------------------------------------------

TEST(Fp16, ConvertsEdgeCasesExactly) {
  EXPECT_EQ(Bits(Fp16ToFloat(0x0000)), 0x00000000u);  // +0
  EXPECT_EQ(Bits(Fp16ToFloat(0x8000)), 0x80000000u);  // -0
  EXPECT_EQ(Bits(Fp16ToFloat(0x0001)), 0x33800000u);  // smallest subnormal, 2^-24
  EXPECT_EQ(Bits(Fp16ToFloat(0x8001)), 0xb3800000u);  // -2^-24
  EXPECT_EQ(Bits(Fp16ToFloat(0x03ff)), 0x387fc000u);  // largest subnormal, 1023 * 2^-24
  EXPECT_EQ(Bits(Fp16ToFloat(0x0200)), 0x38000000u);  // 2^-15
  EXPECT_EQ(Bits(Fp16ToFloat(0x0400)), 0x38800000u);  // smallest normal, 2^-14
  EXPECT_EQ(Bits(Fp16ToFloat(0x3c00)), 0x3f800000u);  // 1
  EXPECT_EQ(Bits(Fp16ToFloat(0x3555)), 0x3eaaa000u);  // 0.333251953125
  EXPECT_EQ(Bits(Fp16ToFloat(0x7bff)), 0x477fe000u);  // 65504, the largest finite
  EXPECT_EQ(Bits(Fp16ToFloat(0x7c00)), 0x7f800000u);  // +inf
  EXPECT_EQ(Bits(Fp16ToFloat(0xfc00)), 0xff800000u);  // -inf
  EXPECT_EQ(Bits(Fp16ToFloat(0x7e00)), 0x7fc00000u);  // quiet NaN
  EXPECT_EQ(Bits(Fp16ToFloat(0xfe00)), 0xffc00000u);  // negative quiet NaN
  EXPECT_EQ(Bits(Fp16ToFloat(0x7c01)), 0x7f802000u);  // signalling NaN keeps its payload
}

TEST(Fp16, EveryHalfWidensToItsValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Fp16ToFloat(static_cast<uint16_t>(h));
    const uint32_t exponent = (h >> 10) & 0x1f;
    const uint32_t mantissa = h & 0x3ff;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;
    if (exponent == 0x1f) {
      ASSERT_EQ(Bits(f) & 0x7fffffffu, 0x7f800000u | (mantissa << 13)) << std::hex << h;
      continue;
    }
    // value = mantissa * 2^-24 for subnormals, (1024 + mantissa) * 2^(exponent - 25) otherwise.
    const double expected =
        exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024.0 + mantissa, exponent - 25.0);
    ASSERT_EQ(static_cast<double>(std::fabs(f)), expected) << std::hex << h;
  }
}

TEST(Fp16, NarrowingRoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    ASSERT_EQ(FloatToFp16(Fp16ToFloat(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(Fp16, NarrowingRoundsToNearestEven) {
  EXPECT_EQ(FloatToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie -> even 1.0
  EXPECT_EQ(FloatToFp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie -> even 1+2^-9
  EXPECT_EQ(FloatToFp16(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01);
  EXPECT_EQ(FloatToFp16(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToFp16(65519.996f), 0x7bff);  // just below the halfway point
  EXPECT_EQ(FloatToFp16(65520.0f), 0x7c00);    // halfway to 2^16 rounds to infinity
  EXPECT_EQ(FloatToFp16(-1e9f), 0xfc00);
  EXPECT_EQ(FloatToFp16(std::ldexp(1.0f, -25)), 0x0000);  // tie with zero -> zero
  EXPECT_EQ(FloatToFp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(FloatToFp16(3 * std::ldexp(1.0f, -25)), 0x0002);  // 1.5 ulp ties to even 2
  EXPECT_EQ(FloatToFp16(5 * std::ldexp(1.0f, -25)), 0x0002);  // 2.5 ulp ties to even 2
  EXPECT_EQ(FloatToFp16(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25)), 0x0400);  // to normal
  EXPECT_EQ(FloatToFp16(1e-10f), 0x0000);
  EXPECT_EQ(FloatToFp16(-1e-10f), 0x8000);
  EXPECT_EQ(FloatToFp16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToFp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToFp16(std::bit_cast<float>(0x7fc00000u)), 0x7e00);  // quiet NaN
  EXPECT_EQ(FloatToFp16(std::bit_cast<float>(0xff800001u)), 0xfc01);  // payload kept non-zero
}

TEST(Bf16, ConvertsEdgeCasesExactly) {
  EXPECT_EQ(Bits(Bf16ToFloat(0x3f80)), 0x3f800000u);
  EXPECT_EQ(Bits(Bf16ToFloat(0x8000)), 0x80000000u);                // -0
  EXPECT_EQ(Bits(Bf16ToFloat(0x0001)), 0x00010000u);                // subnormal
  EXPECT_EQ(Bits(Bf16ToFloat(0xff80)), 0xff800000u);                // -inf
  EXPECT_EQ(Bits(Bf16ToFloat(0x7f81)), 0x7f810000u);                // signalling NaN stays as it is
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie -> even
  EXPECT_EQ(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie -> even
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_EQ(FloatToBf16(std::bit_cast<float>(0x7f800001u)), 0x7fc0);  // NaN forced quiet
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000);
}

// ---- Errors --------------------------------------------------------------------------------

TEST(Dequantize, SupportsExactlyTheThirteenFormats) {
  const GgmlType supported[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,
                                GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                                GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K,
                                GgmlType::kQ6_K};
  int count = 0;
  for (uint32_t raw = 0; raw < 64; ++raw) {
    const auto type = static_cast<GgmlType>(raw);
    const bool expected =
        std::find(std::begin(supported), std::end(supported), type) != std::end(supported);
    EXPECT_EQ(CanDequantize(type), expected) << raw;
    count += CanDequantize(type) ? 1 : 0;
  }
  EXPECT_EQ(count, 13);
}

TEST(Dequantize, UnsupportedTypeIsUnimplemented) {
  std::vector<uint8_t> bytes(66);  // one IQ2_XXS block
  std::vector<float> out(256);
  Status status = Dequantize(GgmlType::kIQ2_XXS, bytes, 256, out.data());
  EXPECT_EQ(status.code(), StatusCode::kUnimplemented);
  EXPECT_NE(status.message().find("IQ2_XXS"), std::string::npos) << status.message();
  EXPECT_EQ(Dequantize(GgmlType::kQ8_K, bytes, 256, out.data()).code(), StatusCode::kUnimplemented);
  EXPECT_EQ(Dequantize(static_cast<GgmlType>(200), bytes, 256, out.data()).code(),
            StatusCode::kUnimplemented);
}

TEST(Dequantize, ElementCountNotAMultipleOfTheBlockSizeIsInvalid) {
  std::vector<uint8_t> bytes(34);
  std::vector<float> out(64);
  const Status status = Dequantize(GgmlType::kQ8_0, bytes, 31, out.data());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("block size 32"), std::string::npos) << status.message();
}

TEST(Dequantize, SourceSizeMismatchIsInvalid) {
  std::vector<float> out(512);
  EXPECT_EQ(Dequantize(GgmlType::kQ8_0, std::vector<uint8_t>(33), 32, out.data()).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Dequantize(GgmlType::kQ4_K, std::vector<uint8_t>(288), 256, out.data()).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Dequantize(GgmlType::kF16, std::vector<uint8_t>(3), 2, out.data()).code(),
            StatusCode::kInvalidArgument);
}

TEST(Dequantize, ByteCountOverflowIsInvalidNotACrash) {
  // 2^63 elements of Q8_0 would take 2^58 * 34 bytes, more than 2^64.
  std::vector<float> out(32);
  EXPECT_EQ(
      Dequantize(GgmlType::kQ8_0, std::vector<uint8_t>(34), uint64_t{1} << 63, out.data()).code(),
      StatusCode::kInvalidArgument);
}

TEST(Dequantize, ZeroElementsIsOk) {
  EXPECT_TRUE(Dequantize(GgmlType::kQ4_K, {}, 0, nullptr).ok());
}

}  // namespace
}  // namespace strata::model
