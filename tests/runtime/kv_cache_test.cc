// The block allocator hands out each block once and takes every block back; the cache starts
// poisoned so unwritten slots cannot pass for zeros.
#include "runtime/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace roofline {
namespace {

TEST(BlockAllocator, EveryBlockOnceThenExhausted) {
  BlockAllocator a(5);
  std::set<int32_t> got;
  for (int i = 0; i < 5; ++i) got.insert(a.allocate());
  EXPECT_EQ(got, (std::set<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(a.allocate(), -1);
  a.release(3);
  EXPECT_EQ(a.num_free(), 1);
  EXPECT_EQ(a.allocate(), 3);
}

TEST(BlockAllocatorDeathTest, DoubleReleaseAborts) {
  BlockAllocator a(2);
  int32_t b = a.allocate();
  a.release(b);
  EXPECT_DEATH(a.release(b), "internal check failed");
}

TEST(KvCache, LayersAreDisjointAndPoisoned) {
  KvCacheShape s{3, 4, 2, 2, 8};
  auto kv = KvCache::allocate(s);
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->v(0) - kv->k(0), s.elements_per_layer());
  EXPECT_EQ(kv->k(1) - kv->v(0), s.elements_per_layer());
  EXPECT_TRUE(std::isnan(kv->k(2)[0]));
  EXPECT_FALSE(KvCache::allocate(KvCacheShape{1, 0, 16, 1, 8}).ok());
}

}  // namespace
}  // namespace roofline
