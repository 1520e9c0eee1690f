// Owning handles of CUDA resources (backend/cuda internal): device and pinned host buffers, a
// stream, a cuBLAS handle and an instantiated graph. Each frees its resource on destruction
// (errors there are ignored: nothing can be done about them) and is move-only. Creation returns
// a Status: INTERNAL for a device error, FAILED_PRECONDITION when memory does not fit.
//
// The caller makes sure the device is idle (or at least done with the resource) before one is
// destroyed: CudaBackend synchronizes its stream first.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string_view>
#include <utility>

#include "strata/common/status.h"

namespace strata::backend::cuda {

// `bytes` of device memory (cudaMalloc: 256-byte aligned).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // FAILED_PRECONDITION naming `what` when the device cannot hold `bytes` more; bytes = 0 gives
  // an empty buffer (null pointer).
  static StatusOr<DeviceBuffer> Allocate(int64_t bytes, std::string_view what);

  DeviceBuffer(DeviceBuffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Reset(); }

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  int64_t bytes() const { return bytes_; }
  void Reset();

 private:
  void* ptr_ = nullptr;
  int64_t bytes_ = 0;
};

// `bytes` of page-locked host memory (cudaMallocHost), for asynchronous copies.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  static StatusOr<PinnedBuffer> Allocate(int64_t bytes, std::string_view what);

  PinnedBuffer(PinnedBuffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { Reset(); }

  uint8_t* data() const { return static_cast<uint8_t*>(ptr_); }
  int64_t bytes() const { return bytes_; }
  void Reset();

 private:
  void* ptr_ = nullptr;
  int64_t bytes_ = 0;
};

// A non-blocking stream (no implicit ordering with the legacy default stream).
class Stream {
 public:
  Stream() = default;
  static StatusOr<Stream> Create();
  Stream(Stream&& other) noexcept : s_(std::exchange(other.s_, nullptr)) {}
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { Reset(); }

  cudaStream_t get() const { return s_; }
  void Reset();

 private:
  cudaStream_t s_ = nullptr;
};

// A cuBLAS handle bound to one stream, with a fixed user workspace so that calls captured into
// CUDA graphs never allocate (cuBLAS's advice for graph capture).
class CublasHandle {
 public:
  CublasHandle() = default;
  // `workspace`: device memory the handle may use, `workspace_bytes` long; must outlive it.
  static StatusOr<CublasHandle> Create(cudaStream_t stream, void* workspace,
                                       int64_t workspace_bytes);
  CublasHandle(CublasHandle&& other) noexcept : h_(std::exchange(other.h_, nullptr)) {}
  CublasHandle& operator=(CublasHandle&& other) noexcept;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle() { Reset(); }

  cublasHandle_t get() const { return h_; }
  void Reset();

 private:
  cublasHandle_t h_ = nullptr;
};

// An instantiated CUDA graph.
class GraphExec {
 public:
  GraphExec() = default;
  explicit GraphExec(cudaGraphExec_t exec) : exec_(exec) {}
  GraphExec(GraphExec&& other) noexcept : exec_(std::exchange(other.exec_, nullptr)) {}
  GraphExec& operator=(GraphExec&& other) noexcept;
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  ~GraphExec() { Reset(); }

  cudaGraphExec_t get() const { return exec_; }
  explicit operator bool() const { return exec_ != nullptr; }
  void Reset();

 private:
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace strata::backend::cuda
