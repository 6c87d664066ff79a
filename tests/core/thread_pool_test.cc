// parallel_for covers every index exactly once, whatever the chunking, and nested calls run
// inline instead of deadlocking.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace roofline {
namespace {

TEST(ThreadPool, EveryIndexOnce) {
  ThreadPool pool(4);
  for (int64_t n : {0, 1, 7, 1000, 12345}) {
    for (int64_t chunk : {1, 3, 100}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, chunk, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << chunk << " " << i;
    }
  }
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(8, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pool.parallel_for(10, 1, [&](int64_t b2, int64_t e2) { sum += e2 - b2; });
  });
  EXPECT_EQ(sum.load(), 80);
}

}  // namespace
}  // namespace roofline
