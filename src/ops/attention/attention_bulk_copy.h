// When a CUDA attention kernel may read paged K/V by bulk tensor copies (TMA: one box of
// kKvBulkCopyKeys keys x 64 dims from a tensor map over each cache, attention_kv_maps.cuh) instead
// of 16-byte cp.async: the decode kernel does (attention_decode_cuda.cu); the prefill kernel's
// producer measured slower that way and gathers with cp.async
// (bench/results/2026-12-01-decode-attention-bulk-copies.md). A pure host predicate, tested on the
// CPU (attention_decode_plan_test.cc).
#pragma once

#include <cstdint>

namespace roofline {

// Keys of one box: the decode kernel's stage.
inline constexpr int64_t kKvBulkCopyKeys = 16;

// Every run of kKvBulkCopyKeys keys a kernel copies must lie in one page and start at a multiple
// of kKvBulkCopyKeys: pages of a power-of-two size >= 16 and no sliding window (whose key ranges
// start anywhere); head_dim a multiple of 64 (a box is 64 dims); and the caches' slots
// (num_blocks x block_size) within the copy engine's 32-bit coordinates.
inline bool paged_kv_takes_bulk_copies(int64_t block_size, int64_t sliding_window, int64_t head_dim,
                                       int64_t num_blocks) {
  const bool pow2_pages = block_size >= kKvBulkCopyKeys && (block_size & (block_size - 1)) == 0;
  return pow2_pages && sliding_window <= 0 && head_dim >= 64 && head_dim % 64 == 0 &&
         num_blocks > 0 && num_blocks <= (int64_t{1} << 31) / block_size - 1;
}

}  // namespace roofline
