// KvCache allocation and the block free list.
#include "runtime/kv_cache.h"

#include <limits>
#include <new>

#include "core/check.h"

namespace roofline {

StatusOr<KvCache> KvCache::allocate(const KvCacheShape& shape) {
  if (shape.num_blocks <= 0 || shape.block_size <= 0)
    return invalid_argument("the KV cache needs at least one block of at least one token");
  KvCache cache;
  cache.shape_ = shape;
  try {
    // Poisoned with NaN: a read of a slot nothing wrote shows up in the logits instead of
    // silently reading zeros.
    cache.storage_.assign(static_cast<size_t>(2 * shape.num_layers * shape.elements_per_layer()),
                          std::numeric_limits<float>::quiet_NaN());
  } catch (const std::bad_alloc&) {
    return resource_exhausted("cannot allocate " + std::to_string(shape.total_bytes() >> 20) +
                              " MiB for the KV cache: lower --kv-cache-tokens");
  }
  return cache;
}

BlockAllocator::BlockAllocator(int64_t num_blocks) : num_blocks_(num_blocks), in_use_(num_blocks) {
  free_.reserve(static_cast<size_t>(num_blocks));
  // Handed out from the low ids up.
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

int32_t BlockAllocator::allocate() {
  if (free_.empty()) return -1;
  int32_t b = free_.back();
  free_.pop_back();
  in_use_[b] = true;
  return b;
}

void BlockAllocator::release(int32_t block) {
  ROOFLINE_CHECK(block >= 0 && block < num_blocks_ && in_use_[block]);
  in_use_[block] = false;
  free_.push_back(block);
}

}  // namespace roofline
