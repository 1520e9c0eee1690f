#include "device_memory.h"

#include <string>

#include "cuda_status.h"

namespace strata::backend::cuda {
namespace {

Status AllocationStatus(cudaError_t err, int64_t bytes, std::string_view what,
                        std::string_view call) {
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so later calls do not report it again
    return FailedPreconditionError("the device has no room for " + std::string(what) + " (" +
                                   std::to_string(bytes) + " bytes)");
  }
  return CudaStatus(err, call);
}

}  // namespace

StatusOr<DeviceBuffer> DeviceBuffer::Allocate(int64_t bytes, std::string_view what) {
  DeviceBuffer b;
  if (bytes < 0) return InvalidArgumentError("negative size for " + std::string(what));
  if (bytes == 0) return b;
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, static_cast<size_t>(bytes));
  if (err != cudaSuccess) return AllocationStatus(err, bytes, what, "cudaMalloc");
  b.ptr_ = p;
  b.bytes_ = bytes;
  return b;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::Reset() {
  if (ptr_ != nullptr) cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

StatusOr<PinnedBuffer> PinnedBuffer::Allocate(int64_t bytes, std::string_view what) {
  PinnedBuffer b;
  if (bytes < 0) return InvalidArgumentError("negative size for " + std::string(what));
  if (bytes == 0) return b;
  void* p = nullptr;
  const cudaError_t err = cudaMallocHost(&p, static_cast<size_t>(bytes));
  if (err != cudaSuccess) return AllocationStatus(err, bytes, what, "cudaMallocHost");
  b.ptr_ = p;
  b.bytes_ = bytes;
  return b;
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void PinnedBuffer::Reset() {
  if (ptr_ != nullptr) cudaFreeHost(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

StatusOr<Stream> Stream::Create() {
  Stream s;
  STRATA_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s.s_, cudaStreamNonBlocking));
  return s;
}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    Reset();
    s_ = std::exchange(other.s_, nullptr);
  }
  return *this;
}

void Stream::Reset() {
  if (s_ != nullptr) cudaStreamDestroy(s_);
  s_ = nullptr;
}

StatusOr<CublasHandle> CublasHandle::Create(cudaStream_t stream, void* workspace,
                                            int64_t workspace_bytes) {
  CublasHandle h;
  STRATA_CUBLAS_RETURN_IF_ERROR(cublasCreate(&h.h_));
  // cublasSetStream resets the workspace to cuBLAS's default pool, so the workspace comes after.
  STRATA_CUBLAS_RETURN_IF_ERROR(cublasSetStream(h.h_, stream));
  STRATA_CUBLAS_RETURN_IF_ERROR(
      cublasSetWorkspace(h.h_, workspace, static_cast<size_t>(workspace_bytes)));
  return h;
}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  if (this != &other) {
    Reset();
    h_ = std::exchange(other.h_, nullptr);
  }
  return *this;
}

void CublasHandle::Reset() {
  if (h_ != nullptr) cublasDestroy(h_);
  h_ = nullptr;
}

GraphExec& GraphExec::operator=(GraphExec&& other) noexcept {
  if (this != &other) {
    Reset();
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

void GraphExec::Reset() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  exec_ = nullptr;
}

}  // namespace strata::backend::cuda
