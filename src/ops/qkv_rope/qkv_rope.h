// qkv_rope: post-processing of the fused q|k|v projection, in one pass per token:
//   optional per-head RMSNorm of q and k (Qwen3), rotary position embedding of q and k
//   (rotate-half / NeoX layout, as Hugging Face's Llama), then the write of k and v into the paged
//   KV cache through the slot map. Rotated queries go to q_out for attention.
// Bias (Qwen2) is applied earlier, by matmul_bias.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace roofline {

struct QkvRopeParams {
  const float* qkv = nullptr;            // [num_tokens, (num_heads + 2 * num_kv_heads) * head_dim]
  float* q_out = nullptr;                // [num_tokens, num_heads * head_dim]
  const int32_t* positions = nullptr;    // [num_tokens], position of each token in its sequence
  const int64_t* slot_mapping = nullptr; // [num_tokens], block * block_size + offset; < 0: skip
  float* k_cache = nullptr;              // [num_blocks, block_size, num_kv_heads, head_dim]
  float* v_cache = nullptr;              // [num_blocks, block_size, num_kv_heads, head_dim]
  const float* inv_freq = nullptr;       // [head_dim / 2], frequencies after any scaling
  // Per-head RMSNorm weights, both set or both null (the kernel family's one optional stage).
  const void* q_norm_weight = nullptr;   // [head_dim]
  const void* k_norm_weight = nullptr;   // [head_dim]
  DType norm_weight_dtype = DType::kF32;
  float norm_eps = 1e-6f;
  int64_t num_tokens = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;                  // even
  int64_t block_size = 0;
  int64_t num_blocks = 0;
};

void qkv_rope_cpu(const QkvRopeParams& p);

}  // namespace roofline
