// BlockManager: reference counts, the free stack, the LRU list of evictable cached blocks and the
// prefix-cache index (see block_manager.h).
#include "runtime/block_manager.h"

#include <algorithm>

#include "core/check.h"

// Header-only: the GPU host has the header (scripts/stage_deps.sh) but not the library.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace roofline {

uint64_t BlockManager::default_hash(uint64_t parent_node, const int32_t* tokens,
                                    int64_t num_tokens) {
  return XXH3_64bits_withSeed(tokens, static_cast<size_t>(num_tokens) * sizeof(int32_t),
                              parent_node);
}

BlockManager::BlockManager(int64_t num_blocks, int64_t block_size, HashFn hash)
    : block_size_(block_size), hash_(hash), blocks_(static_cast<size_t>(num_blocks)) {
  ROOFLINE_CHECK(num_blocks >= 0 && num_blocks <= INT32_MAX && block_size > 0);
  free_.reserve(static_cast<size_t>(num_blocks));
  for (int64_t b = num_blocks - 1; b >= 0; --b) {
    free_.push_back(static_cast<int32_t>(b));
    blocks_[b].in_free = true;
  }
}

int32_t BlockManager::allocate() {
  int32_t b = -1;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
    blocks_[b].in_free = false;
  } else if (lru_head_ >= 0) {
    b = lru_head_;
    lru_remove(b);
    uncache(b);
    ++evictions_;
  } else {
    return -1;
  }
  ROOFLINE_CHECK(blocks_[b].ref_count == 0 && !blocks_[b].cached);
  blocks_[b].ref_count = 1;
  return b;
}

void BlockManager::release(int32_t block) {
  ROOFLINE_CHECK(block >= 0 && block < num_blocks() && blocks_[block].ref_count > 0);
  Block& k = blocks_[block];
  if (--k.ref_count > 0) return;
  if (k.cached) {
    lru_push_back(block);
  } else {
    k.in_free = true;
    free_.push_back(block);
  }
}

BlockManager::Hit BlockManager::lookup(uint64_t parent_node, const int32_t* tokens) {
  if (parent_node != kNoNode) {
    auto it = index_.find(hash_(parent_node, tokens, block_size_));
    if (it != index_.end()) {
      Block& k = blocks_[it->second];
      if (k.parent_node == parent_node && std::equal(k.tokens.begin(), k.tokens.end(), tokens)) {
        if (k.ref_count == 0) lru_remove(it->second);
        ++k.ref_count;
        ++hits_;
        return Hit{it->second, k.node};
      }
    }
  }
  ++misses_;
  return Hit{};
}

uint64_t BlockManager::register_block(uint64_t parent_node, const int32_t* tokens, int32_t block) {
  ROOFLINE_CHECK(block >= 0 && block < num_blocks());
  Block& k = blocks_[block];
  ROOFLINE_CHECK(k.ref_count > 0 && !k.cached);
  if (parent_node == kNoNode) return kNoNode;
  const uint64_t h = hash_(parent_node, tokens, block_size_);
  auto [it, inserted] = index_.try_emplace(h, block);
  if (!inserted) {
    const Block& first = blocks_[it->second];
    const bool same = first.parent_node == parent_node &&
                      std::equal(first.tokens.begin(), first.tokens.end(), tokens);
    return same ? first.node : kNoNode;
  }
  k.cached = true;
  k.hash = h;
  k.node = next_node_++;
  k.parent_node = parent_node;
  k.tokens.assign(tokens, tokens + block_size_);
  return k.node;
}

int32_t BlockManager::ref_count(int32_t block) const {
  ROOFLINE_CHECK(block >= 0 && block < num_blocks());
  return blocks_[block].ref_count;
}

bool BlockManager::is_cached(int32_t block) const {
  ROOFLINE_CHECK(block >= 0 && block < num_blocks());
  return blocks_[block].cached;
}

void BlockManager::lru_push_back(int32_t b) {
  Block& k = blocks_[b];
  k.lru_prev = lru_tail_;
  k.lru_next = -1;
  if (lru_tail_ >= 0)
    blocks_[lru_tail_].lru_next = b;
  else
    lru_head_ = b;
  lru_tail_ = b;
  ++lru_size_;
}

void BlockManager::lru_remove(int32_t b) {
  Block& k = blocks_[b];
  if (k.lru_prev >= 0)
    blocks_[k.lru_prev].lru_next = k.lru_next;
  else
    lru_head_ = k.lru_next;
  if (k.lru_next >= 0)
    blocks_[k.lru_next].lru_prev = k.lru_prev;
  else
    lru_tail_ = k.lru_prev;
  k.lru_prev = k.lru_next = -1;
  --lru_size_;
}

void BlockManager::uncache(int32_t b) {
  Block& k = blocks_[b];
  auto it = index_.find(k.hash);
  ROOFLINE_CHECK(it != index_.end() && it->second == b);
  index_.erase(it);
  k.cached = false;
  k.node = kNoNode;
  k.parent_node = kNoNode;
  k.tokens.clear();
}

std::string BlockManager::check_invariants() const {
  const int64_t n = num_blocks();
  auto at = [](int64_t b) { return "block " + std::to_string(b) + ": "; };
  // 0: unseen, 1: free stack, 2: LRU list.
  std::vector<int8_t> place(static_cast<size_t>(n), 0);
  for (int32_t b : free_) {
    if (b < 0 || b >= n) return "free stack holds id " + std::to_string(b);
    if (place[b] != 0) return at(b) + "twice in the free stack";
    place[b] = 1;
  }
  int64_t lru_count = 0;
  for (int32_t b = lru_head_, prev = -1; b >= 0; prev = b, b = blocks_[b].lru_next) {
    if (b >= n) return "LRU list holds id " + std::to_string(b);
    if (place[b] != 0)
      return at(b) + (place[b] == 1 ? "both free and in the LRU list" : "twice in the LRU list");
    if (blocks_[b].lru_prev != prev) return at(b) + "LRU back link broken";
    place[b] = 2;
    if (++lru_count > n) return "LRU list has a cycle";
  }
  if (lru_count != lru_size_)
    return "LRU size " + std::to_string(lru_size_) + " but " + std::to_string(lru_count) +
           " linked";
  if ((lru_head_ < 0) != (lru_tail_ < 0) || (lru_tail_ >= 0 && blocks_[lru_tail_].lru_next != -1))
    return "LRU tail broken";
  int64_t num_free = 0, num_referenced = 0, num_evictable = 0, num_cached = 0;
  for (int64_t b = 0; b < n; ++b) {
    const Block& k = blocks_[b];
    if (k.ref_count < 0) return at(b) + "negative refcount";
    if (k.in_free != (place[b] == 1)) return at(b) + "in_free flag disagrees with the free stack";
    if (k.ref_count > 0) {
      if (place[b] != 0) return at(b) + "referenced but free or evictable";
      ++num_referenced;
    } else if (k.cached) {
      if (place[b] != 2) return at(b) + "cached, unreferenced and not in the LRU list";
      ++num_evictable;
    } else {
      if (place[b] != 1) return at(b) + "unreferenced, uncached and not free";
      ++num_free;
    }
    if (k.cached) {
      ++num_cached;
      auto it = index_.find(k.hash);
      if (it == index_.end() || it->second != b)
        return at(b) + "cached but not indexed under its hash";
      if (static_cast<int64_t>(k.tokens.size()) != block_size_)
        return at(b) + "cached with the wrong token count";
      if (k.node == kNoNode || k.node == kRootNode || k.node >= next_node_)
        return at(b) + "bad node id";
    }
  }
  if (num_free + num_referenced + num_evictable != n)
    return "block states do not add up to the pool";
  if (num_cached != static_cast<int64_t>(index_.size()))
    return "index holds " + std::to_string(index_.size()) + " entries for " +
           std::to_string(num_cached) + " cached blocks";
  return {};
}

}  // namespace roofline
