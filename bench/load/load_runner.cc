#include "bench/load/load_runner.h"

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "bench/load/arrival_process.h"
#include "strata/common/check.h"

namespace strata::bench {

LoadOutcome RunLoad(TargetClient& client, const Workload& workload, const LoadOptions& options) {
  STRATA_CHECK(options.num_requests > 0 || options.duration_s > 0);
  using Clock = std::chrono::steady_clock;
  std::mutex mutex;
  std::condition_variable changed;
  int64_t in_flight = 0;
  int64_t errors = 0;
  LoadOutcome outcome;
  Clock::time_point last_done;

  ArrivalProcess arrivals(options.request_rate, options.burstiness, options.seed);
  const Clock::time_point start = Clock::now();
  const Clock::time_point stop_at =
      options.duration_s > 0 ? start + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(options.duration_s))
                             : Clock::time_point::max();
  Clock::time_point next_send = start;
  std::unique_lock<std::mutex> lock(mutex);
  for (int64_t i = 0; options.num_requests == 0 || i < options.num_requests; ++i) {
    if (i > 0) {
      next_send += std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(arrivals.NextGapSeconds()));
    }
    if (next_send >= stop_at) break;
    auto stop_sending = [&] { return errors > options.max_errors; };
    // Wait for the send time and a free slot (a failure past the threshold interrupts).
    changed.wait_until(lock, next_send, stop_sending);
    changed.wait_until(lock, stop_at, [&] {
      return stop_sending() || options.concurrency == 0 || in_flight < options.concurrency;
    });
    if (stop_sending()) {
      outcome.stopped_early = true;
      outcome.stop_reason = std::to_string(errors) + " requests failed (more than --max-errors " +
                            std::to_string(options.max_errors) + ")";
      break;
    }
    if (Clock::now() >= stop_at) break;
    ++in_flight;
    lock.unlock();
    const RequestSpec spec = workload.Request(options.first_index + i);
    client.Start(options.first_index + i, spec, [&](RequestResult result) {
      std::lock_guard<std::mutex> done_lock(mutex);
      if (!result.ok) {
        ++errors;
        if (outcome.first_error.empty()) outcome.first_error = result.error_message;
      }
      outcome.results.push_back(std::move(result));
      last_done = Clock::now();
      --in_flight;
      changed.notify_all();
    });
    lock.lock();
  }
  changed.wait(lock, [&] { return in_flight == 0; });
  if (!outcome.results.empty()) {
    outcome.duration_s = std::chrono::duration<double>(last_done - start).count();
  }
  return outcome;
}

}  // namespace strata::bench
