// MatMulPrecision::kInt8: the activation quantizer, the integer kernels against a float64
// reference on the same quantized activations, bit-identity of every token's row across batch
// sizes and thread counts, and the fp32 fallback.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "strata/backend/cpu/matmul.h"
#include "strata/model/dequantize.h"
#include "strata/model/fp16.h"
#include "unit/backend/random_weights.h"

namespace strata::backend::cpu {
namespace {

using model::GgmlType;

constexpr MatMulOptions kInt8{MatMulPrecision::kInt8};

// The quantizer's specification, written out independently of the library.
struct QuantizedRow {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> sums16;
};

QuantizedRow SpecQuantize(const float* x, int64_t cols) {
  QuantizedRow row{std::vector<int8_t>(cols), std::vector<float>(cols / 32),
                   std::vector<int32_t>(cols / 16)};
  for (int64_t b = 0; b < cols / 32; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * b + i]));
    const float d = amax / 127.0f;
    const float id = d == 0.0f ? 0.0f : 1.0f / d;
    row.d[b] = d;
    for (int i = 0; i < 32; ++i) {
      const float v = std::nearbyint(x[32 * b + i] * id);
      const int q = static_cast<int>(std::clamp(v, -127.0f, 127.0f));
      row.q[32 * b + i] = static_cast<int8_t>(q);
      row.sums16[(32 * b + i) / 16] += q;
    }
  }
  return row;
}

QuantizedRow LibraryQuantize(const float* x, int64_t cols) {
  QuantizedRow row{std::vector<int8_t>(cols), std::vector<float>(cols / 32),
                   std::vector<int32_t>(cols / 16)};
  QuantizeRowInt8(x, cols, row.q.data(), row.d.data(), row.sums16.data());
  return row;
}

TEST(QuantizeRowInt8, MatchesItsSpecificationBitForBit) {
  std::mt19937 rng(11);
  for (int64_t cols : {32, 64, 640, 2048 + 32}) {
    for (float spread : {1e-3f, 1.0f, 300.0f}) {
      std::normal_distribution<float> normal(0.0f, spread);
      std::vector<float> x(cols);
      for (float& v : x) v = normal(rng);
      const QuantizedRow want = SpecQuantize(x.data(), cols);
      const QuantizedRow got = LibraryQuantize(x.data(), cols);
      ASSERT_EQ(got.q, want.q) << cols << " cols, spread " << spread;
      ASSERT_EQ(0, std::memcmp(got.d.data(), want.d.data(), want.d.size() * sizeof(float)));
      ASSERT_EQ(got.sums16, want.sums16);
    }
  }
}

TEST(QuantizeRowInt8, RoundsHalfwayValuesToEvenAndKeepsTheLargestAt127) {
  // amax = 127 gives d = 1 exactly, so q = nearbyint(x).
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = 3.5f;
  x[3] = -2.5f;
  x[4] = -0.5f;
  x[5] = 0.49f;
  x[6] = -127.0f;
  x[20] = 1.5f;
  const QuantizedRow got = LibraryQuantize(x.data(), 32);
  EXPECT_EQ(got.d[0], 1.0f);
  EXPECT_EQ(got.q[0], 127);
  EXPECT_EQ(got.q[1], 2);
  EXPECT_EQ(got.q[2], 4);
  EXPECT_EQ(got.q[3], -2);
  EXPECT_EQ(got.q[4], 0);
  EXPECT_EQ(got.q[5], 0);
  EXPECT_EQ(got.q[6], -127);
  EXPECT_EQ(got.q[20], 2);
  EXPECT_EQ(got.sums16[0], 127 + 2 + 4 - 2 - 127);
  EXPECT_EQ(got.sums16[1], 2);
  // Any block: the element of largest magnitude maps to +-127.
  std::vector<float> y = {0.3f, -0.7f};
  y.resize(32, 0.1f);
  const QuantizedRow scaled = LibraryQuantize(y.data(), 32);
  EXPECT_EQ(scaled.q[1], -127);
  EXPECT_EQ(scaled.d[0], 0.7f / 127.0f);
}

TEST(QuantizeRowInt8, AllZeroBlockHasZeroScaleAndCodes) {
  std::vector<float> x(96, 0.0f);
  x[40] = -3.0f;  // only the middle block is non-zero
  const QuantizedRow got = LibraryQuantize(x.data(), 96);
  EXPECT_EQ(got.d[0], 0.0f);
  EXPECT_EQ(got.d[2], 0.0f);
  EXPECT_EQ(got.d[1], 3.0f / 127.0f);
  for (int i = 0; i < 96; ++i) {
    EXPECT_EQ(got.q[i], i == 40 ? -127 : 0) << i;
  }
  EXPECT_EQ(got.sums16, (std::vector<int32_t>{0, 0, -127, 0, 0, 0}));
}

// ---- Kernels against float64 ---------------------------------------------------------------

const std::vector<GgmlType> kInt8Types = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                                          GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ4_K,
                                          GgmlType::kQ5_K, GgmlType::kQ6_K};

bool HasMin(GgmlType type) {
  return type == GgmlType::kQ4_1 || type == GgmlType::kQ5_1 || type == GgmlType::kQ4_K ||
         type == GgmlType::kQ5_K;
}

// The weights split into their scaled-code part d * q and their min part m (zero for formats
// without one), both exact in fp32: Dequantize with the min scale zeroed gives d * q, with d
// zeroed gives m. Their float64 sum is the exact weight the kernels use; Dequantize itself rounds
// d * q + m once.
struct SplitWeights {
  std::vector<float> dq;
  std::vector<float> m;
};

SplitWeights Split(GgmlType type, const std::vector<uint8_t>& wq, int64_t n) {
  SplitWeights s{std::vector<float>(n), std::vector<float>(n, 0.0f)};
  if (!HasMin(type)) {
    EXPECT_TRUE(model::Dequantize(type, wq, n, s.dq.data()).ok());
    return s;
  }
  const model::GgmlTypeTraits traits = model::TraitsOf(type);
  std::vector<uint8_t> no_min = wq;
  std::vector<uint8_t> no_d = wq;
  for (size_t off = 0; off < wq.size(); off += traits.type_size) {
    std::memset(&no_min[off + 2], 0, 2);  // m (Q4_1, Q5_1) or dmin (K-quants)
    std::memset(&no_d[off], 0, 2);        // d
  }
  EXPECT_TRUE(model::Dequantize(type, no_min, n, s.dq.data()).ok());
  EXPECT_TRUE(model::Dequantize(type, no_d, n, s.m.data()).ok());
  return s;
}

// y = W x_q in float64 with x_q the quantized activations d_x * q_x, and the scale of the
// kernels' rounding: sum |d q x_q| + |m x_q|.
void Reference(const SplitWeights& w, const std::vector<float>& x, int64_t rows, int64_t cols,
               int64_t tokens, std::vector<double>* y, std::vector<double>* scale) {
  y->assign(tokens * rows, 0.0);
  scale->assign(tokens * rows, 0.0);
  std::vector<double> xq(cols);
  for (int64_t t = 0; t < tokens; ++t) {
    const QuantizedRow row = SpecQuantize(x.data() + t * cols, cols);
    for (int64_t c = 0; c < cols; ++c) xq[c] = static_cast<double>(row.d[c / 32]) * row.q[c];
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      double mag = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double a = static_cast<double>(w.dq[r * cols + c]) * xq[c];
        const double b = static_cast<double>(w.m[r * cols + c]) * xq[c];
        sum += a + b;
        mag += std::fabs(a) + std::fabs(b);
      }
      (*y)[t * rows + r] = sum;
      (*scale)[t * rows + r] = mag;
    }
  }
}

// Per element the kernels round d_w * d_x, d_x * sum(q_x) and one fma per block (two with a
// min; per 16 columns for Q6_K): at most cols / 8 + 8 roundings of terms bounded by the scale.
double Int8Tolerance(int64_t cols) { return (static_cast<double>(cols) / 8 + 8) * 0x1p-24; }

std::vector<int64_t> Int8ColsFor(GgmlType type) {
  if (model::TraitsOf(type).block_size == 32) return {32, 96, 640, 2048};
  return {256, 768, 2048};
}

class MatMulInt8Test : public testing::TestWithParam<GgmlType> {
 protected:
  void SetUp() override {
    if (!MatMulInt8Supports(GetParam())) {
      GTEST_SKIP() << "no int8 kernel for " << model::GgmlTypeName(GetParam()) << " on this CPU";
    }
  }
};

void CheckInt8(GgmlType type, ThreadPool* pool, const std::vector<int64_t>& cols_list,
               const std::vector<int64_t>& row_counts, const std::vector<int64_t>& token_counts,
               uint32_t seed) {
  std::mt19937 rng(seed);
  for (int64_t cols : cols_list) {
    for (int64_t rows : row_counts) {
      const std::vector<uint8_t> wq = RandomWeights(type, rows, cols, rng);
      const SplitWeights split = Split(type, wq, rows * cols);
      const WeightMatrix w{type, wq.data(), rows, cols};
      for (int64_t tokens : token_counts) {
        const std::vector<float> x = RandomActivations(tokens * cols, rng);
        std::vector<float> y(tokens * rows, std::nanf(""));
        MatMul(w, x.data(), tokens, y.data(), pool, kInt8);
        std::vector<double> ref;
        std::vector<double> scale;
        Reference(split, x, rows, cols, tokens, &ref, &scale);
        double worst = 0;
        int64_t worst_i = 0;
        for (int64_t i = 0; i < tokens * rows; ++i) {
          const double ratio =
              std::isfinite(y[i]) ? std::fabs(y[i] - ref[i]) / std::max(scale[i], 1e-30) : 1e30;
          if (!(ratio <= worst)) {
            worst = ratio;
            worst_i = i;
          }
        }
        ASSERT_LE(worst, Int8Tolerance(cols))
            << model::GgmlTypeName(type) << " [" << rows << " x " << cols << "] x " << tokens
            << " tokens: worst y[t=" << worst_i / rows << ", r=" << worst_i % rows
            << "] = " << y[worst_i] << ", want " << ref[worst_i] << " (error " << worst
            << " of scale " << scale[worst_i] << ")";
      }
    }
  }
}

// Every token count from 1 to 70: one, two, three, four and a half groups of 16, with the
// 2-group register block and its 1-group remainder.
TEST_P(MatMulInt8Test, MatchesFloat64OnQuantizedActivationsForEveryTokenCount) {
  ThreadPool pool(3);
  std::vector<int64_t> tokens(70);
  for (int64_t i = 0; i < 70; ++i) tokens[i] = i + 1;
  const int64_t cols = model::TraitsOf(GetParam()).block_size == 32 ? 96 : 256;
  CheckInt8(GetParam(), &pool, {cols}, {13}, tokens, 101);
}

// Rows on both sides of the register blocks (4, 8), the units (32 with one token group, 64
// with more) and the 64-row tile.
TEST_P(MatMulInt8Test, MatchesFloat64OnOddAndLargeShapes) {
  ThreadPool pool(3);
  CheckInt8(GetParam(), &pool, Int8ColsFor(GetParam()), {1, 7, 9, 33, 65, 130},
            {1, 5, 16, 17, 33, 50}, 202);
}

TEST_P(MatMulInt8Test, MatchesFloat64WithoutAPool) {
  CheckInt8(GetParam(), nullptr, {Int8ColsFor(GetParam())[1]}, {3, 66}, {1, 16, 35}, 303);
}

// Each token's output row is the same bits whether it runs alone, in a batch of any size at any
// position, and on any number of threads.
TEST_P(MatMulInt8Test, EveryTokenRowIsBitIdenticalAcrossBatchesAndThreads) {
  const GgmlType type = GetParam();
  std::mt19937 rng(404);
  const int64_t rows = 97;
  const int64_t cols = model::TraitsOf(type).block_size == 32 ? 640 : 512;
  const std::vector<uint8_t> wq = RandomWeights(type, rows, cols, rng);
  const WeightMatrix w{type, wq.data(), rows, cols};
  const int64_t total = 70;
  const std::vector<float> x = RandomActivations(total * cols, rng);
  std::vector<float> alone(total * rows);
  for (int64_t t = 0; t < total; ++t) {
    MatMul(w, x.data() + t * cols, 1, alone.data() + t * rows, nullptr, kInt8);
  }
  ThreadPool pool2(2);
  ThreadPool pool3(3);
  ThreadPool pool5(5);
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3, &pool5}) {
    for (int64_t begin : {0, 3, 17}) {
      for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 49, 53}) {
        if (begin + n > total) continue;
        std::vector<float> y(n * rows);
        MatMul(w, x.data() + begin * cols, n, y.data(), pool, kInt8);
        for (int64_t t = 0; t < n; ++t) {
          ASSERT_EQ(0, std::memcmp(y.data() + t * rows, alone.data() + (begin + t) * rows,
                                   rows * sizeof(float)))
              << model::GgmlTypeName(type) << ": token " << begin + t << " in a batch of " << n
              << " from " << begin << " on " << (pool != nullptr ? pool->num_threads() : 1)
              << " threads differs from its solo row";
        }
      }
    }
  }
}

// The kernels run the tokens in passes of up to 16 over each group of 16 decoded weight rows
// (the first pass decodes them), and split the tokens into chunks when the rows are too few
// for the pool. Each token's row must be the same bits whatever pass, chunk or row group
// computes it: every n from 1 to 70 against each token alone, over row counts below, at and
// above the 16-row groups, with and without a pool, and with a pool wider than the row groups.
TEST_P(MatMulInt8Test, PassesAndChunksGiveEachTokenItsSoloRowBitForBit) {
  const GgmlType type = GetParam();
  std::mt19937 rng(707);
  ThreadPool pool3(3);
  ThreadPool pool8(8);
  const int64_t total = 70;
  for (int64_t cols : Int8ColsFor(type)) {
    if (cols > 768) continue;
    for (int64_t rows : {1, 7, 15, 16, 17, 97}) {
      const std::vector<uint8_t> wq = RandomWeights(type, rows, cols, rng);
      const WeightMatrix w{type, wq.data(), rows, cols};
      const std::vector<float> x = RandomActivations(total * cols, rng);
      std::vector<float> alone(total * rows);
      for (int64_t t = 0; t < total; ++t) {
        MatMul(w, x.data() + t * cols, 1, alone.data() + t * rows, nullptr, kInt8);
      }
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool3, &pool8}) {
        for (int64_t n = 2; n <= total; ++n) {
          const int64_t begin = total - n;
          std::vector<float> y(n * rows, std::nanf(""));
          MatMul(w, x.data() + begin * cols, n, y.data(), p, kInt8);
          for (int64_t t = 0; t < n; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              const float want = alone[(begin + t) * rows + r];
              const float got = y[t * rows + r];
              ASSERT_EQ(0, std::memcmp(&got, &want, sizeof(float)))
                  << model::GgmlTypeName(type) << " [" << rows << " x " << cols << "]: token "
                  << begin + t << " of a batch of " << n << " on "
                  << (p != nullptr ? p->num_threads() : 1) << " threads, row " << r << " = " << got
                  << ", alone it is " << want;
            }
          }
        }
      }
    }
  }
}

// The integer path really runs: its result is not the fp32 path's.
TEST_P(MatMulInt8Test, DiffersFromFp32) {
  const GgmlType type = GetParam();
  std::mt19937 rng(505);
  const int64_t rows = 16;
  const int64_t cols = 256;
  const std::vector<uint8_t> wq = RandomWeights(type, rows, cols, rng);
  const WeightMatrix w{type, wq.data(), rows, cols};
  const std::vector<float> x = RandomActivations(3 * cols, rng);
  std::vector<float> y8(3 * rows);
  std::vector<float> y32(3 * rows);
  MatMul(w, x.data(), 3, y8.data(), nullptr, kInt8);
  MatMul(w, x.data(), 3, y32.data(), nullptr);
  EXPECT_NE(0, std::memcmp(y8.data(), y32.data(), y8.size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(Int8Types, MatMulInt8Test, testing::ValuesIn(kInt8Types),
                         [](const testing::TestParamInfo<GgmlType>& info) {
                           return std::string(model::GgmlTypeName(info.param));
                         });

// ---- Several matrices over one input ---------------------------------------------------------

// MatMulSameInput gives each target MatMul's bits: int8 targets (one shared quantization and
// region, rows and tokens split across all of them), fp32 targets, and types without an int8
// kernel, mixed; row counts from under one 16-row group (token chunks) to many groups.
TEST(MatMulSameInput, EachTargetGetsItsOwnMatMulBitForBit) {
  std::mt19937 rng(909);
  ThreadPool pool(2);
  const int64_t cols = 512;
  struct Spec {
    GgmlType type;
    int64_t rows;
    MatMulPrecision precision;
  };
  const std::vector<std::vector<Spec>> groups = {
      {{GgmlType::kQ4_K, 96, MatMulPrecision::kInt8},
       {GgmlType::kQ4_K, 16, MatMulPrecision::kInt8},
       {GgmlType::kQ6_K, 16, MatMulPrecision::kInt8}},
      {{GgmlType::kQ5_0, 200, MatMulPrecision::kInt8},
       {GgmlType::kQ8_0, 7, MatMulPrecision::kInt8}},
      {{GgmlType::kQ8_0, 40, MatMulPrecision::kFp32},
       {GgmlType::kQ4_0, 33, MatMulPrecision::kInt8},
       {GgmlType::kF16, 20, MatMulPrecision::kInt8},
       {GgmlType::kQ5_1, 64, MatMulPrecision::kInt8}},
      {{GgmlType::kQ4_1, 1, MatMulPrecision::kInt8}},
  };
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<std::vector<uint8_t>> data;
    for (const Spec& spec : groups[g])
      data.push_back(RandomWeights(spec.type, spec.rows, cols, rng));
    for (int64_t tokens : {1, 5, 16, 17, 40}) {
      const std::vector<float> x = RandomActivations(tokens * cols, rng);
      for (ThreadPool* p : {&pool, static_cast<ThreadPool*>(nullptr)}) {
        std::vector<std::vector<float>> together;
        std::vector<MatMulTarget> targets;
        for (size_t i = 0; i < groups[g].size(); ++i) {
          const Spec& spec = groups[g][i];
          together.emplace_back(tokens * spec.rows, -1.0f);
        }
        for (size_t i = 0; i < groups[g].size(); ++i) {
          const Spec& spec = groups[g][i];
          targets.push_back({WeightMatrix{spec.type, data[i].data(), spec.rows, cols},
                             together[i].data(), MatMulOptions{spec.precision}});
        }
        MatMulSameInput(targets, x.data(), tokens, p);
        for (size_t i = 0; i < targets.size(); ++i) {
          std::vector<float> alone(tokens * groups[g][i].rows);
          MatMul(targets[i].w, x.data(), tokens, alone.data(), p, targets[i].options);
          ASSERT_EQ(0, std::memcmp(alone.data(), together[i].data(), alone.size() * sizeof(float)))
              << "group " << g << ", target " << i << " (" << model::GgmlTypeName(groups[g][i].type)
              << "), " << tokens << " tokens, " << (p != nullptr ? "pool" : "no pool");
        }
      }
    }
  }
}

TEST(MatMulSameInput, NoTargetsOrNoTokensWriteNothing) {
  std::mt19937 rng(910);
  const std::vector<uint8_t> wq = RandomWeights(GgmlType::kQ8_0, 16, 64, rng);
  std::vector<float> y(16, 7.0f);
  const std::vector<float> x = RandomActivations(64, rng);
  MatMulSameInput({}, x.data(), 1, nullptr);
  const MatMulTarget target{WeightMatrix{GgmlType::kQ8_0, wq.data(), 16, 64}, y.data(), kInt8};
  MatMulSameInput({&target, 1}, x.data(), 0, nullptr);
  for (float v : y) EXPECT_EQ(v, 7.0f);
}

// ---- Under AddressSanitizer -----------------------------------------------------------------

// The int8 passes are not instrumented under AddressSanitizer (matmul_int8_avx512.cc says why):
// each kernel call checks the byte ranges they may touch instead. So a weight or output buffer
// one element short must still be reported, on the direct passes (1 and 16 tokens over full
// row groups) and the staged ones (40 tokens; a partial last group).
class MatMulInt8ShortBuffer : public testing::TestWithParam<GgmlType> {
 protected:
  void SetUp() override {
#if !defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "checked only in the AddressSanitizer build";
#endif
    if (!MatMulInt8Supports(GetParam())) GTEST_SKIP() << "no int8 kernels on this CPU";
  }
};

TEST_P(MatMulInt8ShortBuffer, AWeightBufferOneByteShortIsReported) {
  std::mt19937 rng(707);
  for (const auto& [rows, tokens] : {std::pair<int64_t, int64_t>{32, 1}, {32, 16}, {40, 40}}) {
    const int64_t cols = 512;
    const std::vector<uint8_t> wq = RandomWeights(GetParam(), rows, cols, rng);
    // Exactly one byte short: the allocation's end is the last row's last byte.
    std::unique_ptr<uint8_t[]> short_w(new uint8_t[wq.size() - 1]);
    std::memcpy(short_w.get(), wq.data(), wq.size() - 1);
    const WeightMatrix w{GetParam(), short_w.get(), rows, cols};
    const std::vector<float> x = RandomActivations(tokens * cols, rng);
    std::vector<float> y(tokens * rows);
    EXPECT_DEATH(MatMul(w, x.data(), tokens, y.data(), nullptr, kInt8), "AddressSanitizer")
        << rows << " rows x " << tokens << " tokens";
  }
}

TEST_P(MatMulInt8ShortBuffer, AnOutputBufferOneFloatShortIsReported) {
  std::mt19937 rng(708);
  for (const auto& [rows, tokens] : {std::pair<int64_t, int64_t>{32, 1}, {32, 16}, {40, 40}}) {
    const int64_t cols = 512;
    const std::vector<uint8_t> wq = RandomWeights(GetParam(), rows, cols, rng);
    const WeightMatrix w{GetParam(), wq.data(), rows, cols};
    const std::vector<float> x = RandomActivations(tokens * cols, rng);
    std::unique_ptr<float[]> short_y(new float[tokens * rows - 1]);
    EXPECT_DEATH(MatMul(w, x.data(), tokens, short_y.get(), nullptr, kInt8), "AddressSanitizer")
        << rows << " rows x " << tokens << " tokens";
  }
}

INSTANTIATE_TEST_SUITE_P(Int8Types, MatMulInt8ShortBuffer, testing::ValuesIn(kInt8Types),
                         [](const testing::TestParamInfo<GgmlType>& info) {
                           return std::string(model::GgmlTypeName(info.param));
                         });

// ---- Fallback ------------------------------------------------------------------------------

// Types without an int8 kernel run the fp32 path: the same bits as kFp32.
TEST(MatMulInt8Fallback, TypesWithoutAnInt8KernelGiveTheFp32Result) {
  std::mt19937 rng(606);
  ThreadPool pool(2);
  for (GgmlType type :
       {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ2_K, GgmlType::kQ3_K}) {
    EXPECT_FALSE(MatMulInt8Supports(type)) << model::GgmlTypeName(type);
    const int64_t rows = 37;
    const int64_t cols = 512;
    const std::vector<uint8_t> wq = RandomWeights(type, rows, cols, rng);
    const WeightMatrix w{type, wq.data(), rows, cols};
    for (int64_t tokens : {1, 3, 20}) {
      const std::vector<float> x = RandomActivations(tokens * cols, rng);
      std::vector<float> y8(tokens * rows);
      std::vector<float> y32(tokens * rows);
      MatMul(w, x.data(), tokens, y8.data(), &pool, kInt8);
      MatMul(w, x.data(), tokens, y32.data(), &pool);
      ASSERT_EQ(0, std::memcmp(y8.data(), y32.data(), y8.size() * sizeof(float)))
          << model::GgmlTypeName(type) << " x " << tokens << " tokens";
    }
  }
}

TEST(MatMulInt8Fallback, SupportIsExactlyTheIntegerFormatsOnVnniCpus) {
  const bool vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  for (GgmlType type : kInt8Types) {
    EXPECT_EQ(MatMulInt8Supports(type), vnni) << model::GgmlTypeName(type);
  }
}

TEST(MatMulPrecision, NamesRoundTrip) {
  MatMulPrecision p = MatMulPrecision::kFp32;
  ASSERT_TRUE(ParseMatMulPrecision("int8", &p));
  EXPECT_EQ(p, MatMulPrecision::kInt8);
  EXPECT_EQ(MatMulPrecisionName(p), "int8");
  ASSERT_TRUE(ParseMatMulPrecision("fp32", &p));
  EXPECT_EQ(p, MatMulPrecision::kFp32);
  EXPECT_EQ(MatMulPrecisionName(p), "fp32");
  EXPECT_FALSE(ParseMatMulPrecision("fp16", &p));
  EXPECT_EQ(p, MatMulPrecision::kFp32);
  EXPECT_EQ(MatMulOptions{}.precision, MatMulPrecision::kFp32);
}

}  // namespace
}  // namespace strata::backend::cpu
