// qkv_rope: post-processing of the fused q|k|v projection, in one pass per token:
//   optional per-head RMSNorm of q and k (Qwen3), rotary position embedding of q and k
//   (rotate-half / NeoX layout, as Hugging Face's Llama), then the write of k and v into the paged
//   KV cache through the slot map. Rotated queries go to q_out for attention.
// Bias (Qwen2) is applied earlier, by matmul_bias.
//
// Element types: qkv and q_out are in dtype, the caches in kv_dtype: f32 for both on the CPU
// backend; bf16 (or f32) on the CUDA backend, with f32 math (norm, cos/sin with precise sincosf,
// rotation) and one rounding of each result. inv_freq stays f32.
#pragma once

#include <cstdint>

#include "core/cuda_stream.h"
#include "core/dtype.h"

namespace roofline {

struct QkvRopeParams {
  const void* qkv = nullptr;              // [num_tokens, (num_heads + 2 * num_kv_heads) * head_dim]
                                          // in dtype
  void* q_out = nullptr;                  // [num_tokens, num_heads * head_dim] in dtype
  const int32_t* positions = nullptr;     // [num_tokens], position of each token in its sequence
  const int64_t* slot_mapping = nullptr;  // [num_tokens], block * block_size + offset; < 0: skip
  void* k_cache = nullptr;          // [num_blocks, block_size, num_kv_heads, head_dim] kv_dtype
  void* v_cache = nullptr;          // [num_blocks, block_size, num_kv_heads, head_dim] kv_dtype
  const float* inv_freq = nullptr;  // [head_dim / 2], frequencies after any scaling
  // Per-head RMSNorm weights, both set or both null (the kernel family's one optional stage).
  const void* q_norm_weight = nullptr;  // [head_dim] in norm_weight_dtype
  const void* k_norm_weight = nullptr;  // [head_dim] in norm_weight_dtype
  DType norm_weight_dtype = DType::kF32;
  float norm_eps = 1e-6f;
  int64_t num_tokens = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // even
  int64_t block_size = 0;
  int64_t num_blocks = 0;
  DType dtype = DType::kF32;     // of qkv and q_out
  DType kv_dtype = DType::kF32;  // of k_cache and v_cache
};

// CPU backend: dtype == kv_dtype == kF32. A slot beyond the cache aborts.
void qkv_rope_cpu(const QkvRopeParams& p);
// CUDA backend: dtype and kv_dtype kBF16 or kF32, every pointer on the device. Asynchronous on
// `stream`. A slot beyond the cache (a scheduler bug) is skipped on the device: a kernel cannot
// abort cleanly, and writing it would corrupt memory.
void qkv_rope_cuda(const QkvRopeParams& p, CudaStream stream);

}  // namespace roofline
