// BlockManager: allocation order, reference counts, the prefix cache (exact matches only, even
// under forced hash collisions), LRU eviction, and a randomised property test that checks every
// invariant after every operation.
//
// The property test draws a fresh seed each run and prints it on failure; ROOFLINE_TEST_SEED=<n>
// replays a run exactly.
#include "runtime/block_manager.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace roofline {
namespace {

uint32_t run_seed() {
  static const uint32_t seed = [] {
    if (const char* env = std::getenv("ROOFLINE_TEST_SEED"))
      return static_cast<uint32_t>(std::strtoul(env, nullptr, 10));
    return static_cast<uint32_t>(std::random_device{}());
  }();
  return seed;
}

std::string seed_note() {
  return "seed " + std::to_string(run_seed()) +
         " (replay with ROOFLINE_TEST_SEED=" + std::to_string(run_seed()) + ")";
}

// Every hash the same: every second entry is a collision.
uint64_t constant_hash(uint64_t, const int32_t*, int64_t) { return 42; }

#define EXPECT_INVARIANTS(m) EXPECT_EQ((m).check_invariants(), "")

TEST(BlockManager, EveryBlockOnceThenExhausted) {
  BlockManager m(5, 2);
  std::set<int32_t> got;
  for (int i = 0; i < 5; ++i) got.insert(m.allocate());
  EXPECT_EQ(got, (std::set<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(m.allocate(), -1);
  EXPECT_EQ(m.num_free(), 0);
  m.release(3);
  EXPECT_EQ(m.num_free(), 1);
  EXPECT_EQ(m.allocate(), 3);
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, LowestIdsFirst) {
  BlockManager m(4, 2);
  EXPECT_EQ(m.allocate(), 0);
  EXPECT_EQ(m.allocate(), 1);
  EXPECT_EQ(m.allocate(), 2);
}

TEST(BlockManagerDeathTest, DoubleReleaseAborts) {
  BlockManager m(2, 2);
  int32_t b = m.allocate();
  m.release(b);
  EXPECT_DEATH(m.release(b), "internal check failed");
}

TEST(BlockManagerDeathTest, RegisteringAFreeOrCachedBlockAborts) {
  BlockManager m(2, 2);
  const int32_t t[2] = {1, 2};
  EXPECT_DEATH(m.register_block(BlockManager::kRootNode, t, 1), "internal check failed");
  int32_t b = m.allocate();
  m.register_block(BlockManager::kRootNode, t, b);
  EXPECT_DEATH(m.register_block(BlockManager::kRootNode, t, b), "internal check failed");
}

TEST(BlockManager, LookupHitsOnlyTheSameTokensAfterTheSameParent) {
  BlockManager m(4, 3);
  const int32_t a[3] = {1, 2, 3}, b[3] = {4, 5, 6}, c[3] = {1, 2, 4};
  EXPECT_EQ(m.lookup(BlockManager::kRootNode, a).block, -1);
  const int32_t blk0 = m.allocate();
  const uint64_t n0 = m.register_block(BlockManager::kRootNode, a, blk0);
  ASSERT_NE(n0, BlockManager::kNoNode);
  const int32_t blk1 = m.allocate();
  const uint64_t n1 = m.register_block(n0, b, blk1);
  ASSERT_NE(n1, BlockManager::kNoNode);
  EXPECT_EQ(m.num_cached(), 2);
  // Hits take a reference.
  BlockManager::Hit h = m.lookup(BlockManager::kRootNode, a);
  EXPECT_EQ(h.block, blk0);
  EXPECT_EQ(h.node, n0);
  EXPECT_EQ(m.ref_count(blk0), 2);
  EXPECT_EQ(m.lookup(n0, b).block, blk1);
  EXPECT_EQ(m.ref_count(blk1), 2);
  // Same tokens under another parent, other tokens under the same parent: misses.
  EXPECT_EQ(m.lookup(BlockManager::kRootNode, b).block, -1);
  EXPECT_EQ(m.lookup(n0, c).block, -1);
  EXPECT_EQ(m.lookup(BlockManager::kNoNode, a).block, -1);
  EXPECT_EQ(m.hits(), 2);
  EXPECT_EQ(m.misses(), 4);
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, FirstRegistrationOfAPrefixStays) {
  BlockManager m(4, 2);
  const int32_t t[2] = {7, 8};
  const int32_t first = m.allocate(), second = m.allocate();
  const uint64_t n = m.register_block(BlockManager::kRootNode, t, first);
  EXPECT_EQ(m.register_block(BlockManager::kRootNode, t, second), n);
  EXPECT_TRUE(m.is_cached(first));
  EXPECT_FALSE(m.is_cached(second));
  m.release(second);  // uncached: straight back to free
  EXPECT_EQ(m.num_evictable(), 0);
  m.release(first);  // cached: evictable, contents kept
  EXPECT_EQ(m.num_evictable(), 1);
  EXPECT_EQ(m.num_free(), 4);
  EXPECT_EQ(m.lookup(BlockManager::kRootNode, t).block, first);
  EXPECT_EQ(m.num_evictable(), 0);
  EXPECT_EQ(m.num_free(), 3);
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, ChildOfAnUncachedParentIsNotCached) {
  BlockManager m(2, 2);
  const int32_t t[2] = {1, 1};
  const int32_t b = m.allocate();
  EXPECT_EQ(m.register_block(BlockManager::kNoNode, t, b), BlockManager::kNoNode);
  EXPECT_FALSE(m.is_cached(b));
}

TEST(BlockManager, NeverCachedBlocksGoFirstThenLeastRecentlyReleased) {
  BlockManager m(4, 1);
  int32_t t[4] = {10, 11, 12, 13};
  std::vector<int32_t> b;
  std::vector<uint64_t> nodes;
  for (int i = 0; i < 3; ++i) {
    b.push_back(m.allocate());
    nodes.push_back(m.register_block(BlockManager::kRootNode, &t[i], b.back()));
  }
  // Release in the order 1, 0, 2: the LRU order.
  m.release(b[1]);
  m.release(b[0]);
  m.release(b[2]);
  EXPECT_EQ(m.num_free(), 4);
  EXPECT_EQ(m.num_evictable(), 3);
  // The never-cached block first, without an eviction.
  EXPECT_EQ(m.allocate(), 3);
  EXPECT_EQ(m.evictions(), 0);
  // Reviving block 1 takes it out of the LRU list: 0 is now the oldest.
  EXPECT_EQ(m.lookup(BlockManager::kRootNode, &t[1]).block, b[1]);
  EXPECT_EQ(m.allocate(), b[0]);
  EXPECT_EQ(m.evictions(), 1);
  EXPECT_EQ(m.num_cached(), 2);
  EXPECT_EQ(m.lookup(BlockManager::kRootNode, &t[0]).block, -1) << "an evicted block must not hit";
  EXPECT_EQ(m.allocate(), b[2]);
  EXPECT_EQ(m.allocate(), -1);
  EXPECT_EQ(m.evictions(), 2);
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, HashCollisionsAreMissesNeverWrongBlocks) {
  BlockManager m(4, 2, &constant_hash);
  const int32_t a[2] = {1, 2}, b[2] = {3, 4};
  const int32_t ba = m.allocate();
  const uint64_t na = m.register_block(BlockManager::kRootNode, a, ba);
  ASSERT_NE(na, BlockManager::kNoNode);
  // Other tokens, same hash: the lookup compares the tokens and misses.
  EXPECT_EQ(m.lookup(BlockManager::kRootNode, b).block, -1);
  // Same tokens, same hash, other parent: a miss too.
  EXPECT_EQ(m.lookup(na, a).block, -1);
  // Registering the colliding entry fails (the first keeps the hash) and leaves the block uncached.
  const int32_t bb = m.allocate();
  EXPECT_EQ(m.register_block(BlockManager::kRootNode, b, bb), BlockManager::kNoNode);
  EXPECT_FALSE(m.is_cached(bb));
  EXPECT_EQ(m.lookup(BlockManager::kRootNode, a).block, ba);
  EXPECT_INVARIANTS(m);
}

TEST(BlockManager, CollidingParentsDoNotShareChildren) {
  // Two different first blocks whose hashes collide: only the first is cached. A child registered
  // under the second prefix's (uncached) chain is not reachable from the first's.
  BlockManager m(6, 1, &constant_hash);
  const int32_t x = 5, y = 6, z = 7;
  const int32_t bx = m.allocate(), by = m.allocate();
  const uint64_t nx = m.register_block(BlockManager::kRootNode, &x, bx);
  const uint64_t ny = m.register_block(BlockManager::kRootNode, &y, by);
  EXPECT_EQ(ny, BlockManager::kNoNode);
  const int32_t bz = m.allocate();
  EXPECT_EQ(m.register_block(ny, &z, bz), BlockManager::kNoNode);
  EXPECT_EQ(m.lookup(nx, &z).block, -1);
  EXPECT_INVARIANTS(m);
}

// Random operations on small pools, so that eviction is constant: every invariant after every
// operation, a model of which sequence holds what, and a full pool once everything is released.
TEST(BlockManager, RandomOperationsKeepEveryInvariant) {
  std::mt19937_64 rng(run_seed());
  constexpr int kRuns = 10000;
  int64_t total_hits = 0, total_evictions = 0, lost_collisions = 0;
  for (int run = 0; run < kRuns; ++run) {
    const int64_t num_blocks = 1 + static_cast<int64_t>(rng() % 8);
    const int64_t block_size = 1 + static_cast<int64_t>(rng() % 2);
    // A quarter of the runs hash everything to a few values: collisions all the time.
    const bool collide = rng() % 4 == 0;
    BlockManager m(num_blocks, block_size,
                   collide ? [](uint64_t p, const int32_t* t,
                                int64_t) { return (p + static_cast<uint64_t>(t[0])) % 3; }
                           : &BlockManager::default_hash);
    // Held references, each with the node of the prefix it stands for (kNoNode: none).
    struct Ref {
      int32_t block;
      uint64_t node;
      bool full;  // registered or adopted: contents fixed
    };
    std::vector<Ref> refs;
    // What each live node holds (parent, token), to check that a hit returns exactly that.
    std::map<uint64_t, std::pair<uint64_t, std::vector<int32_t>>> node_content;
    const int num_ops = 1 + static_cast<int>(rng() % 60);
    for (int op = 0; op < num_ops; ++op) {
      const int kind = static_cast<int>(rng() % 4);
      std::vector<int32_t> tokens(static_cast<size_t>(block_size));
      for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 3);
      // A parent: the root, a node some reference holds, or a node that may be gone.
      uint64_t parent = BlockManager::kRootNode;
      if (!refs.empty() && rng() % 2) parent = refs[rng() % refs.size()].node;
      std::string what;
      if (kind == 0) {
        const int64_t free_before = m.num_free();
        const int32_t b = m.allocate();
        what = "allocate -> " + std::to_string(b);
        ASSERT_EQ(b < 0, free_before == 0) << what << ", " << seed_note();
        if (b >= 0) {
          ASSERT_EQ(m.ref_count(b), 1) << seed_note();
          refs.push_back({b, BlockManager::kNoNode, false});
        }
      } else if (kind == 1 && !refs.empty()) {
        const size_t i = rng() % refs.size();
        what = "release " + std::to_string(refs[i].block);
        m.release(refs[i].block);
        refs.erase(refs.begin() + static_cast<std::ptrdiff_t>(i));
      } else if (kind == 2 && !refs.empty()) {
        const size_t i = rng() % refs.size();
        Ref& r = refs[i];
        if (r.full || m.is_cached(r.block)) continue;
        what = "register " + std::to_string(r.block);
        const uint64_t n = m.register_block(parent, tokens.data(), r.block);
        r.full = true;
        if (n == BlockManager::kNoNode && parent != BlockManager::kNoNode) ++lost_collisions;
        if (n != BlockManager::kNoNode) {
          auto [it, fresh] = node_content.try_emplace(n, parent, tokens);
          ASSERT_EQ(it->second, std::make_pair(parent, tokens))
              << "register returned a node of other content, " << seed_note();
          r.node = n;
          (void)fresh;
        }
      } else if (kind == 3) {
        what = "lookup";
        const BlockManager::Hit h = m.lookup(parent, tokens.data());
        if (h.block >= 0) {
          auto it = node_content.find(h.node);
          ASSERT_NE(it, node_content.end()) << seed_note();
          ASSERT_EQ(it->second, std::make_pair(parent, tokens))
              << "a hit returned other content, " << seed_note();
          refs.push_back({h.block, h.node, true});
        }
      } else {
        continue;
      }
      const std::string broken = m.check_invariants();
      ASSERT_EQ(broken, "") << "run " << run << " op " << op << " (" << what << "), "
                            << seed_note();
      // Refcounts agree with the references held.
      std::map<int32_t, int32_t> held;
      for (const Ref& r : refs) ++held[r.block];
      for (int32_t b = 0; b < num_blocks; ++b)
        ASSERT_EQ(m.ref_count(b), held.count(b) ? held[b] : 0)
            << "block " << b << ", " << seed_note();
    }
    for (const Ref& r : refs) m.release(r.block);
    ASSERT_EQ(m.check_invariants(), "") << seed_note();
    ASSERT_EQ(m.num_free(), num_blocks)
        << "run " << run << ": the pool did not return to full, " << seed_note();
    total_hits += m.hits();
    total_evictions += m.evictions();
  }
  // The operation mix must reach the interesting paths.
  EXPECT_GT(total_hits, kRuns / 10) << seed_note();
  EXPECT_GT(total_evictions, kRuns / 10) << seed_note();
  EXPECT_GT(lost_collisions, 0) << seed_note();
  std::printf("%s: %lld hits, %lld evictions, %lld registrations lost to collisions\n",
              seed_note().c_str(), static_cast<long long>(total_hits),
              static_cast<long long>(total_evictions), static_cast<long long>(lost_collisions));
}

}  // namespace
}  // namespace roofline
