// The paged KV caches as tensor maps for bulk tensor copies (attention_bulk_copy.h says when a
// launch may use them). Include only from .cu files.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <mutex>

#include "core/log.h"
#include "ops/attention/attention.h"
#include "ops/attention/attention_bulk_copy.h"
#include "ops/common/cuda_tensor_map.cuh"

namespace roofline {

// Each cache [slots][num_kv_heads][head_dim] bf16 viewed as [slots][num_kv_heads * head_dim /
// 64][64]: a box of kKvBulkCopyKeys slots x one 64-dim block of one head, 16 x 128 bytes in the
// copy engine's 128-byte swizzle (chunk c of key k at c ^ (k mod 8): the layout the kernels'
// ldmatrix and wgmma reads expect). Passed by value as a __grid_constant__ kernel parameter.
struct PagedKvMaps {
  CUtensorMap k;
  CUtensorMap v;
};

// Encodes p's caches into `maps` where paged_kv_takes_bulk_copies allows it. False otherwise, or
// where the driver refuses (said once on the log): the caller's kernels then copy with cp.async.
// No L2 promotion: a box's rows are single 128-byte lines, and promoting each to 256 bytes made L2
// fetch the other half of the key's row, which the next box reads anyway, as a second request
// (H200 decode, B=64 L=4096: 95.7 % of the copy ceiling with 256-byte promotion, 100.6 % without;
// bench/results/2026-12-01-decode-attention-bulk-copies.md).
inline bool encode_paged_kv_maps(const PagedAttentionParams& p, PagedKvMaps* maps) {
  if (!paged_kv_takes_bulk_copies(p.block_size, p.sliding_window, p.head_dim, p.num_blocks))
    return false;
  const uint64_t dims[3] = {64, static_cast<uint64_t>(p.num_kv_heads * p.head_dim / 64),
                            static_cast<uint64_t>(p.num_blocks * p.block_size)};
  const uint64_t slot_bytes = static_cast<uint64_t>(p.num_kv_heads * p.head_dim) * 2;
  const uint32_t box[3] = {64, 1, static_cast<uint32_t>(kKvBulkCopyKeys)};
  constexpr auto kPromotion = CU_TENSOR_MAP_L2_PROMOTION_NONE;
  if (cuda::encode_bf16_tensor_map_3d(&maps->k, p.k_cache, dims, 128, slot_bytes, box,
                                      kPromotion) &&
      cuda::encode_bf16_tensor_map_3d(&maps->v, p.v_cache, dims, 128, slot_bytes, box, kPromotion))
    return true;
  static std::once_flag warned;
  std::call_once(warned, [] {
    ROOFLINE_LOG(kWarning,
                 "paged attention: the driver would not encode tensor maps of the KV cache; the "
                 "attention kernels copy K/V with cp.async instead");
  });
  return false;
}

}  // namespace roofline
