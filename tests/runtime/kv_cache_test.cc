// The KV cache: poisoned on request so unwritten slots cannot pass for zeros (the tests run that
// way), zero pages on demand otherwise (block accounting is tested in block_manager_test.cc).
#include "runtime/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>

namespace roofline {
namespace {

TEST(KvCache, LayersAreDisjointAndPoisonedOnRequest) {
  KvCacheShape s{3, 4, 2, 2, 8};
  auto kv = KvCache::allocate(s, KvCache::Fill::kPoison);
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->v(0) - kv->k(0), s.elements_per_layer());
  EXPECT_EQ(kv->k(1) - kv->v(0), s.elements_per_layer());
  for (int64_t l = 0; l < s.num_layers; ++l)
    for (int64_t i = 0; i < s.elements_per_layer(); ++i) {
      ASSERT_TRUE(std::isnan(kv->k(l)[i]));
      ASSERT_TRUE(std::isnan(kv->v(l)[i]));
    }
  auto zero = KvCache::allocate(s, KvCache::Fill::kZeroOnDemand);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->v(2)[s.elements_per_layer() - 1], 0.0f);
  EXPECT_FALSE(KvCache::allocate(KvCacheShape{1, 0, 16, 1, 8}, KvCache::Fill::kPoison).ok());
}

}  // namespace
}  // namespace roofline
