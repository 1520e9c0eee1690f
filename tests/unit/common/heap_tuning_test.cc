#include "strata/common/heap_tuning.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "support/sanitizer.h"

namespace strata {
namespace {

using strata::testing::kSanitized;

#if defined(__GLIBC__)
// glibc left alone raises its mmap threshold when an mmapped block is freed, so the next block
// of that size would come from an arena; with the threshold fixed, every large block is
// mmapped again (and unmapped on free).
TEST(HeapTuning, LargeBlocksStayMmappedAfterOneIsFreed) {
  if (kSanitized) GTEST_SKIP() << "a sanitizer's allocator is not glibc's heap";
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr) {
    EXPECT_EQ(FixMmapThreshold(), "from MALLOC_MMAP_THRESHOLD_");
    GTEST_SKIP() << "MALLOC_MMAP_THRESHOLD_ is set";
  }
  ASSERT_EQ(FixMmapThreshold(size_t{1} << 20), "1048576");
  constexpr size_t kBlock = size_t{4} << 20;
  for (int i = 0; i < 3; ++i) {
    const size_t before = mallinfo2().hblkhd;
    void* block = std::malloc(kBlock);
    ASSERT_NE(block, nullptr);
    EXPECT_GE(mallinfo2().hblkhd, before + kBlock) << "block " << i << " is not mmapped";
    std::free(block);
    EXPECT_EQ(mallinfo2().hblkhd, before) << "block " << i << " was not unmapped";
  }
}
#endif

}  // namespace
}  // namespace strata
