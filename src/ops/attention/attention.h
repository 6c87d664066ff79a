// attention: causal, grouped-query attention over a paged KV cache, for a ragged batch in which
// every sequence contributes q_len >= 1 new tokens (prefill, chunked prefill and decode are one op).
// Query j of sequence s sits at position seq_lens[s] - q_len + j and attends to cached positions
// [max(0, pos - window + 1), pos]. K/V are found through the sequence's block table.
#pragma once

#include <cstdint>

namespace roofline {

struct PagedAttentionParams {
  const float* q = nullptr;             // [num_tokens, num_heads, head_dim]
  const float* k_cache = nullptr;       // [num_blocks, block_size, num_kv_heads, head_dim]
  const float* v_cache = nullptr;       // [num_blocks, block_size, num_kv_heads, head_dim]
  const int32_t* block_tables = nullptr;// [num_seqs, max_blocks_per_seq]
  const int32_t* seq_lens = nullptr;    // [num_seqs], cached tokens incl. this step's
  const int32_t* query_start = nullptr; // [num_seqs + 1], offsets of each sequence's queries in q
  float* out = nullptr;                 // [num_tokens, num_heads, head_dim]
  int64_t num_seqs = 0;
  int64_t num_tokens = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;             // divides num_heads
  int64_t head_dim = 0;
  int64_t block_size = 0;
  int64_t max_blocks_per_seq = 0;
  float scale = 1.0f;                   // usually 1/sqrt(head_dim)
  int64_t sliding_window = 0;           // 0: unlimited
};

void paged_attention_cpu(const PagedAttentionParams& p);

}  // namespace roofline
