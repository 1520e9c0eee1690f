#include "bench/load/arrival_process.h"

#include <cmath>

#include "strata/common/check.h"

namespace strata::bench {

ArrivalProcess::ArrivalProcess(double rate, double burstiness, uint64_t seed)
    : rate_(rate),
      rng_(seed),
      gamma_(burstiness, std::isinf(rate) ? 1.0 : 1.0 / (rate * burstiness)) {
  STRATA_CHECK(rate > 0);
  STRATA_CHECK(burstiness > 0);
}

double ArrivalProcess::NextGapSeconds() {
  if (std::isinf(rate_)) return 0;
  return gamma_(rng_);
}

}  // namespace strata::bench
