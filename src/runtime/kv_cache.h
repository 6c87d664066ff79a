// The paged KV cache of the CPU backend (blocks are handed out by BlockManager, block_manager.h).
//
// Every layer has a K and a V pool of num_blocks blocks of block_size token slots, laid out
// [num_blocks, block_size, num_kv_heads, head_dim]; a sequence owns a list of blocks (its block
// table) and token p of it lives in slot block_table[p / block_size] * block_size + p % block_size.
// The same layout is used on the GPU, so block tables and slot maps are backend-independent.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "roofline/status.h"

namespace roofline {

struct KvCacheShape {
  int64_t num_layers = 0;
  int64_t num_blocks = 0;
  int64_t block_size = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;

  int64_t elements_per_layer() const { return num_blocks * block_size * num_kv_heads * head_dim; }
  // K and V, all layers, f32.
  int64_t total_bytes() const { return 2 * num_layers * elements_per_layer() * 4; }
};

class KvCache {
 public:
  // kZeroOnDemand: zeroed pages the OS commits as they are first written, so a large pool costs
  // nothing at start-up (filling 1 GiB took 1.2 s of the default model's 1.7 s to first token on
  // the 2-core machine). kPoison: every slot NaN up front, so a read of a slot nothing wrote shows
  // up in the logits instead of passing for zeros; the tests run with it (ROOFLINE_POISON_KV=1).
  enum class Fill { kZeroOnDemand, kPoison };
  static StatusOr<KvCache> allocate(const KvCacheShape& shape, Fill fill);
  const KvCacheShape& shape() const { return shape_; }
  float* k(int64_t layer) { return storage_.get() + (2 * layer) * shape_.elements_per_layer(); }
  float* v(int64_t layer) { return storage_.get() + (2 * layer + 1) * shape_.elements_per_layer(); }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  KvCacheShape shape_;
  std::unique_ptr<float, Free> storage_;
};

}  // namespace roofline
