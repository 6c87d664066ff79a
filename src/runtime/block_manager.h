// BlockManager: the KV-cache block pool with reference counts and a prefix cache of full blocks.
//
// Host-only bookkeeping, no backend knowledge. Each block is in exactly one of three states:
//   free        refcount 0, not cached: handed out first by allocate();
//   referenced  refcount > 0 (held by one or more sequences), cached or not;
//   evictable   refcount 0 and cached: its KV stays valid and a lookup can revive it; allocate()
//               reuses these, least recently released first, once no free block is left.
//
// Prefix cache. A cached block is a node of a trie: (parent node, the block's block_size token
// ids). Every registration gets a fresh node id that is never reused; the root's is kRootNode. The
// map key is the chained hash XXH3(tokens, seed = parent node id); a lookup compares the stored
// parent node id and token ids too, so a 64-bit hash collision is a miss, never wrong KV. Chaining
// on node ids rather than on parent hashes makes the match exact for the whole prefix: two
// different prefixes whose hashes collide are still different parent nodes. A child whose parent
// was evicted becomes unreachable (no walk can produce the dead parent id) and simply ages out of
// the LRU list.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace roofline {

class BlockManager {
 public:
  // Parent node of a sequence's first block.
  static constexpr uint64_t kRootNode = 0;
  // "Not in the cache": a register that lost to a hash collision; children of it are not cached.
  static constexpr uint64_t kNoNode = ~uint64_t{0};

  // The map key of a block; replaceable so tests can force collisions.
  using HashFn = uint64_t (*)(uint64_t parent_node, const int32_t* tokens, int64_t num_tokens);
  static uint64_t default_hash(uint64_t parent_node, const int32_t* tokens, int64_t num_tokens);

  BlockManager() : BlockManager(0, 1) {}
  BlockManager(int64_t num_blocks, int64_t block_size, HashFn hash = &default_hash);

  // A block with refcount 1: a free one (lowest id first), else the least recently released
  // evictable one (unregistering it, counted as an eviction), else -1.
  int32_t allocate();
  // Drops one reference; at 0 the block becomes free, or evictable (most recent) when cached.
  void release(int32_t block);

  struct Hit {
    int32_t block = -1;  // -1: miss
    uint64_t node = kNoNode;
  };
  // The cached block holding `tokens` (block_size ids) after `parent_node`. A hit takes a reference
  // (an evictable block leaves the LRU list) and counts a hit; a miss counts a miss.
  Hit lookup(uint64_t parent_node, const int32_t* tokens);
  // Caches `block` (referenced, full, not yet cached) as holding `tokens` after `parent_node`.
  // Returns the node that now stands for this prefix: the new one, or the existing equal entry's
  // (the first block registered for a prefix stays; `block` then remains uncached), or kNoNode when
  // the parent is kNoNode or a different entry already owns the hash (a collision).
  uint64_t register_block(uint64_t parent_node, const int32_t* tokens, int32_t block);

  int64_t num_blocks() const { return static_cast<int64_t>(blocks_.size()); }
  int64_t block_size() const { return block_size_; }
  // Allocatable now: free plus evictable.
  int64_t num_free() const { return static_cast<int64_t>(free_.size()) + lru_size_; }
  int64_t num_cached() const { return static_cast<int64_t>(index_.size()); }
  int64_t num_evictable() const { return lru_size_; }
  int32_t ref_count(int32_t block) const;
  bool is_cached(int32_t block) const;
  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }
  int64_t evictions() const { return evictions_; }

  // Empty when every invariant holds, else the first violation: refcounts >= 0; every block in
  // exactly one of free / referenced / evictable; the LRU list is exactly the evictable blocks;
  // the hash index is exactly the cached blocks.
  std::string check_invariants() const;

 private:
  struct Block {
    int32_t ref_count = 0;
    bool cached = false;
    bool in_free = false;
    int32_t lru_prev = -1, lru_next = -1;  // valid while evictable
    uint64_t hash = 0;                     // valid while cached
    uint64_t node = kNoNode;
    uint64_t parent_node = kNoNode;
    std::vector<int32_t> tokens;  // [block_size], while cached
  };

  void lru_push_back(int32_t b);
  void lru_remove(int32_t b);
  void uncache(int32_t b);

  int64_t block_size_;
  HashFn hash_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;              // a stack; lowest id on top
  int32_t lru_head_ = -1, lru_tail_ = -1;  // head: least recently released
  int64_t lru_size_ = 0;
  std::unordered_map<uint64_t, int32_t> index_;  // hash -> cached block
  uint64_t next_node_ = 1;
  int64_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

}  // namespace roofline
