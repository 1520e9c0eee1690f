// Test fixture for the paged attention kernels: a paged KV cache on the device with random
// contents rounded to the storage type, its host mirror, block tables, and the float64
// reference attention (the CPU backend's semantics, see backend/cpu/attention.h).
//
// Every byte of the device cache that no sequence owns (unused blocks, slots past a sequence's
// context) is NaN, so a kernel that reads a wrong block or slot produces NaN and fails.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "strata/kernels/paged_attention.h"
#include "strata/model/fp16.h"
#include "support/device_buffer.h"

namespace strata::kernels::paged_test {

struct CacheShape {
  KvElementType dtype = KvElementType::kF32;
  int32_t num_kv_heads = 1;
  int32_t head_dim_k = 64;
  int32_t head_dim_v = 64;
  int32_t block_size = 16;
};

inline const char* DtypeName(KvElementType t) { return t == KvElementType::kF16 ? "f16" : "f32"; }

// Value as stored: rounded to fp16 (round to nearest even) or kept as fp32.
inline float RoundTo(KvElementType t, float x) {
  return t == KvElementType::kF16 ? model::Fp16ToFloat(model::FloatToFp16(x)) : x;
}

// The kernels compute in fp32 whatever the storage type, and the reference uses the values as
// stored, so what remains is fp32 rounding in scores, exp and sums (~1e-7 when the kernels were run
// in a CPU emulation): the same bound for both types. A key dropped from a 4097-token context moves
// outputs by ~1e-4.
inline double Tolerance(KvElementType /*t*/) { return 1e-5; }

// Where sequences' blocks come from.
enum class BlockOrder {
  kShuffled,  // a random permutation of [0, num_blocks): non-contiguous, out of order
  kTop,       // the highest ids of a large cache (64-bit offsets), shuffled
};

class PagedKvCache {
 public:
  // Blocks for sequences with `context_lens` tokens, in a cache of max(num_blocks_hint, blocks
  // needed) blocks. ok() is false when device memory ran out.
  PagedKvCache(const CacheShape& shape, const std::vector<int32_t>& context_lens,
               int64_t num_blocks_hint, BlockOrder order, uint32_t seed)
      : shape_(shape), rng_(seed) {
    int64_t needed = 0;
    for (int32_t ctx : context_lens) needed += BlocksFor(ctx);
    num_blocks_ = std::max<int64_t>(num_blocks_hint, needed);
    std::vector<int32_t> ids;
    if (order == BlockOrder::kShuffled) {
      ids.resize(static_cast<size_t>(num_blocks_));
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng_);
    } else {
      for (int64_t i = 0; i < needed; ++i) ids.push_back(static_cast<int32_t>(num_blocks_ - 1 - i));
      std::shuffle(ids.begin(), ids.end(), rng_);
    }
    size_t next = 0;
    for (int32_t ctx : context_lens) {
      offsets_.push_back(static_cast<int32_t>(tables_.size()));
      for (int64_t b = 0; b < BlocksFor(ctx); ++b) tables_.push_back(ids[next++]);
      contexts_.push_back(ctx);
    }
    k_ = test::DeviceBuffer<uint8_t>(static_cast<size_t>(LayerBytes(shape_.head_dim_k)));
    v_ = test::DeviceBuffer<uint8_t>(static_cast<size_t>(LayerBytes(shape_.head_dim_v)));
    ok_ = k_.ok() && v_.ok() && k_.get() != nullptr && v_.get() != nullptr &&
          cudaMemset(k_.get(), 0xff, k_.size()) == cudaSuccess &&
          cudaMemset(v_.get(), 0xff, v_.size()) == cudaSuccess;
    if (!ok_) return;
    for (size_t s = 0; s < contexts_.size(); ++s) {
      for (int64_t b = 0; b < BlocksFor(contexts_[s]); ++b) {
        const int32_t id = tables_[static_cast<size_t>(offsets_[s] + b)];
        const int64_t valid =
            std::min<int64_t>(shape_.block_size, contexts_[s] - b * shape_.block_size);
        ok_ = ok_ && FillBlock(id, valid, shape_.head_dim_k, k_, &k_host_) &&
              FillBlock(id, valid, shape_.head_dim_v, v_, &v_host_);
      }
    }
  }

  bool ok() const { return ok_; }
  int64_t num_blocks() const { return num_blocks_; }
  const std::vector<int32_t>& tables() const { return tables_; }
  const std::vector<int32_t>& offsets() const { return offsets_; }

  PagedKvLayer Layer() const {
    PagedKvLayer layer;
    layer.k = k_.get();
    layer.v = v_.get();
    layer.dtype = shape_.dtype;
    layer.num_kv_heads = shape_.num_kv_heads;
    layer.head_dim_k = shape_.head_dim_k;
    layer.head_dim_v = shape_.head_dim_v;
    layer.block_size = shape_.block_size;
    return layer;
  }

  // The stored K (V) row of sequence `seq` at `pos`, KV head `h`, as float.
  const float* K(size_t seq, int64_t pos, int32_t h) const {
    return Row(k_host_, seq, pos, h, shape_.head_dim_k);
  }
  const float* V(size_t seq, int64_t pos, int32_t h) const {
    return Row(v_host_, seq, pos, h, shape_.head_dim_v);
  }

  // Float64 attention of one query token of sequence `seq` at position `pos`:
  // q [num_heads, head_dim_k] -> out [num_heads, head_dim_v].
  void Reference(size_t seq, int64_t pos, const float* q, int32_t num_heads, float scale,
                 int32_t sliding_window, double* out) const {
    const int32_t group = num_heads / shape_.num_kv_heads;
    const int64_t lo = sliding_window > 0 ? std::max<int64_t>(0, pos - sliding_window + 1) : 0;
    std::vector<double> s(static_cast<size_t>(pos - lo + 1));
    for (int32_t h = 0; h < num_heads; ++h) {
      const int32_t kvh = h / group;
      const float* qh = q + static_cast<int64_t>(h) * shape_.head_dim_k;
      double mx = -INFINITY;
      for (int64_t p = lo; p <= pos; ++p) {
        const float* k = K(seq, p, kvh);
        double dot = 0.0;
        for (int32_t d = 0; d < shape_.head_dim_k; ++d) dot += double{qh[d]} * k[d];
        s[static_cast<size_t>(p - lo)] = double{scale} * dot;
        mx = std::max(mx, s[static_cast<size_t>(p - lo)]);
      }
      double sum = 0.0;
      for (double& x : s) {
        x = std::exp(x - mx);
        sum += x;
      }
      double* o = out + static_cast<int64_t>(h) * shape_.head_dim_v;
      std::fill(o, o + shape_.head_dim_v, 0.0);
      for (int64_t p = lo; p <= pos; ++p) {
        const float* v = V(seq, p, kvh);
        const double w = s[static_cast<size_t>(p - lo)] / sum;
        for (int32_t d = 0; d < shape_.head_dim_v; ++d) o[d] += w * v[d];
      }
    }
  }

 private:
  int64_t BlocksFor(int64_t ctx) const { return (ctx + shape_.block_size - 1) / shape_.block_size; }
  int32_t ElementBytes() const { return shape_.dtype == KvElementType::kF16 ? 2 : 4; }
  int64_t BlockElements(int32_t head_dim) const {
    return int64_t{shape_.block_size} * shape_.num_kv_heads * head_dim;
  }
  int64_t LayerBytes(int32_t head_dim) const {
    return num_blocks_ * BlockElements(head_dim) * ElementBytes();
  }

  // Random values for the first `valid` slots of block `id`; later slots stay NaN.
  bool FillBlock(int32_t id, int64_t valid, int32_t head_dim,
                 const test::DeviceBuffer<uint8_t>& dev,
                 std::unordered_map<int32_t, std::vector<float>>* host) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    const int64_t n = valid * shape_.num_kv_heads * head_dim;
    std::vector<float>& values = (*host)[id];
    values.resize(static_cast<size_t>(n));
    for (float& x : values) x = RoundTo(shape_.dtype, dist(rng_));
    std::vector<uint8_t> bytes(static_cast<size_t>(n * ElementBytes()));
    if (shape_.dtype == KvElementType::kF16) {
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = model::FloatToFp16(values[static_cast<size_t>(i)]);
        std::memcpy(bytes.data() + i * 2, &h, 2);
      }
    } else {
      std::memcpy(bytes.data(), values.data(), bytes.size());
    }
    const int64_t offset = int64_t{id} * BlockElements(head_dim) * ElementBytes();
    return cudaMemcpy(dev.get() + offset, bytes.data(), bytes.size(), cudaMemcpyHostToDevice) ==
           cudaSuccess;
  }

  const float* Row(const std::unordered_map<int32_t, std::vector<float>>& host, size_t seq,
                   int64_t pos, int32_t h, int32_t head_dim) const {
    const int32_t id = tables_[static_cast<size_t>(offsets_[seq] + pos / shape_.block_size)];
    const int64_t slot = pos % shape_.block_size;
    return host.at(id).data() + (slot * shape_.num_kv_heads + h) * head_dim;
  }

  CacheShape shape_;
  std::mt19937 rng_;
  int64_t num_blocks_ = 0;
  std::vector<int32_t> tables_;
  std::vector<int32_t> offsets_;
  std::vector<int32_t> contexts_;
  std::unordered_map<int32_t, std::vector<float>> k_host_;
  std::unordered_map<int32_t, std::vector<float>> v_host_;
  test::DeviceBuffer<uint8_t> k_;
  test::DeviceBuffer<uint8_t> v_;
  bool ok_ = false;
};

// Whether the device has `bytes` of free memory (large-cache tests skip otherwise).
inline bool DeviceHasFreeBytes(int64_t bytes) {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return false;
  return static_cast<int64_t>(free_bytes) >= bytes;
}

// A cache whose used blocks (the top ids) all start past 2^32 elements per layer, so 32-bit
// (signed or unsigned) offset arithmetic would read the wrong rows: fp16, 2 KV heads of 128,
// 16-token blocks, 1.1M blocks: 9 GB for K and 9 GB for V.
inline constexpr int64_t kLargeCacheBlocks = 1'100'000;
inline CacheShape LargeCacheShape() {
  CacheShape s;
  s.dtype = KvElementType::kF16;
  s.num_kv_heads = 2;
  s.head_dim_k = 128;
  s.head_dim_v = 128;
  s.block_size = 16;
  return s;
}
inline int64_t LargeCacheBytes() { return kLargeCacheBlocks * 16 * 2 * (128 + 128) * 2; }

// Random fp32 values in [-1, 1].
inline std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

// Checks |got - want| <= tol * (1 + |want|) for every element of rows of `width` values and
// reports the worst one as (row, column); `row_name` says what a row is.
inline void ExpectAllClose(const std::vector<float>& got, const std::vector<double>& want,
                           int64_t width, double tol, const std::string& row_name) {
  ASSERT_EQ(got.size(), want.size());
  double worst = -1.0;
  size_t worst_i = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err =
        std::isfinite(got[i]) ? std::abs(got[i] - want[i]) / (1.0 + std::abs(want[i])) : INFINITY;
    if (err > worst) {
      worst = err;
      worst_i = i;
    }
  }
  EXPECT_LE(worst, tol) << "worst element: " << row_name << " " << worst_i / width << ", column "
                        << worst_i % width << ": got " << got[worst_i] << ", want "
                        << want[worst_i];
}

}  // namespace strata::kernels::paged_test
