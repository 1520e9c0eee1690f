// ProcessCollector: the process's own resources, read when /metrics is scraped (prometheus-cpp
// has no process collector): the conventional process_* families (resident and virtual memory,
// CPU seconds, open and maximum fds) and the C heap as glibc's allocator sees it, so that an
// operator (and the soak suite) can tell memory the program holds from memory the allocator
// keeps free (fragmentation) when the resident size grows.
//
// Thread rules: Collect may run on several scrape threads at once (it shares no state).
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <vector>

namespace strata::metrics {

class ProcessCollector final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace strata::metrics
