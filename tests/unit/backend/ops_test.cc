#include "strata/backend/cpu/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace strata::backend::cpu {
namespace {

constexpr double kU = 0x1p-24;  // unit roundoff of fp32 (half an ulp at 1)
constexpr double kPi = 3.14159265358979323846;

// Tracks the element furthest outside its tolerance (ratio = |got - want| / tol), so a failure
// names the worst element rather than the first.
struct Worst {
  double ratio = 0;
  int64_t index = -1;
  double got = 0, want = 0, tol = 0;

  void Track(int64_t i, double got_value, double want_value, double tolerance) {
    const double err = std::fabs(got_value - want_value);
    const double r = std::isfinite(got_value)
                         ? (tolerance > 0 ? err / tolerance : (err == 0 ? 0 : INFINITY))
                         : INFINITY;
    if (!(r <= ratio)) {
      ratio = r;
      index = i;
      got = got_value;
      want = want_value;
      tol = tolerance;
    }
  }
  std::string Describe() const {
    std::ostringstream os;
    os.precision(9);
    os << "worst element " << index << ": got " << got << ", want " << want << " (error "
       << std::fabs(got - want) << ", tolerance " << tol << ")";
    return os.str();
  }
};

std::vector<float> Normal(int64_t n, std::mt19937& rng, float stddev = 1.0f) {
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// Odd sizes: one element, less than a SIMD register, just over a few registers, a model-like
// width plus three, and one that is not a multiple of anything.
const std::vector<int64_t> kSizes = {1, 7, 33, 640 + 3, 4099};

class OpsSizeTest : public testing::TestWithParam<int64_t> {};

INSTANTIATE_TEST_SUITE_P(OddSizes, OpsSizeTest, testing::ValuesIn(kSizes),
                         [](const testing::TestParamInfo<int64_t>& info) {
                           return std::to_string(info.param) + "Elements";
                         });

// ---- RmsNorm --------------------------------------------------------------------------------

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i], all in double.
std::vector<double> RmsNormRef(const std::vector<float>& x, const std::vector<float>& w,
                               float eps) {
  double ss = 0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] * scale * w[i];
  return out;
}

// A handful of fp32 roundings (mean, +eps, sqrt, divide, two products): 8u relative.
constexpr double kRmsNormRtol = 8 * kU;

TEST_P(OpsSizeTest, RmsNormMatchesFloat64Reference) {
  const int64_t n = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(n) * 31 + 1);
  for (float eps : {1e-6f, 1e-5f}) {
    for (float amplitude : {1.0f, 1e-3f, 50.0f}) {
      const std::vector<float> x = Normal(n, rng, amplitude);
      const std::vector<float> w = Normal(n, rng, 1.0f);
      std::vector<float> out(n, std::nanf(""));
      RmsNorm(x.data(), w.data(), n, eps, out.data());
      const std::vector<double> ref = RmsNormRef(x, w, eps);
      Worst worst;
      for (int64_t i = 0; i < n; ++i) {
        worst.Track(i, out[i], ref[i], kRmsNormRtol * std::fabs(ref[i]) + 1e-30);
      }
      EXPECT_LE(worst.ratio, 1.0) << "n=" << n << " eps=" << eps << " amplitude=" << amplitude
                                  << ": " << worst.Describe();
    }
  }
}

TEST_P(OpsSizeTest, RmsNormMayWriteOverItsInput) {
  const int64_t n = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(n) + 5);
  std::vector<float> x = Normal(n, rng);
  const std::vector<float> w = Normal(n, rng);
  const std::vector<double> ref = RmsNormRef(x, w, 1e-6f);
  RmsNorm(x.data(), w.data(), n, 1e-6f, x.data());
  Worst worst;
  for (int64_t i = 0; i < n; ++i) worst.Track(i, x[i], ref[i], kRmsNormRtol * std::fabs(ref[i]));
  EXPECT_LE(worst.ratio, 1.0) << worst.Describe();
}

// The weight is applied as stored: Gemma's (1 + w) is folded into the GGUF weights by the
// converter, so RmsNorm must not add 1 itself (nor may a llama model's w be shifted).
TEST(RmsNorm, AppliesTheStoredWeightWithoutAnOffset) {
  const std::vector<float> x = {3.0f, -4.0f, 12.0f, 0.5f, -7.0f};
  const int64_t n = static_cast<int64_t>(x.size());
  const std::vector<float> zeros(n, 0.0f);
  std::vector<float> out(n, 1.0f);
  RmsNorm(x.data(), zeros.data(), n, 1e-6f, out.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(out[i], 0.0f) << i;

  // Unit weights: the output has unit root mean square (up to eps).
  const std::vector<float> ones(n, 1.0f);
  RmsNorm(x.data(), ones.data(), n, 1e-6f, out.data());
  double ss = 0;
  for (float v : out) ss += static_cast<double>(v) * v;
  EXPECT_NEAR(std::sqrt(ss / n), 1.0, 1e-6);

  // Weight 2 doubles every element of the unit-weight result.
  const std::vector<float> twos(n, 2.0f);
  std::vector<float> doubled(n);
  RmsNorm(x.data(), twos.data(), n, 1e-6f, doubled.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(doubled[i], 2.0f * out[i]) << i;
}

TEST(RmsNorm, EpsilonKeepsAZeroVectorFinite) {
  const std::vector<float> x(9, 0.0f);
  const std::vector<float> w(9, 1.0f);
  std::vector<float> out(9, std::nanf(""));
  RmsNorm(x.data(), w.data(), 9, 1e-6f, out.data());
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

TEST(RmsNorm, EpsilonIsAddedToTheMeanSquareNotTheRoot) {
  // mean(x^2) = 1e-4 and eps = 1e-4: the scale is 1 / sqrt(2e-4), not 1 / (1e-2 + 1e-4).
  const std::vector<float> x = {1e-2f, -1e-2f};
  const std::vector<float> w = {1.0f, 1.0f};
  std::vector<float> out(2);
  RmsNorm(x.data(), w.data(), 2, 1e-4f, out.data());
  EXPECT_NEAR(out[0], 1e-2 / std::sqrt(2e-4), 1e-6);
  EXPECT_NEAR(out[1], -1e-2 / std::sqrt(2e-4), 1e-6);
}

// ---- RoPE table -----------------------------------------------------------------------------

struct RopeCase {
  int64_t rope_dim;
  float base;
  float freq_scale;
  bool freq_factors;  // llama3-style per-frequency divisors (rope_freqs.weight)
};

std::string RopeCaseName(const testing::TestParamInfo<RopeCase>& info) {
  const RopeCase& c = info.param;
  return "Dim" + std::to_string(c.rope_dim) + "_Base" + std::to_string(static_cast<int>(c.base)) +
         "_ScaleInv" + std::to_string(static_cast<int>(1.0f / c.freq_scale)) +
         (c.freq_factors ? "_Factors" : "");
}

class RopeTableTest : public testing::TestWithParam<RopeCase> {};

// theta_i = pos * freq_scale * base^(-2i/dim) / ff_i in double. The implementation builds
// base^(-2i/dim) by i repeated fp32 multiplications (as llama.cpp does), so its angle carries a
// relative error of up to about (i + 4) roundings; cos/sin then add their own few ulps.
TEST_P(RopeTableTest, MatchesFloat64AnglesWithinTheRecurrenceError) {
  const RopeCase& c = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(c.rope_dim * 7 + (c.freq_factors ? 1 : 0)));
  std::vector<float> factors;
  if (c.freq_factors) {
    std::uniform_real_distribution<float> f(1.0f, 8.0f);
    for (int64_t i = 0; i < c.rope_dim / 2; ++i) factors.push_back(f(rng));
  }
  for (int64_t pos : {0, 1, 2, 7, 33, 1000, 8191}) {
    std::vector<float> table(c.rope_dim, std::nanf(""));
    RopeTable(pos, c.rope_dim, c.base, c.freq_scale, c.freq_factors ? factors.data() : nullptr,
              table.data());
    Worst worst;
    for (int64_t i = 0; i < c.rope_dim / 2; ++i) {
      const double ff = c.freq_factors ? factors[i] : 1.0;
      const double angle = static_cast<double>(pos) * c.freq_scale *
                           std::pow(static_cast<double>(c.base), -2.0 * i / c.rope_dim) / ff;
      const double tol = std::fabs(angle) * (i + 4) * 2 * kU + 4 * kU;
      worst.Track(2 * i, table[2 * i], std::cos(angle), tol);
      worst.Track(2 * i + 1, table[2 * i + 1], std::sin(angle), tol);
    }
    EXPECT_LE(worst.ratio, 1.0) << "pos=" << pos << ": " << worst.Describe();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Bases, RopeTableTest,
    testing::Values(RopeCase{2, 10000.0f, 1.0f, false},        // one pair
                    RopeCase{64, 10000.0f, 1.0f, false},       // llama 2, gemma3 local layers
                    RopeCase{128, 500000.0f, 1.0f, true},      // llama 3.1 (frequency factors)
                    RopeCase{256, 1000000.0f, 1.0f, false},    // gemma3 global layers
                    RopeCase{128, 1000000.0f, 0.125f, false},  // linear scaling 8
                    RopeCase{96, 10000.0f, 0.25f, true}),
    RopeCaseName);

TEST(RopeTable, PositionZeroIsTheIdentity) {
  std::vector<float> table(64);
  RopeTable(0, 64, 10000.0f, 1.0f, nullptr, table.data());
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(table[2 * i], 1.0f) << i;
    EXPECT_EQ(table[2 * i + 1], 0.0f) << i;
  }
}

TEST(RopeTable, BaseAndFactorsChangeOnlyTheFrequenciesTheyShould) {
  // Pair 0 always turns by pos * freq_scale / ff_0, whatever the base.
  std::vector<float> a(16), b(16);
  RopeTable(5, 16, 10000.0f, 1.0f, nullptr, a.data());
  RopeTable(5, 16, 1000000.0f, 1.0f, nullptr, b.data());
  EXPECT_EQ(a[0], b[0]);
  EXPECT_EQ(a[1], b[1]);
  EXPECT_NEAR(a[0], std::cos(5.0), 1e-6);
  // A larger base turns the later pairs more slowly.
  EXPECT_GT(std::fabs(a[2 * 7 + 1]), std::fabs(b[2 * 7 + 1]));

  // A factor of 2 on pair 3 halves its angle and leaves the others alone.
  std::vector<float> ones(8, 1.0f);
  std::vector<float> factors = ones;
  factors[3] = 2.0f;
  std::vector<float> plain(16), scaled(16);
  RopeTable(9, 16, 10000.0f, 1.0f, ones.data(), plain.data());
  RopeTable(9, 16, 10000.0f, 1.0f, factors.data(), scaled.data());
  for (int i = 0; i < 8; ++i) {
    if (i == 3) continue;
    EXPECT_EQ(plain[2 * i], scaled[2 * i]) << i;
    EXPECT_EQ(plain[2 * i + 1], scaled[2 * i + 1]) << i;
  }
  const double angle3 = 9.0 * std::pow(10000.0, -6.0 / 16) / 2.0;
  EXPECT_NEAR(scaled[6], std::cos(angle3), 1e-6);
  EXPECT_NEAR(scaled[7], std::sin(angle3), 1e-6);
}

// ---- RoPE rotations -------------------------------------------------------------------------

enum class Pairing { kNeox, kNorm };

struct RotateCase {
  Pairing pairing;
  int64_t n_heads;
  int64_t head_dim;
  int64_t rope_dim;  // < head_dim: partial rotary, the rest passes through
};

std::string RotateCaseName(const testing::TestParamInfo<RotateCase>& info) {
  const RotateCase& c = info.param;
  return std::string(c.pairing == Pairing::kNeox ? "Neox" : "Norm") + "_Heads" +
         std::to_string(c.n_heads) + "_HeadDim" + std::to_string(c.head_dim) + "_RopeDim" +
         std::to_string(c.rope_dim);
}

void Rotate(Pairing pairing, float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dim,
            const float* table) {
  if (pairing == Pairing::kNeox) {
    RopeNeox(x, n_heads, head_dim, rope_dim, table);
  } else {
    RopeNorm(x, n_heads, head_dim, rope_dim, table);
  }
}

// A table of random angles, each cos/sin pair rounded to fp32.
std::vector<float> RandomTable(int64_t rope_dim, std::mt19937& rng) {
  std::uniform_real_distribution<double> angle(-kPi, kPi);
  std::vector<float> table(rope_dim);
  for (int64_t i = 0; i < rope_dim / 2; ++i) {
    const double a = angle(rng);
    table[2 * i] = static_cast<float>(std::cos(a));
    table[2 * i + 1] = static_cast<float>(std::sin(a));
  }
  return table;
}

class RopeRotateTest : public testing::TestWithParam<RotateCase> {};

TEST_P(RopeRotateTest, MatchesFloat64Rotation) {
  const RotateCase& c = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(c.n_heads * 1000 + c.head_dim * 10 + c.rope_dim));
  const std::vector<float> table = RandomTable(c.rope_dim, rng);
  const std::vector<float> x0 = Normal(c.n_heads * c.head_dim, rng);
  std::vector<float> x = x0;
  Rotate(c.pairing, x.data(), c.n_heads, c.head_dim, c.rope_dim, table.data());

  Worst worst;
  const int64_t half = c.rope_dim / 2;
  for (int64_t h = 0; h < c.n_heads; ++h) {
    const int64_t base = h * c.head_dim;
    for (int64_t i = 0; i < half; ++i) {
      // Pair i: (i, i + half) for neox, (2i, 2i + 1) for norm; both rotate by table pair i.
      const int64_t a = base + (c.pairing == Pairing::kNeox ? i : 2 * i);
      const int64_t b = base + (c.pairing == Pairing::kNeox ? i + half : 2 * i + 1);
      const double cs = table[2 * i];
      const double sn = table[2 * i + 1];
      const double xa = x0[a];
      const double xb = x0[b];
      // Two rounded products and a rounded sum: within 2u of the sum of |products|.
      const double tol_a = 3 * kU * (std::fabs(xa * cs) + std::fabs(xb * sn)) + 1e-30;
      const double tol_b = 3 * kU * (std::fabs(xa * sn) + std::fabs(xb * cs)) + 1e-30;
      worst.Track(a, x[a], xa * cs - xb * sn, tol_a);
      worst.Track(b, x[b], xa * sn + xb * cs, tol_b);
    }
    // Dimensions past rope_dim are not touched.
    for (int64_t d = c.rope_dim; d < c.head_dim; ++d) {
      worst.Track(base + d, x[base + d], x0[base + d], 0);
    }
  }
  EXPECT_LE(worst.ratio, 1.0) << worst.Describe();
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, RopeRotateTest,
    testing::Values(RotateCase{Pairing::kNeox, 1, 2, 2}, RotateCase{Pairing::kNorm, 1, 2, 2},
                    RotateCase{Pairing::kNeox, 3, 64, 64}, RotateCase{Pairing::kNorm, 3, 64, 64},
                    RotateCase{Pairing::kNeox, 7, 66, 66}, RotateCase{Pairing::kNorm, 7, 66, 66},
                    RotateCase{Pairing::kNeox, 5, 80, 32}, RotateCase{Pairing::kNorm, 5, 80, 32},
                    RotateCase{Pairing::kNeox, 2, 256, 256},
                    RotateCase{Pairing::kNorm, 2, 256, 256}),
    RotateCaseName);

// The property RoPE exists for (Su et al. 2021, eq. 16): after rotating q at position m and k
// at position n, q.k depends only on m - n. Checks the table and both pairings together.
TEST(Rope, DotProductDependsOnlyOnTheRelativePosition) {
  constexpr int64_t kDim = 64;
  std::mt19937 rng(99);
  const std::vector<float> q0 = Normal(kDim, rng);
  const std::vector<float> k0 = Normal(kDim, rng);
  for (Pairing pairing : {Pairing::kNeox, Pairing::kNorm}) {
    auto dot_at = [&](int64_t m, int64_t n) {
      std::vector<float> q = q0, k = k0, tq(kDim), tk(kDim);
      RopeTable(m, kDim, 10000.0f, 1.0f, nullptr, tq.data());
      RopeTable(n, kDim, 10000.0f, 1.0f, nullptr, tk.data());
      Rotate(pairing, q.data(), 1, kDim, kDim, tq.data());
      Rotate(pairing, k.data(), 1, kDim, kDim, tk.data());
      double dot = 0;
      for (int64_t d = 0; d < kDim; ++d) dot += static_cast<double>(q[d]) * k[d];
      return dot;
    };
    const double at_3_1 = dot_at(3, 1);
    EXPECT_NEAR(dot_at(12, 10), at_3_1, 1e-4);
    EXPECT_NEAR(dot_at(102, 100), at_3_1, 1e-4);
    // ... and does depend on it.
    EXPECT_GT(std::fabs(dot_at(5, 1) - at_3_1), 1e-2);
  }
}

TEST(Rope, NeoxAndNormPairDifferentDimensions) {
  // Rotating a vector with a single 1 by 90 degrees: neox moves it to i + half, norm to 2i + 1.
  constexpr int64_t kDim = 8;
  std::vector<float> table(kDim);
  for (int i = 0; i < kDim / 2; ++i) {
    table[2 * i] = 0.0f;  // cos 90
    table[2 * i + 1] = 1.0f;
  }
  std::vector<float> neox(kDim, 0.0f), norm(kDim, 0.0f);
  neox[1] = 1.0f;
  norm[2] = 1.0f;
  RopeNeox(neox.data(), 1, kDim, kDim, table.data());
  RopeNorm(norm.data(), 1, kDim, kDim, table.data());
  EXPECT_EQ(neox, (std::vector<float>{0, 0, 0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(norm, (std::vector<float>{0, 0, 0, 1, 0, 0, 0, 0}));
}

// ---- GeGLU / SwiGLU -------------------------------------------------------------------------

double GeluTanhRef(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / kPi) * (x + 0.044715 * x * x * x)));
}

double SiluRef(double x) { return x / (1.0 + std::exp(-x)); }

// Gates from a wide distribution plus the tails and zero, where the formulas lose precision or
// overflow if written carelessly.
std::vector<float> Gates(int64_t n, std::mt19937& rng) {
  std::vector<float> g = Normal(n, rng, 3.0f);
  const float specials[] = {0.0f,   -0.0f, 1.0f,   -1.0f,  10.0f,
                            -10.0f, 30.0f, -30.0f, 100.0f, -100.0f};
  for (int64_t i = 0; i < n && i < 10; ++i) g[(i * 7919) % n] = specials[i];
  return g;
}

TEST_P(OpsSizeTest, GeluTanhMulMatchesFloat64Reference) {
  // The vector path (where the CPU has AVX2+FMA) and the portable libm one.
  for (const bool scalar : {false, true}) {
    SetOpsForceScalar(scalar);
    SCOPED_TRACE(scalar ? "scalar" : "best");
    const int64_t n = GetParam();
    std::mt19937 rng(static_cast<uint32_t>(n) * 13 + 2);
    const std::vector<float> gate = Gates(n, rng);
    const std::vector<float> up = Normal(n, rng);
    std::vector<float> out(n, std::nanf(""));
    GeluTanhMul(gate.data(), up.data(), n, out.data());
    Worst worst;
    for (int64_t i = 0; i < n; ++i) {
      const double g = gate[i];
      const double want = GeluTanhRef(g) * up[i];
      // 1 + tanh(..) cancels for negative gates: its absolute error (a few u) scales with
      // 0.5 |g| |up|; elsewhere a few roundings relative.
      const double tol = 8 * kU * std::fabs(want) + 4 * kU * (std::fabs(g) + 1) * std::fabs(up[i]);
      worst.Track(i, out[i], want, tol);
    }
    EXPECT_LE(worst.ratio, 1.0) << worst.Describe();
  }
  SetOpsForceScalar(false);
}

// The tanh approximation, not the erf GELU: at x = 1 they differ by 1.5e-4.
TEST(GeluTanhMul, UsesTheTanhApproximation) {
  const float gate[] = {1.0f, -1.0f, 2.0f};
  const float up[] = {1.0f, 1.0f, 1.0f};
  float out[3];
  GeluTanhMul(gate, up, 3, out);
  for (int i = 0; i < 3; ++i) {
    const double x = gate[i];
    const double erf_gelu = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    EXPECT_NEAR(out[i], GeluTanhRef(x), 1e-6) << x;
    EXPECT_GT(std::fabs(out[i] - erf_gelu), 1e-5) << x;
  }
  EXPECT_NEAR(out[0], 0.8411920, 1e-6);
}

TEST_P(OpsSizeTest, SiluMulMatchesFloat64Reference) {
  // The vector path (where the CPU has AVX2+FMA) and the portable libm one.
  for (const bool scalar : {false, true}) {
    SetOpsForceScalar(scalar);
    SCOPED_TRACE(scalar ? "scalar" : "best");
    const int64_t n = GetParam();
    std::mt19937 rng(static_cast<uint32_t>(n) * 17 + 3);
    const std::vector<float> gate = Gates(n, rng);
    const std::vector<float> up = Normal(n, rng);
    std::vector<float> out(n, std::nanf(""));
    SiluMul(gate.data(), up.data(), n, out.data());
    Worst worst;
    for (int64_t i = 0; i < n; ++i) {
      const double want = SiluRef(gate[i]) * up[i];
      worst.Track(i, out[i], want, 16 * kU * std::fabs(want) + 1e-37);
    }
    EXPECT_LE(worst.ratio, 1.0) << worst.Describe();
  }
  SetOpsForceScalar(false);
}

// The CPU backend writes the activation over the gate buffer.
TEST_P(OpsSizeTest, GatedActivationsMayWriteOverTheGate) {
  // The vector path (where the CPU has AVX2+FMA) and the portable libm one.
  for (const bool scalar : {false, true}) {
    SetOpsForceScalar(scalar);
    SCOPED_TRACE(scalar ? "scalar" : "best");
    const int64_t n = GetParam();
    std::mt19937 rng(static_cast<uint32_t>(n) * 19 + 4);
    const std::vector<float> gate = Gates(n, rng);
    const std::vector<float> up = Normal(n, rng);
    std::vector<float> separate(n), in_place = gate;
    GeluTanhMul(gate.data(), up.data(), n, separate.data());
    GeluTanhMul(in_place.data(), up.data(), n, in_place.data());
    EXPECT_EQ(in_place, separate);
    in_place = gate;
    SiluMul(gate.data(), up.data(), n, separate.data());
    SiluMul(in_place.data(), up.data(), n, in_place.data());
    EXPECT_EQ(in_place, separate);
  }
  SetOpsForceScalar(false);
}

// ---- Element-wise ---------------------------------------------------------------------------

// One fp32 operation: correctly rounded, so within half an ulp of the exact value.
double OneRounding(double want) { return kU * std::fabs(want) * (1 + 1e-9) + 1e-45; }

TEST_P(OpsSizeTest, AddInPlaceMatchesFloat64Reference) {
  const int64_t n = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(n) * 23 + 5);
  const std::vector<float> x0 = Normal(n, rng, 10.0f);
  const std::vector<float> y = Normal(n, rng, 0.1f);
  std::vector<float> x = x0;
  AddInPlace(x.data(), y.data(), n);
  Worst worst;
  for (int64_t i = 0; i < n; ++i) {
    const double want = static_cast<double>(x0[i]) + y[i];
    worst.Track(i, x[i], want, OneRounding(want));
  }
  EXPECT_LE(worst.ratio, 1.0) << worst.Describe();
}

TEST_P(OpsSizeTest, ScaleInPlaceMatchesFloat64Reference) {
  const int64_t n = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(n) * 29 + 6);
  const std::vector<float> x0 = Normal(n, rng, 3.0f);
  for (float s : {25.29822f /* sqrt(640), gemma's embedding scale */, -0.125f, 0.0f}) {
    std::vector<float> x = x0;
    ScaleInPlace(x.data(), s, n);
    Worst worst;
    for (int64_t i = 0; i < n; ++i) {
      const double want = static_cast<double>(x0[i]) * s;
      worst.Track(i, x[i], want, OneRounding(want));
    }
    EXPECT_LE(worst.ratio, 1.0) << "s=" << s << ": " << worst.Describe();
  }
}

TEST_P(OpsSizeTest, SoftCapInPlaceMatchesFloat64Reference) {
  const int64_t n = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(n) * 37 + 7);
  for (float cap : {30.0f, 50.0f, 1.5f}) {
    const std::vector<float> x0 = Normal(n, rng, 2 * cap);
    std::vector<float> x = x0;
    SoftCapInPlace(x.data(), cap, n);
    Worst worst;
    for (int64_t i = 0; i < n; ++i) {
      const double want = cap * std::tanh(static_cast<double>(x0[i]) / cap);
      worst.Track(i, x[i], want, 16 * kU * std::fabs(want) + 1e-37);
      // Never beyond the cap, and the sign is kept.
      EXPECT_LE(std::fabs(x[i]), cap) << i;
      if (x0[i] != 0) {
        EXPECT_EQ(std::signbit(x[i]), std::signbit(x0[i])) << i;
      }
    }
    EXPECT_LE(worst.ratio, 1.0) << "cap=" << cap << ": " << worst.Describe();
  }
}

TEST(ElementWise, ZeroLengthTouchesNothing) {
  float x = 3.0f;
  const float y = 4.0f;
  AddInPlace(&x, &y, 0);
  ScaleInPlace(&x, 2.0f, 0);
  SoftCapInPlace(&x, 1.0f, 0);
  float out = 7.0f;
  GeluTanhMul(&x, &y, 0, &out);
  SiluMul(&x, &y, 0, &out);
  EXPECT_EQ(x, 3.0f);
  EXPECT_EQ(out, 7.0f);
}

}  // namespace
}  // namespace strata::backend::cpu
