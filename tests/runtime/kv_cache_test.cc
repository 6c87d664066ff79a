// The KV cache starts poisoned so unwritten slots cannot pass for zeros (block accounting is
// tested in block_manager_test.cc).
#include "runtime/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>

namespace roofline {
namespace {

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
