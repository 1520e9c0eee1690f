#include "strata/embedding/pooling.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace strata::embedding {

void MeanPool(const float* hidden, int64_t num_tokens, int64_t dim, float* out) {
  std::vector<double> sum(dim, 0.0);
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* row = hidden + t * dim;
    for (int64_t d = 0; d < dim; ++d) sum[d] += row[d];
  }
  const double count = std::max<double>(static_cast<double>(num_tokens), 1e-9);
  for (int64_t d = 0; d < dim; ++d) out[d] = static_cast<float>(sum[d] / count);
}

void L2Normalize(float* v, int64_t n) {
  double sq = 0;
  for (int64_t i = 0; i < n; ++i) sq += static_cast<double>(v[i]) * v[i];
  const double scale = 1.0 / std::max(std::sqrt(sq), 1e-12);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(v[i] * scale);
}

}  // namespace strata::embedding
