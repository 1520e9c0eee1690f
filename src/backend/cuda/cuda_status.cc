#include "cuda_status.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

namespace strata::backend::cuda {

Status CudaStatus(int error, std::string_view call) {
  if (error == 0) return OkStatus();
  const auto e = static_cast<cudaError_t>(error);
  return InternalError(std::string(call) + " failed: " + cudaGetErrorName(e) + ": " +
                       cudaGetErrorString(e));
}

Status CublasStatus(int status, std::string_view call) {
  if (status == 0) return OkStatus();
  const auto s = static_cast<cublasStatus_t>(status);
  return InternalError(std::string(call) + " failed: " + cublasGetStatusName(s) + ": " +
                       cublasGetStatusString(s));
}

}  // namespace strata::backend::cuda
