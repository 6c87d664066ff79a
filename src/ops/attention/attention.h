// attention: causal, grouped-query attention over a paged KV cache, for a ragged batch in which
// every sequence contributes q_len >= 1 new tokens (prefill, chunked prefill and decode are one
// op). Query j of sequence s sits at position seq_lens[s] - q_len + j and attends to cached
// positions [max(0, pos - window + 1), pos]. K/V are found through the sequence's block table.
//
// Element types: the CPU backend takes f32 activations and an f32 cache; the CUDA backend takes
// bf16 for both (dtype, kv_dtype), with fp32 softmax state and accumulation.
#pragma once

#include <cstdint>

#include "core/cuda_stream.h"
#include "core/dtype.h"

namespace roofline {

// Queries a sequence may bring with a tree mask: one 64-bit word of draft-token bits per query.
inline constexpr int64_t kTreeMaxQueries = 64;

struct PagedAttentionParams {
  const void* q = nullptr;        // [num_tokens, num_heads, head_dim] in dtype
  const void* k_cache = nullptr;  // [num_blocks, block_size, num_kv_heads, head_dim] in kv_dtype
  const void* v_cache = nullptr;  // [num_blocks, block_size, num_kv_heads, head_dim] in kv_dtype
  const int32_t* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq]
  const int32_t* seq_lens = nullptr;      // [num_seqs], cached tokens incl. this step's
  const int32_t* query_start = nullptr;   // [num_seqs + 1], offsets of each sequence's queries in q
  void* out = nullptr;                    // [num_tokens, num_heads, head_dim] in dtype
  DType dtype = DType::kF32;              // of q and out
  DType kv_dtype = DType::kF32;           // of k_cache and v_cache
  int64_t num_seqs = 0;
  int64_t num_tokens = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // divides num_heads
  int64_t head_dim = 0;
  int64_t block_size = 0;
  int64_t max_blocks_per_seq = 0;
  int64_t num_blocks = 0;      // physical blocks in the cache; 0: block ids unchecked (CPU)
  float scale = 1.0f;          // usually 1/sqrt(head_dim)
  int64_t sliding_window = 0;  // 0: unlimited
  // Tree verification (speculative decoding); null: causal. Otherwise [num_tokens] words: bit j of
  // query t's word set = query t attends to query j of its own sequence (the draft token at
  // position seq_len - q_len + j). The cached prefix (positions < seq_len - q_len) is attended in
  // full, within sliding_window of the query's own position. Every sequence then brings at most
  // kTreeMaxQueries queries, and every query attends at least one key (its own bit, normally).
  const uint64_t* tree_mask = nullptr;
  // Bounds the host knows (the CUDA launcher sizes its grid with them; the CPU twin ignores them).
  // 0: unknown, replaced by the loosest bound: num_tokens - num_seqs + 1 queries,
  // max_blocks_per_seq * block_size keys. A bound below the truth is a caller bug.
  int64_t max_q_len = 0;    // most queries any sequence brings this step
  int64_t max_seq_len = 0;  // longest seq_len in the batch
  // CUDA only: paged_attention_cuda_workspace_bytes() of device memory, zero-filled once before
  // its first use (the kernel leaves it ready for the next call). Calls on one stream may share it.
  void* workspace = nullptr;
};

// CPU backend: dtype == kv_dtype == kF32.
void paged_attention_cpu(const PagedAttentionParams& p);

// CUDA backend: dtype == kv_dtype == kBF16, head_dim in {32, 64, 128, 256}, num_blocks > 0, every
// pointer on the device, workspace set. Asynchronous on `stream`; launches nothing when
// num_tokens == 0. Causal batches whose sequences bring at most 8 queries each (decode) take the
// split-K decode kernel (attention_decode_cuda.cu); the others, and every tree-masked batch, the
// tensor-core FlashAttention kernel (attention_prefill_cuda.cu).
void paged_attention_cuda(const PagedAttentionParams& p, CudaStream stream);

// Bytes of the workspace paged_attention_cuda needs, for any shape (a pure host function).
int64_t paged_attention_cuda_workspace_bytes();

// The head dims paged_attention_cuda has kernels for; the CUDA backend asks before loading a model
// so an unsupported one is a clear error instead of an abort mid-step. A pure host function
// (defined with the kernels' dispatch table, available in CPU-only builds too).
bool paged_attention_cuda_supports_head_dim(int64_t head_dim);

}  // namespace roofline
