// KvCache allocation.
#include "runtime/kv_cache.h"

#include <algorithm>
#include <limits>
#include <new>

namespace roofline {

StatusOr<KvCache> KvCache::allocate(const KvCacheShape& shape, Fill fill) {
  if (shape.num_blocks <= 0 || shape.block_size <= 0)
    return invalid_argument("the KV cache needs at least one block of at least one token");
  KvCache cache;
  cache.shape_ = shape;
  const size_t n = static_cast<size_t>(2 * shape.num_layers * shape.elements_per_layer());
  // calloc: large blocks come straight from the kernel as zero pages, committed on first write.
  cache.storage_.reset(static_cast<float*>(std::calloc(n, sizeof(float))));
  if (!cache.storage_)
    return resource_exhausted("cannot allocate " + std::to_string(shape.total_bytes() >> 20) +
                              " MiB for the KV cache: lower --kv-cache-tokens or --kv-memory");
  if (fill == Fill::kPoison)
    std::fill_n(cache.storage_.get(), n, std::numeric_limits<float>::quiet_NaN());
  return cache;
}

}  // namespace roofline
