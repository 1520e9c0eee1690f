// Test helpers for the CUDA kernel tests: an owning device allocation that uploads and
// downloads host vectors, and the skip every device test starts with. Host code only (the
// tests are .cc files compiled by the host compiler against the CUDA runtime).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "strata/kernels/dequantize.h"

// Skips the current test when this machine has no CUDA device (CI, the development machine).
#define STRATA_SKIP_WITHOUT_CUDA_DEVICE()                                            \
  do {                                                                               \
    if (::strata::kernels::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

namespace strata::test {

// `count` elements of T in device memory, freed on destruction. ok() is false when the
// allocation failed (the test then fails on it, never dereferences a null pointer).
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (count == 0) return;
    void* p = nullptr;
    if (cudaMalloc(&p, count * sizeof(T)) == cudaSuccess) data_ = static_cast<T*>(p);
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { Upload(host); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      Free();
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { Free(); }

  bool ok() const { return count_ == 0 || data_ != nullptr; }
  T* get() const { return data_; }
  size_t size() const { return count_; }

  // Copies host (at most size() elements) to the device; false on a CUDA error.
  bool Upload(const std::vector<T>& host) {
    if (data_ == nullptr || host.size() > count_) return host.empty();
    return cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) ==
           cudaSuccess;
  }
  // The whole buffer, after the device has finished all work (cudaDeviceSynchronize).
  std::vector<T> Download() const {
    std::vector<T> host(count_);
    if (data_ == nullptr) return host;
    cudaDeviceSynchronize();
    cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }

 private:
  void Free() {
    if (data_ != nullptr) cudaFree(data_);
    data_ = nullptr;
  }

  T* data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace strata::test
