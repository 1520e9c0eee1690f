// Host-side planning of the quantized matrix products (see include/strata/kernels/
// quant_matmul.h): how many tokens each pass takes and how many columns a chunk stages.
#include "quant_matmul.cuh"

namespace strata::kernels {

int QuantMatMulTokensPerPass(int64_t tokens_left) {
  int width = 1;
  while (width < quant_matmul::kMaxTokensPerPass && width < tokens_left) width *= 2;
  return width;
}

int QuantMatMulChunkCols(int tokens_per_pass) {
  return quant_matmul::kSharedFloats / tokens_per_pass;
}

}  // namespace strata::kernels
