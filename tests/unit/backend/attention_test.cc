#include "strata/backend/cpu/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "strata/backend/cpu/kv_storage.h"

namespace strata::backend::cpu {

// Readable parameters in gtest's messages.
inline void PrintTo(KvDtype dtype, std::ostream* os) { *os << KvDtypeName(dtype); }
inline void PrintTo(KvIsa isa, std::ostream* os) {
  *os << (isa == KvIsa::kAvx2 ? "avx2" : "scalar");
}
namespace {

// fp32 accumulation against a float64 reference over the same (storage-rounded) K/V: the
// errors come only from fp32 arithmetic, so fp16 and q8_0 storage keep the fp32 tolerance (q8_0
// is dequantized exactly; its own error is bounded separately below).
constexpr double kAtol = 2e-5;  // |V| <= 1, so outputs are O(1)
constexpr double kRtol = 1e-5;

struct Shape {
  KvDtype dtype = KvDtype::kF16;
  int32_t block_size = 16;
  int32_t num_kv_heads = 1;
  int32_t group = 4;  // query heads per KV head
  int32_t head_dim_k = 64;
  int32_t head_dim_v = 64;
};

std::string ShapeName(const Shape& s) {
  std::ostringstream name;
  name << (s.dtype == KvDtype::kF16 ? "F16" : (s.dtype == KvDtype::kF32 ? "F32" : "Q8")) << "_Bs"
       << s.block_size << "_Kv" << s.num_kv_heads << "_Group" << s.group << "_Dk" << s.head_dim_k
       << "_Dv" << s.head_dim_v;
  return name.str();
}

// One sequence of `len` tokens: random K/V in `kLayer` of a fresh cache, reached through shuffled
// non-contiguous block ids (the cache has twice the blocks the sequence needs), and random q.
class Sequence {
 public:
  static constexpr int32_t kLayer = 1;  // not 0, so the layer offset matters

  Sequence(const Shape& shape, int64_t len, uint32_t seed, float k_amplitude = 2.0f)
      : shape_(shape), len_(len), rng_(seed) {
    const int32_t needed = static_cast<int32_t>((len + shape.block_size - 1) / shape.block_size);
    KvCacheConfig config{2,
                         shape.num_kv_heads,
                         shape.head_dim_k,
                         shape.head_dim_v,
                         shape.block_size,
                         2 * needed + 1,
                         shape.dtype};
    auto created = KvStorage::Create(config);
    STRATA_CHECK(created.ok());
    storage_ = std::move(created).value();
    std::vector<kv::BlockId> all(static_cast<size_t>(config.num_blocks));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng_);
    block_ids_.assign(all.begin(), all.begin() + needed);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    std::vector<float> k(static_cast<size_t>(shape.num_kv_heads * shape.head_dim_k));
    std::vector<float> v(static_cast<size_t>(shape.num_kv_heads * shape.head_dim_v));
    for (int64_t pos = 0; pos < len; ++pos) {
      for (float& x : k) x = k_amplitude * unit(rng_);
      for (float& x : v) x = unit(rng_);
      Write(pos, k.data(), v.data());
    }
  }

  void Write(int64_t pos, const float* k, const float* v) {
    storage_->Write(kLayer, block_ids_, pos, k, v);
    const int64_t nk = int64_t{shape_.num_kv_heads} * shape_.head_dim_k;
    const int64_t nv = int64_t{shape_.num_kv_heads} * shape_.head_dim_v;
    written_k_.resize(static_cast<size_t>(len_ * nk));
    written_v_.resize(static_cast<size_t>(len_ * nv));
    std::copy(k, k + nk, written_k_.begin() + pos * nk);
    std::copy(v, v + nv, written_v_.begin() + pos * nv);
  }

  std::vector<float> RandomQ(int64_t n_q, float amplitude = 2.0f) {
    std::uniform_real_distribution<float> dist(-amplitude, amplitude);
    std::vector<float> q(static_cast<size_t>(n_q * n_heads() * shape_.head_dim_k));
    for (float& x : q) x = dist(rng_);
    return q;
  }

  PagedAttentionArgs Args(const std::vector<float>& q, const std::vector<int64_t>& q_pos,
                          int32_t window, std::vector<float>* out) const {
    out->assign(q_pos.size() * n_heads() * shape_.head_dim_v, std::nanf(""));
    PagedAttentionArgs args;
    args.kv = storage_.get();
    args.layer = kLayer;
    args.block_ids = block_ids_;
    args.q = q.data();
    args.q_pos = q_pos.data();
    args.n_q = static_cast<int64_t>(q_pos.size());
    args.n_heads = n_heads();
    args.scale = 1.0f / std::sqrt(static_cast<float>(shape_.head_dim_k));
    args.sliding_window = window;
    args.out = out->data();
    return args;
  }

  // softmax(scale q k^T) v in float64 over the K/V as stored, or (as_written) over the float
  // values given to Write, before the storage rounded them.
  std::vector<double> Reference(const PagedAttentionArgs& args, bool as_written = false) const {
    const int32_t dk = shape_.head_dim_k;
    const int32_t dv = shape_.head_dim_v;
    const int32_t kv_heads = shape_.num_kv_heads;
    std::vector<float> k_all(static_cast<size_t>(len_ * kv_heads * dk));
    std::vector<float> v_all(static_cast<size_t>(len_ * kv_heads * dv));
    if (as_written) {
      k_all = written_k_;
      v_all = written_v_;
    } else {
      for (int64_t p = 0; p < len_; ++p) {
        storage_->Read(kLayer, block_ids_, p, &k_all[p * kv_heads * dk], &v_all[p * kv_heads * dv]);
      }
    }
    std::vector<double> want(static_cast<size_t>(args.n_q * args.n_heads * dv));
    std::vector<double> scores;
    for (int64_t i = 0; i < args.n_q; ++i) {
      const int64_t hi = args.q_pos[i];
      const int64_t lo =
          args.sliding_window > 0 ? std::max<int64_t>(0, hi - args.sliding_window + 1) : 0;
      for (int32_t h = 0; h < args.n_heads; ++h) {
        const int32_t g = h / shape_.group;
        const float* q = args.q + (i * args.n_heads + h) * dk;
        scores.assign(static_cast<size_t>(hi - lo + 1), 0.0);
        double max_score = -INFINITY;
        for (int64_t p = lo; p <= hi; ++p) {
          const float* k = &k_all[(p * kv_heads + g) * dk];
          double dot = 0.0;
          for (int32_t d = 0; d < dk; ++d) dot += static_cast<double>(q[d]) * k[d];
          scores[p - lo] = dot * static_cast<double>(args.scale);
          max_score = std::max(max_score, scores[p - lo]);
        }
        double sum = 0.0;
        for (double& s : scores) sum += (s = std::exp(s - max_score));
        double* o = &want[(i * args.n_heads + h) * dv];
        for (int64_t p = lo; p <= hi; ++p) {
          const float* v = &v_all[(p * kv_heads + g) * dv];
          for (int32_t d = 0; d < dv; ++d) o[d] += scores[p - lo] / sum * v[d];
        }
      }
    }
    return want;
  }

  int32_t n_heads() const { return shape_.num_kv_heads * shape_.group; }
  const KvStorage& storage() const { return *storage_; }

 private:
  Shape shape_;
  int64_t len_;
  std::mt19937 rng_;
  std::unique_ptr<KvStorage> storage_;
  std::vector<kv::BlockId> block_ids_;
  std::vector<float> written_k_;  // [len, num_kv_heads, head_dim_k] as given to Write
  std::vector<float> written_v_;
};

// Runs all tasks, cut into random ranges as a thread pool would.
void RunSplit(const PagedAttentionArgs& args, KvIsa isa, std::mt19937* rng) {
  const int64_t tasks = PagedAttentionTasks(args);
  int64_t begin = 0;
  while (begin < tasks) {
    const int64_t end = std::min<int64_t>(tasks, begin + 1 + static_cast<int64_t>((*rng)() % 24));
    PagedAttention(args, begin, end, isa);
    begin = end;
  }
}

// Passes when every element is within kAtol + kRtol * |want|; otherwise names the worst one.
::testing::AssertionResult Near(const std::vector<float>& got, const std::vector<double>& want,
                                int32_t n_heads, int32_t dv) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size mismatch";
  size_t worst = 0;
  double worst_ratio = -1.0;
  for (size_t e = 0; e < got.size(); ++e) {
    const double err = std::fabs(static_cast<double>(got[e]) - want[e]);
    const double ratio = std::isnan(err) ? INFINITY : err / (kAtol + kRtol * std::fabs(want[e]));
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst = e;
    }
  }
  if (worst_ratio <= 1.0) return ::testing::AssertionSuccess();
  const size_t row = worst / static_cast<size_t>(dv);
  return ::testing::AssertionFailure()
         << "worst element: query " << row / static_cast<size_t>(n_heads) << " head "
         << row % static_cast<size_t>(n_heads) << " dim " << worst % static_cast<size_t>(dv)
         << ": got " << got[worst] << ", want " << want[worst] << ", error "
         << std::fabs(got[worst] - want[worst]) << " (" << worst_ratio << "x tolerance)";
}

std::vector<int64_t> Range(int64_t first, int64_t end) {
  std::vector<int64_t> positions(static_cast<size_t>(end - first));
  std::iota(positions.begin(), positions.end(), first);
  return positions;
}

// ---- The sweep: dtypes x block sizes x GQA ratios x head dims x code paths -----------------

using SweepParam = std::tuple<KvDtype, int32_t, int32_t, int32_t, KvIsa>;

class PagedAttentionSweep : public ::testing::TestWithParam<SweepParam> {
 protected:
  Shape GetShape() const {
    const auto [dtype, block_size, group, head_dim, isa] = GetParam();
    return Shape{dtype, block_size, 2, group, head_dim, head_dim};
  }
  KvIsa isa() const { return std::get<4>(GetParam()); }
};

TEST_P(PagedAttentionSweep, DecodeMatchesFloat64ReferenceAtOddLengths) {
  if (!KvIsaSupported(isa())) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C";
  const Shape shape = GetShape();
  Sequence seq(shape, 97, 11);
  std::mt19937 rng(3);
  const int32_t bs = shape.block_size;
  // Sequence lengths 1, 7, block_size-1, block_size, block_size+1, 97: the query is the last one.
  for (int64_t length : {int64_t{1}, int64_t{7}, int64_t{bs - 1}, int64_t{bs}, int64_t{bs + 1},
                         int64_t{2 * bs + 1}, int64_t{97}}) {
    if (length < 1) continue;
    for (int32_t window : {0, 7}) {
      const std::vector<float> q = seq.RandomQ(1);
      const std::vector<int64_t> q_pos = {length - 1};
      std::vector<float> out;
      const PagedAttentionArgs args = seq.Args(q, q_pos, window, &out);
      ASSERT_EQ(PagedAttentionTasks(args), shape.num_kv_heads);
      RunSplit(args, isa(), &rng);
      EXPECT_TRUE(Near(out, seq.Reference(args), seq.n_heads(), shape.head_dim_v))
          << "length " << length << " window " << window;
    }
  }
}

TEST_P(PagedAttentionSweep, PrefillChunksMatchFloat64Reference) {
  if (!KvIsaSupported(isa())) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C";
  const Shape shape = GetShape();
  Sequence seq(shape, 97, 12);
  std::mt19937 rng(4);
  // The whole prompt at once, then a chunk that starts mid-sequence (chunked prefill).
  for (auto [first, end] : {std::pair<int64_t, int64_t>{0, 97}, {40, 97}, {5, 6}}) {
    for (int32_t window : {0, 7}) {
      const std::vector<int64_t> q_pos = Range(first, end);
      const std::vector<float> q = seq.RandomQ(static_cast<int64_t>(q_pos.size()));
      std::vector<float> out;
      const PagedAttentionArgs args = seq.Args(q, q_pos, window, &out);
      ASSERT_EQ(PagedAttentionTasks(args), (end - first) * shape.num_kv_heads);
      RunSplit(args, isa(), &rng);
      EXPECT_TRUE(Near(out, seq.Reference(args), seq.n_heads(), shape.head_dim_v))
          << "positions [" << first << ", " << end << ") window " << window;
    }
  }
}

std::string SweepName(const ::testing::TestParamInfo<SweepParam>& info) {
  const auto [dtype, block_size, group, head_dim, isa] = info.param;
  return ShapeName(Shape{dtype, block_size, 2, group, head_dim, head_dim}) +
         (isa == KvIsa::kAvx2 ? "_Avx2" : "_Scalar");
}

INSTANTIATE_TEST_SUITE_P(Shapes, PagedAttentionSweep,
                         ::testing::Combine(::testing::Values(KvDtype::kF16, KvDtype::kF32,
                                                              KvDtype::kQ8_0),
                                            ::testing::Values(1, 16), ::testing::Values(1, 4, 8),
                                            ::testing::Values(64, 128, 256),
                                            ::testing::Values(KvIsa::kScalar, KvIsa::kAvx2)),
                         SweepName);

// ---- Shapes and situations outside the sweep -----------------------------------------------

class PagedAttentionPaths : public ::testing::TestWithParam<KvIsa> {
 protected:
  void SetUp() override {
    if (!KvIsaSupported(GetParam())) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C";
  }
  KvIsa isa() const { return GetParam(); }
  std::mt19937 rng_{21};
};

TEST_P(PagedAttentionPaths, SlidingWindowOf512Over600Positions) {
  const Shape gemma3{KvDtype::kF16, 16, 1, 4, 256, 256};  // Gemma 3's local layers
  const Shape llama{KvDtype::kF32, 1, 2, 4, 128, 128};
  for (const Shape& shape : {gemma3, llama}) {
    Sequence seq(shape, 600, 31);
    const std::vector<std::vector<int64_t>> cases = {{599}, {510},           {511},          {512},
                                                     {513}, Range(536, 600), Range(480, 530)};
    for (const std::vector<int64_t>& q_pos : cases) {
      const std::vector<float> q = seq.RandomQ(static_cast<int64_t>(q_pos.size()));
      std::vector<float> out;
      const PagedAttentionArgs args = seq.Args(q, q_pos, 512, &out);
      RunSplit(args, isa(), &rng_);
      EXPECT_TRUE(Near(out, seq.Reference(args), seq.n_heads(), shape.head_dim_v))
          << ShapeName(shape) << " first position " << q_pos[0] << " of " << q_pos.size();
    }
  }
}

TEST_P(PagedAttentionPaths, WindowOfOneSeesOnlyItsOwnPosition) {
  const Shape shape{KvDtype::kF32, 16, 2, 2, 64, 64};
  Sequence seq(shape, 40, 32);
  const std::vector<int64_t> q_pos = Range(0, 40);
  const std::vector<float> q = seq.RandomQ(40);
  std::vector<float> out;
  const PagedAttentionArgs args = seq.Args(q, q_pos, 1, &out);
  RunSplit(args, isa(), &rng_);
  EXPECT_TRUE(Near(out, seq.Reference(args), seq.n_heads(), 64));
}

TEST_P(PagedAttentionPaths, UnsortedRepeatedPositions) {
  const Shape shape{KvDtype::kF16, 16, 2, 4, 128, 128};
  Sequence seq(shape, 300, 33);
  std::vector<int64_t> q_pos;
  for (int i = 0; i < 60; ++i) q_pos.push_back(static_cast<int64_t>(rng_() % 300));
  q_pos.push_back(q_pos[3]);
  for (int32_t window : {0, 100}) {
    const std::vector<float> q = seq.RandomQ(static_cast<int64_t>(q_pos.size()));
    std::vector<float> out;
    const PagedAttentionArgs args = seq.Args(q, q_pos, window, &out);
    RunSplit(args, isa(), &rng_);
    EXPECT_TRUE(Near(out, seq.Reference(args), seq.n_heads(), 128)) << "window " << window;
  }
}

TEST_P(PagedAttentionPaths, UnusualHeadShapes) {
  const std::vector<Shape> shapes = {
      {KvDtype::kF16, 16, 1, 32, 64, 64},   // more query heads per KV head than a tile holds
      {KvDtype::kF16, 16, 1, 20, 64, 64},   // ... and not a multiple of it
      {KvDtype::kF32, 5, 2, 3, 128, 64},    // K and V head dims differ
      {KvDtype::kF16, 7, 3, 2, 40, 40},     // not a multiple of 8: the AVX2 path falls back
      {KvDtype::kF16, 16, 2, 1, 72, 72},    // a multiple of 8 but not of 32
      {KvDtype::kF32, 16, 1, 5, 256, 256},  // odd group size
      {KvDtype::kQ8_0, 7, 3, 2, 40, 40},    // q8_0 on the scalar fallback
      {KvDtype::kQ8_0, 16, 2, 1, 72, 72},   // q8_0 with a short last scale group
      {KvDtype::kQ8_0, 5, 2, 3, 128, 64},   // q8_0, K and V head dims differ
  };
  for (const Shape& shape : shapes) {
    Sequence seq(shape, 97, 34);
    for (const std::vector<int64_t>& q_pos : {std::vector<int64_t>{96}, Range(0, 97)}) {
      const std::vector<float> q = seq.RandomQ(static_cast<int64_t>(q_pos.size()));
      std::vector<float> out;
      const PagedAttentionArgs args = seq.Args(q, q_pos, 0, &out);
      RunSplit(args, isa(), &rng_);
      EXPECT_TRUE(Near(out, seq.Reference(args), seq.n_heads(), shape.head_dim_v))
          << ShapeName(shape) << " n_q " << q_pos.size();
    }
  }
}

TEST_P(PagedAttentionPaths, ScoresSpanningAWideRangeExerciseTheRescale) {
  // K rows are multiples of one direction u, q = u: scores run from -60 to +60, rising along
  // the sequence (every chunk raises the running max) or falling (the first key dominates and
  // later weights underflow).
  const Shape shape{KvDtype::kF32, 16, 1, 1, 64, 64};
  for (bool rising : {true, false}) {
    Sequence seq(shape, 200, 35);
    std::vector<float> u(64);
    for (int d = 0; d < 64; ++d) u[d] = (d % 2 == 0 ? 1.0f : -1.0f) / 8.0f;  // |u| = 1
    std::mt19937 rng(36);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    for (int64_t p = 0; p < 200; ++p) {
      const float t = (rising ? p : 199 - p) / 199.0f;
      std::vector<float> k(64), v(64);
      for (int d = 0; d < 64; ++d) k[d] = u[d] * (t * 120.0f - 60.0f) * 8.0f;  // scale = 1/8
      for (float& x : v) x = unit(rng);
      seq.Write(p, k.data(), v.data());
    }
    const std::vector<int64_t> q_pos = {199, 150, 100, 31, 32, 0};
    std::vector<float> q;
    for (size_t i = 0; i < q_pos.size(); ++i) q.insert(q.end(), u.begin(), u.end());
    std::vector<float> out;
    const PagedAttentionArgs args = seq.Args(q, q_pos, 0, &out);
    RunSplit(args, isa(), &rng_);
    EXPECT_TRUE(Near(out, seq.Reference(args), 1, 64)) << (rising ? "rising" : "falling");
  }
}

TEST_P(PagedAttentionPaths, ResultIsBitIdenticalHoweverTasksAreSplitOrBatched) {
  // Batch invariance: a row's result must not depend on which other rows share its tile, so
  // greedy decoding is the same alone, batched, or in chunked prefill. Groups of 3 and 4 put
  // different numbers of rows in a tile when alone and when batched.
  for (const auto& [dtype, group] :
       {std::pair{KvDtype::kF16, 3}, std::pair{KvDtype::kF16, 4}, std::pair{KvDtype::kQ8_0, 3}}) {
    const Shape shape{dtype, 16, 2, group, 128, 128};
    Sequence seq(shape, 150, 37);
    const std::vector<int64_t> q_pos = Range(3, 150);
    const std::vector<float> q = seq.RandomQ(static_cast<int64_t>(q_pos.size()));
    std::vector<float> whole;
    const PagedAttentionArgs args = seq.Args(q, q_pos, 50, &whole);
    PagedAttention(args, 0, PagedAttentionTasks(args), isa());
    std::vector<float> split;
    const PagedAttentionArgs split_args = seq.Args(q, q_pos, 50, &split);
    RunSplit(split_args, isa(), &rng_);
    EXPECT_EQ(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)), 0)
        << "group " << group;
    // Each query alone, as a decode step would run it.
    const size_t row = static_cast<size_t>(seq.n_heads() * 128);
    for (size_t i = 0; i < q_pos.size(); i += 13) {
      const std::vector<float> q_one(q.begin() + i * row, q.begin() + (i + 1) * row);
      const std::vector<int64_t> pos_one = {q_pos[i]};
      std::vector<float> alone;
      const PagedAttentionArgs one = seq.Args(q_one, pos_one, 50, &alone);
      PagedAttention(one, 0, PagedAttentionTasks(one), isa());
      EXPECT_EQ(std::memcmp(alone.data(), whole.data() + i * row, row * sizeof(float)), 0)
          << "group " << group << " query " << i;
    }
  }
}

// q8_0 against the exact result over the unrounded K/V. Per element, K and V move by at most half
// a step, max |x| / 254 of their group: here |K| <= 2 and |V| <= 1, so about 0.008 and 0.004,
// which moves each score by ~0.005 (random signs over head_dim terms, scaled by 1/sqrt(dk)).
// The stated bound: every output within 0.02 of exact (|V| <= 1), the mean error below 0.003
// (measured: 0.004-0.007 and 0.001); f16 storage on the same data stays 20x inside both, and so
// does the fp32 tolerance above.
TEST_P(PagedAttentionPaths, Q8ErrorAgainstTheUnroundedKvIsBounded) {
  constexpr double kQ8Atol = 0.02;
  constexpr double kQ8MeanAtol = 0.003;
  for (const Shape& base : {Shape{KvDtype::kQ8_0, 16, 1, 4, 256, 256},   // Gemma 3
                            Shape{KvDtype::kQ8_0, 16, 2, 4, 128, 128},   // Llama
                            Shape{KvDtype::kQ8_0, 16, 2, 3, 72, 72}}) {  // short last group
    for (KvDtype dtype : {KvDtype::kQ8_0, KvDtype::kF16}) {
      Shape shape = base;
      shape.dtype = dtype;
      Sequence seq(shape, 300, 42);
      const std::vector<int64_t> q_pos = {299, 150, 17, 0};
      const std::vector<float> q = seq.RandomQ(static_cast<int64_t>(q_pos.size()));
      std::vector<float> out;
      const PagedAttentionArgs args = seq.Args(q, q_pos, 0, &out);
      RunSplit(args, isa(), &rng_);
      const std::vector<double> exact = seq.Reference(args, /*as_written=*/true);
      double worst = 0.0;
      double sum = 0.0;
      for (size_t e = 0; e < out.size(); ++e) {
        const double err = std::fabs(out[e] - exact[e]);
        worst = std::max(worst, std::isnan(err) ? INFINITY : err);
        sum += err;
      }
      const double mean = sum / static_cast<double>(out.size());
      const double scale = dtype == KvDtype::kQ8_0 ? 1.0 : 1.0 / 20.0;
      EXPECT_LE(worst, kQ8Atol * scale) << ShapeName(shape) << " mean error " << mean;
      EXPECT_LE(mean, kQ8MeanAtol * scale) << ShapeName(shape) << " worst error " << worst;
    }
  }
}

TEST_P(PagedAttentionPaths, BlockIdsBeyond2Pow31Elements) {
  // 540000 blocks of 16 tokens x 256 dims: K alone is 2.2e9 elements (8.8 GB of virtual memory,
  // zero-filled lazily; only the few pages written are ever touched).
  const KvCacheConfig config{1, 1, 256, 256, 16, 540000, KvDtype::kF16};
  auto created = KvStorage::Create(config);
  if (!created.ok()) GTEST_SKIP() << created.status().ToString();
  KvStorage& storage = **created;
  const std::vector<kv::BlockId> blocks = {539999, 3, 270000, 539998};
  ASSERT_GT(storage.layout().KOffset(0, 539999, 15), int64_t{1} << 31);
  std::mt19937 rng(38);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const int64_t len = 60;
  std::vector<float> k_all(len * 256), v_all(len * 256);
  for (float& x : k_all) x = 2.0f * unit(rng);
  for (float& x : v_all) x = unit(rng);
  for (int64_t p = 0; p < len; ++p) {
    storage.Write(0, blocks, p, &k_all[p * 256], &v_all[p * 256], isa());
  }
  std::vector<float> q(4 * 256);
  for (float& x : q) x = unit(rng);
  const int64_t q_pos[] = {len - 1};
  std::vector<float> out(4 * 256);
  PagedAttentionArgs args;
  args.kv = &storage;
  args.layer = 0;
  args.block_ids = blocks;
  args.q = q.data();
  args.q_pos = q_pos;
  args.n_q = 1;
  args.n_heads = 4;
  args.scale = 1.0f / 16.0f;
  args.out = out.data();
  PagedAttention(args, 0, 1, isa());
  // Reference from the values as stored.
  std::vector<float> k(256), v(256);
  for (int32_t h = 0; h < 4; ++h) {
    std::vector<double> s(len), want(256, 0.0);
    double max_s = -INFINITY, sum = 0.0;
    for (int64_t p = 0; p < len; ++p) {
      storage.Read(0, blocks, p, k.data(), v.data());
      double dot = 0.0;
      for (int d = 0; d < 256; ++d) dot += static_cast<double>(q[h * 256 + d]) * k[d];
      s[p] = dot / 16.0;
      max_s = std::max(max_s, s[p]);
    }
    for (double& x : s) sum += (x = std::exp(x - max_s));
    for (int64_t p = 0; p < len; ++p) {
      storage.Read(0, blocks, p, k.data(), v.data());
      for (int d = 0; d < 256; ++d) want[d] += s[p] / sum * v[d];
    }
    const std::vector<float> got(out.begin() + h * 256, out.begin() + (h + 1) * 256);
    EXPECT_TRUE(Near(got, want, 1, 256)) << "head " << h;
  }
}

INSTANTIATE_TEST_SUITE_P(AllPaths, PagedAttentionPaths,
                         ::testing::Values(KvIsa::kScalar, KvIsa::kAvx2),
                         [](const ::testing::TestParamInfo<KvIsa>& info) {
                           return info.param == KvIsa::kAvx2 ? "Avx2" : "Scalar";
                         });

TEST(PagedAttention, EmptyTaskRangeDoesNothing) {
  Sequence seq(Shape{}, 4, 40);
  const std::vector<float> q = seq.RandomQ(1);
  const std::vector<int64_t> q_pos = {3};
  std::vector<float> out;
  const PagedAttentionArgs args = seq.Args(q, q_pos, 0, &out);
  PagedAttention(args, 1, 1);
  for (float x : out) EXPECT_TRUE(std::isnan(x));
  PagedAttention(args, 0, 1);
  for (float x : out) EXPECT_FALSE(std::isnan(x));
}

TEST(PagedAttentionDeathTest, PositionPastTheBlocksIsAProgrammerError) {
  Sequence seq(Shape{}, 4, 41);  // one block of 16
  const std::vector<float> q = seq.RandomQ(1);
  const std::vector<int64_t> q_pos = {16};
  std::vector<float> out;
  const PagedAttentionArgs args = seq.Args(q, q_pos, 0, &out);
  EXPECT_DEATH(PagedAttention(args, 0, 1), "capacity");
}

}  // namespace
}  // namespace strata::backend::cpu
