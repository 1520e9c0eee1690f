// Comparison helpers for the per-token kernel tests (RMSNorm, RoPE, activations, embedding, KV
// write, element-wise ops): tolerance checks that name the worst element, bit-for-bit checks
// that name the first mismatch, a launch-then-synchronize check and seeded random inputs.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <vector>

namespace strata::test {

// n values drawn from N(0, stddev^2) with a seeded generator (the same values on every run).
inline std::vector<float> Random(size_t n, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Success when |got[i] - want[i]| <= tolerance(i) for every i; otherwise a message with the
// number of failing elements and the worst one (largest error / tolerance).
template <class ToleranceFn>
::testing::AssertionResult AllClose(const std::vector<float>& got, const std::vector<double>& want,
                                    ToleranceFn tolerance) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " != expected " << want.size();
  }
  int64_t failures = 0;
  int64_t worst = -1;
  double worst_ratio = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double allowed = tolerance(i);
    const bool same_nan = std::isnan(got[i]) && std::isnan(want[i]);
    if (same_nan || err <= allowed) continue;
    ++failures;
    const double ratio = std::isnan(err) ? INFINITY : err / allowed;
    if (worst < 0 || ratio > worst_ratio) {
      worst = static_cast<int64_t>(i);
      worst_ratio = ratio;
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  std::ostringstream m;
  m.precision(9);
  m << failures << " of " << got.size() << " elements out of tolerance; worst at " << worst
    << ": got " << got[worst] << " want " << want[worst] << " |err| "
    << std::fabs(static_cast<double>(got[worst]) - want[worst]) << " allowed "
    << tolerance(static_cast<size_t>(worst));
  return ::testing::AssertionFailure() << m.str();
}

// Success when got and want hold the same bit patterns; otherwise the first mismatch and the
// number of mismatches.
template <class T>
::testing::AssertionResult BitsEqual(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " != expected " << want.size();
  }
  int64_t mismatches = 0;
  int64_t first = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++mismatches;
    }
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  std::ostringstream m;
  m.precision(9);
  m << mismatches << " of " << got.size() << " elements differ; first at " << first << ": got "
    << +got[first] << " want " << +want[first];
  return ::testing::AssertionFailure() << m.str();
}

// A launch's return code, then the completion of the work it queued.
inline ::testing::AssertionResult LaunchSucceeded(int launch_result) {
  if (launch_result != 0) {
    return ::testing::AssertionFailure()
           << "launch returned " << launch_result << " ("
           << cudaGetErrorString(static_cast<cudaError_t>(launch_result)) << ")";
  }
  const cudaError_t sync = cudaDeviceSynchronize();
  if (sync != cudaSuccess) {
    return ::testing::AssertionFailure() << "kernel failed: " << cudaGetErrorString(sync);
  }
  return ::testing::AssertionSuccess();
}

constexpr int kInvalidValue = static_cast<int>(cudaErrorInvalidValue);

}  // namespace strata::test
