#include "process_collector.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace strata::metrics {
namespace {

prometheus::MetricFamily Family(std::string name, std::string help, prometheus::MetricType type,
                                double value) {
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  return prometheus::MetricFamily{std::move(name), std::move(help), type, {m}};
}

// /proc/self/statm: sizes in pages (total program size, resident set); false without /proc.
bool ReadStatm(double* virtual_bytes, double* resident_bytes) {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return false;
  unsigned long long size = 0;
  unsigned long long resident = 0;
  const bool ok = std::fscanf(f, "%llu %llu", &size, &resident) == 2;
  std::fclose(f);
  if (!ok) return false;
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  *virtual_bytes = static_cast<double>(size) * page;
  *resident_bytes = static_cast<double>(resident) * page;
  return true;
}

// Entries of /proc/self/fd but "." and ".." (the directory's own fd included, as client
// libraries count it); -1 without /proc.
double OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  double n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

}  // namespace

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  double virtual_bytes = 0;
  double resident_bytes = 0;
  if (ReadStatm(&virtual_bytes, &resident_bytes)) {
    out.push_back(Family("process_resident_memory_bytes", "Resident memory size in bytes.",
                         MetricType::Gauge, resident_bytes));
    out.push_back(Family("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                         MetricType::Gauge, virtual_bytes));
  }
  if (const double fds = OpenFds(); fds >= 0) {
    out.push_back(
        Family("process_open_fds", "Number of open file descriptors.", MetricType::Gauge, fds));
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    out.push_back(Family("process_max_fds", "Maximum number of open file descriptors.",
                         MetricType::Gauge, static_cast<double>(limit.rlim_cur)));
  }
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) == 0) {
    const auto seconds = [](const timeval& t) {
      return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
    };
    out.push_back(Family("process_cpu_seconds_total",
                         "Total user and system CPU time spent in seconds.", MetricType::Counter,
                         seconds(usage.ru_utime) + seconds(usage.ru_stime)));
  }
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 heap = mallinfo2();
  out.push_back(Family("strata_heap_allocated_bytes",
                       "Bytes the program holds from the C heap (malloc), mmapped chunks included",
                       MetricType::Gauge, static_cast<double>(heap.uordblks + heap.hblkhd)));
  out.push_back(Family("strata_heap_free_bytes",
                       "Bytes the C heap keeps free in its arenas (not returned to the system)",
                       MetricType::Gauge, static_cast<double>(heap.fordblks)));
#endif
  return out;
}

}  // namespace strata::metrics
