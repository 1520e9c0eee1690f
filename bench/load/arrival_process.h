// ArrivalProcess: the gaps between request sends of an open-loop run.
//
// Gaps are gamma distributed with shape `burstiness` and scale 1 / (rate * burstiness), so their
// mean is 1 / rate whatever the shape; shape 1 is the exponential distribution (Poisson
// arrivals), shape < 1 burstier, shape > 1 more regular (the convention of vLLM's
// benchmark_serving). An infinite rate gives gaps of 0 (everything at once).
//
// Thread rules: not thread-safe; the load runner's thread draws from it.
#pragma once

#include <cstdint>
#include <random>

namespace strata::bench {

class ArrivalProcess {
 public:
  // rate: requests per second (> 0, may be infinity); burstiness > 0.
  ArrivalProcess(double rate, double burstiness, uint64_t seed);

  // The next gap in seconds (>= 0).
  double NextGapSeconds();

 private:
  double rate_;
  std::mt19937_64 rng_;
  std::gamma_distribution<double> gamma_;
};

}  // namespace strata::bench
