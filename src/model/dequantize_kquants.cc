// The K-quant super-block formats (Q2_K .. Q6_K): 256 elements per block, split into
// sub-blocks of 16 or 32 elements with their own quantized scale (and min).
//
// Block layouts (ggml's block_q*_K structs, little-endian, packed; QK_K = 256):
//   Q2_K  (84 B): uint8 scales[16] (lo nibble scale, hi nibble min); uint8 qs[64] (2 bits);
//                 fp16 d, dmin.                       x = (d * sc) * q - dmin * m, 16 sub-blocks
//   Q3_K (110 B): uint8 hmask[32]; qs[64] (2 bits); scales[12] (16 x 6 bits); fp16 d.
//                 x = (d * (sc - 32)) * q, q = low 2 bits - (hmask bit ? 0 : 4), 16 sub-blocks
//   Q4_K (144 B): fp16 d, dmin; scales[12] (8 scales + 8 mins, 6 bits); qs[128] (4 bits).
//                 x = (d * sc) * q - dmin * m, 8 sub-blocks of 32
//   Q5_K (176 B): fp16 d, dmin; scales[12]; qh[32] (bit 4); qs[128] (4 bits). As Q4_K.
//   Q6_K (210 B): ql[128] (4 bits); qh[64] (2 bits); int8 scales[16]; fp16 d.
//                 x = (d * sc) * (q - 32), 16 sub-blocks
// Where the products are grouped (d * sc first, then * q) follows gguf-py's quants.py.

// Bit-exactness with numpy needs each product rounded before the subtraction that follows it,
// so no fused multiply-add contraction whatever the target flags. (Every product here is of an
// fp16 value and small integers and so exact in float32, making FMA harmless today; this keeps
// it so should the arithmetic change.)
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "dequantize_internal.h"

namespace strata::model::internal {
namespace {

constexpr int kQK_K = 256;

// Q4_K/Q5_K 6-bit scales and mins from their 12 packed bytes: bytes 0-3 hold scales 0-3 in the
// low 6 bits, bytes 4-7 mins 0-3; byte 8 + j holds the low 4 bits of scale 4 + j (low nibble)
// and min 4 + j (high nibble), whose top 2 bits sit in bits 6-7 of bytes j and 4 + j.
inline void UnpackScaleMin(const uint8_t* s, uint8_t* sc, uint8_t* mn) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 0x3f;
    mn[j] = s[j + 4] & 0x3f;
    sc[j + 4] = static_cast<uint8_t>((s[j + 8] & 0x0f) | ((s[j] >> 2) & 0x30));
    mn[j + 4] = static_cast<uint8_t>((s[j + 8] >> 4) | ((s[j + 4] >> 2) & 0x30));
  }
}

}  // namespace

void DequantizeQ2_K(const uint8_t* src, uint64_t num_blocks, float* dst) {
  for (uint64_t b = 0; b < num_blocks; ++b, src += 84, dst += kQK_K) {
    const uint8_t* scales = src;
    const uint8_t* qs = src + 16;
    const float d = LoadFp16(src + 80);
    const float dmin = LoadFp16(src + 82);
    // Element h*128 + s*32 + l holds bits 2s..2s+1 of qs[32h + l]; sub-block = element / 16.
    for (int h = 0; h < 2; ++h) {
      for (int s = 0; s < 4; ++s) {
        float* out = dst + h * 128 + s * 32;
        for (int half = 0; half < 2; ++half) {
          const int sub = (h * 128 + s * 32 + half * 16) / 16;
          const float dl = d * static_cast<float>(scales[sub] & 0x0f);
          const float ml = dmin * static_cast<float>(scales[sub] >> 4);
          for (int l = half * 16; l < half * 16 + 16; ++l) {
            const auto q = static_cast<float>((qs[32 * h + l] >> (2 * s)) & 3);
            out[l] = dl * q - ml;
          }
        }
      }
    }
  }
}

void DequantizeQ3_K(const uint8_t* src, uint64_t num_blocks, float* dst) {
  for (uint64_t b = 0; b < num_blocks; ++b, src += 110, dst += kQK_K) {
    const uint8_t* hmask = src;
    const uint8_t* qs = src + 32;
    const uint8_t* packed = src + 96;
    const float d = LoadFp16(src + 108);
    // 16 scales of 6 bits: low 4 bits from the nibbles of bytes 0-7 (low nibbles are scales
    // 0-7, high nibbles 8-15); high 2 bits from bytes 8-11, scale i at bits 2*(i/4) of byte
    // 8 + i%4. Stored with an offset of 32.
    float dl[16];
    for (int i = 0; i < 16; ++i) {
      const int lo = (i < 8 ? packed[i] : packed[i - 8] >> 4) & 0x0f;
      const int hi = (packed[8 + i % 4] >> (2 * (i / 4))) & 0x03;
      dl[i] = d * static_cast<float>((lo | (hi << 4)) - 32);
    }
    // Element e = h*128 + s*32 + l: low bits 2s..2s+1 of qs[32h + l]; bit e/32 of hmask[l]
    // set means no offset, clear means -4.
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128;
      const int s = (e / 32) % 4;
      const int l = e % 32;
      const int low = (qs[32 * h + l] >> (2 * s)) & 3;
      const int high = (hmask[l] >> (e / 32)) & 1;
      dst[e] = dl[e / 16] * static_cast<float>(low - ((high ^ 1) << 2));
    }
  }
}

void DequantizeQ4_K(const uint8_t* src, uint64_t num_blocks, float* dst) {
  for (uint64_t b = 0; b < num_blocks; ++b, src += 144, dst += kQK_K) {
    const float d = LoadFp16(src);
    const float dmin = LoadFp16(src + 2);
    uint8_t sc[8];
    uint8_t mn[8];
    UnpackScaleMin(src + 4, sc, mn);
    const uint8_t* qs = src + 16;
    // Sub-block 2c + s (32 elements) holds nibble s of qs[32c .. 32c + 31].
    for (int sub = 0; sub < 8; ++sub) {
      const float ds = d * static_cast<float>(sc[sub]);
      const float dm = dmin * static_cast<float>(mn[sub]);
      const uint8_t* q = qs + 32 * (sub / 2);
      const int shift = 4 * (sub % 2);
      float* out = dst + 32 * sub;
      for (int l = 0; l < 32; ++l) out[l] = ds * static_cast<float>((q[l] >> shift) & 0x0f) - dm;
    }
  }
}

void DequantizeQ5_K(const uint8_t* src, uint64_t num_blocks, float* dst) {
  for (uint64_t b = 0; b < num_blocks; ++b, src += 176, dst += kQK_K) {
    const float d = LoadFp16(src);
    const float dmin = LoadFp16(src + 2);
    uint8_t sc[8];
    uint8_t mn[8];
    UnpackScaleMin(src + 4, sc, mn);
    const uint8_t* qh = src + 16;
    const uint8_t* qs = src + 48;
    // As Q4_K, plus bit `sub` of qh[l] as bit 4 of element 32*sub + l.
    for (int sub = 0; sub < 8; ++sub) {
      const float ds = d * static_cast<float>(sc[sub]);
      const float dm = dmin * static_cast<float>(mn[sub]);
      const uint8_t* q = qs + 32 * (sub / 2);
      const int shift = 4 * (sub % 2);
      float* out = dst + 32 * sub;
      for (int l = 0; l < 32; ++l) {
        const int v = ((q[l] >> shift) & 0x0f) | (((qh[l] >> sub) & 1) << 4);
        out[l] = ds * static_cast<float>(v) - dm;
      }
    }
  }
}

void DequantizeQ6_K(const uint8_t* src, uint64_t num_blocks, float* dst) {
  for (uint64_t b = 0; b < num_blocks; ++b, src += 210, dst += kQK_K) {
    const uint8_t* ql = src;
    const uint8_t* qh = src + 128;
    const auto* scales = reinterpret_cast<const int8_t*>(src + 192);
    const float d = LoadFp16(src + 208);
    float ds[16];
    for (int i = 0; i < 16; ++i) ds[i] = d * static_cast<float>(scales[i]);
    // Element e = h*128 + r, r = s*32 + l: low 4 bits are nibble r/64 of ql[64h + r%64], high
    // 2 bits are bits 2s..2s+1 of qh[32h + l]; the value is stored with an offset of 32.
    for (int h = 0; h < 2; ++h) {
      for (int r = 0; r < 128; ++r) {
        const int low = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0f;
        const int high = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 0x03;
        const int e = h * 128 + r;
        dst[e] = ds[e / 16] * static_cast<float>((low | (high << 4)) - 32);
      }
    }
  }
}

}  // namespace strata::model::internal
