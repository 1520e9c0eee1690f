// CUDA runtime and cuBLAS error codes as Status (backend/cuda internal). A device error is
// INTERNAL and names the failing call with CUDA's own description of the error.
#pragma once

#include <string_view>

#include "strata/common/status.h"

namespace strata::backend::cuda {

// OK for cudaSuccess (0); otherwise INTERNAL "<call> failed: <cudaGetErrorName>: <string>".
// `error` is a cudaError_t (the kernels' launch API returns it as an int).
Status CudaStatus(int error, std::string_view call);

// OK for CUBLAS_STATUS_SUCCESS (0); otherwise INTERNAL naming the call and the status.
Status CublasStatus(int status, std::string_view call);

}  // namespace strata::backend::cuda

// Returns from the enclosing function with the Status of a failed CUDA call or launch.
#define STRATA_CUDA_RETURN_IF_ERROR(expr) \
  STRATA_RETURN_IF_ERROR(::strata::backend::cuda::CudaStatus(static_cast<int>(expr), #expr))

// The same for a cuBLAS call.
#define STRATA_CUBLAS_RETURN_IF_ERROR(expr) \
  STRATA_RETURN_IF_ERROR(::strata::backend::cuda::CublasStatus(static_cast<int>(expr), #expr))
