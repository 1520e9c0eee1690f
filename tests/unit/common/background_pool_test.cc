#include "strata/common/background_pool.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <thread>
#include <utility>

namespace strata {
namespace {

TEST(BackgroundPool, RunsJobsOnItsWorkersAtTheLowerPriority) {
  BackgroundPool pool({/*threads=*/1, /*max_queued=*/4, /*nice=*/7});
  const int before = getpriority(PRIO_PROCESS, 0);
  std::promise<std::pair<std::thread::id, int>> ran;
  ASSERT_TRUE(pool.Post([&ran] {
                    ran.set_value(
                        {std::this_thread::get_id(),
                         getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)))});
                  })
                  .ok());
  const auto [thread, nice] = ran.get_future().get();
  EXPECT_NE(thread, std::this_thread::get_id());
  // Raised by 7 (capped at 19); this thread's own value is unchanged.
  EXPECT_EQ(nice, std::min(before + 7, 19));
  EXPECT_EQ(getpriority(PRIO_PROCESS, 0), before);
}

TEST(BackgroundPool, AFullBacklogRefusesAndTheDestructorRunsWhatIsQueued) {
  std::atomic<int> done{0};
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  {
    BackgroundPool pool({/*threads=*/1, /*max_queued=*/2, /*nice=*/0});
    std::promise<void> started;
    ASSERT_TRUE(pool.Post([&] {
                      started.set_value();
                      gate.wait();
                      ++done;
                    })
                    .ok());
    started.get_future().wait();  // the worker holds the first job: two places are left
    ASSERT_TRUE(pool.Post([&] { ++done; }).ok());
    ASSERT_TRUE(pool.Post([&] { ++done; }).ok());
    const Status full = pool.Post([&] { ++done; });
    EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
    EXPECT_EQ(pool.queued(), 2u);
    release.set_value();
  }
  EXPECT_EQ(done.load(), 3);  // the refused job never ran; the queued ones did
}

}  // namespace
}  // namespace strata
