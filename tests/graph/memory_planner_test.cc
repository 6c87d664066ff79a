// The memory planner never overlaps buffers that are live together, reuses memory when lifetimes
// allow, and stays close to the peak-live lower bound.
#include "graph/memory_planner.h"

#include <gtest/gtest.h>

#include <random>

namespace roofline {
namespace {

TEST(MemoryPlanner, ChainReusesMemory) {
  // a -> b -> c -> d: each buffer dies when the next is written, so two slots suffice.
  std::vector<BufferRequest> r = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}, {1000, 3, 4}};
  MemoryPlan p = plan_memory(r, 256);
  EXPECT_TRUE(memory_plan_is_valid(r, p));
  EXPECT_EQ(p.total_bytes, 2 * 1024);
  EXPECT_EQ(peak_live_bytes(r), 2000);
}

TEST(MemoryPlanner, AllLiveTogetherGetDisjointRanges) {
  std::vector<BufferRequest> r = {{100, 0, 5}, {300, 0, 5}, {200, 0, 5}};
  MemoryPlan p = plan_memory(r, 1);
  EXPECT_TRUE(memory_plan_is_valid(r, p));
  EXPECT_EQ(p.total_bytes, 600);
}

TEST(MemoryPlanner, ValidityCheckCatchesOverlap) {
  std::vector<BufferRequest> r = {{100, 0, 2}, {100, 1, 3}};
  MemoryPlan bad{{0, 50}, 200};
  EXPECT_FALSE(memory_plan_is_valid(r, bad));
  MemoryPlan ok{{0, 100}, 200};
  EXPECT_TRUE(memory_plan_is_valid(r, ok));
}

TEST(MemoryPlanner, RandomLifetimesAreAlwaysValidAndNearPeak) {
  std::random_device rd;
  const unsigned seed = rd();
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<BufferRequest> r;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      const int first = static_cast<int>(rng() % 50);
      r.push_back(
          {1 + static_cast<int64_t>(rng() % 5000), first, first + static_cast<int>(rng() % 10)});
    }
    MemoryPlan p = plan_memory(r, 64);
    ASSERT_TRUE(memory_plan_is_valid(r, p)) << "seed " << seed << " trial " << trial;
    int64_t sum = 0;
    for (auto& b : r) sum += (b.size_bytes + 63) / 64 * 64;
    EXPECT_LE(p.total_bytes, sum) << "seed " << seed;
    EXPECT_GE(p.total_bytes, peak_live_bytes(r));
  }
}

}  // namespace
}  // namespace roofline
