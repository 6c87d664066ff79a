// KvCache allocation.
#include "runtime/kv_cache.h"

#include <limits>
#include <new>

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

}  // namespace roofline
