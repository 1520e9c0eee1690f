// kFp16ToFloat (matmul_internal.h), computed by the compiler: no start-up cost, no init order.
#include <bit>
#include <cstdint>

#include "matmul_internal.h"

namespace strata::backend::cpu::internal {
namespace {

// model::Fp16ToFloat step for step, as a constexpr function.
constexpr float Fp16ToFloatConstexpr(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {
    uint32_t biased = 127 - 15 + 1;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --biased;
    }
    bits = sign | (biased << 23) | ((mantissa & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

static_assert(Fp16ToFloatConstexpr(0x3c00) == 1.0f);
static_assert(Fp16ToFloatConstexpr(0xc000) == -2.0f);
static_assert(Fp16ToFloatConstexpr(0x7bff) == 65504.0f);
static_assert(Fp16ToFloatConstexpr(0x0001) == 0x1p-24f);    // smallest subnormal
static_assert(Fp16ToFloatConstexpr(0x03ff) == 0x3ffp-24f);  // largest subnormal
static_assert(Fp16ToFloatConstexpr(0x0400) == 0x1p-14f);    // smallest normal

constexpr Fp16ToFloatTable MakeTable() {
  Fp16ToFloatTable table{};
  for (uint32_t h = 0; h < 65536; ++h) table.values[h] = Fp16ToFloatConstexpr(h);
  return table;
}

}  // namespace

alignas(64) constinit const Fp16ToFloatTable kFp16ToFloat = MakeTable();

}  // namespace strata::backend::cpu::internal
