#include "strata/common/heap_tuning.h"

#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace strata {

std::string FixMmapThreshold(size_t bytes) {
#if defined(__GLIBC__)
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr) return "from MALLOC_MMAP_THRESHOLD_";
  if (mallopt(M_MMAP_THRESHOLD, static_cast<int>(bytes)) == 1) return std::to_string(bytes);
#else
  (void)bytes;
#endif
  return "unsupported";
}

}  // namespace strata
