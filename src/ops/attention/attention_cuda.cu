// paged_attention_cuda: causal (or tree-masked) GQA attention over a paged bf16 KV cache for a
// ragged batch (prefill, chunked prefill and decode in one call), exactly the computation of
// paged_attention_cpu. This file checks the call and routes it:
// - causal batches whose sequences bring at most kDecodeMaxQueries (8) queries each: the split-K
//   decode kernel (attention_decode_cuda.cu), memory bound;
// - the rest, and every tree-masked batch: the tensor-core FlashAttention kernel
//   (attention_prefill_cuda.cu), compute bound.
#include <algorithm>
#include <climits>
#include <cstdint>

#include "core/check.h"
#include "ops/attention/attention.h"
#include "ops/attention/attention_decode_plan.h"
#include "ops/attention/attention_prefill_plan.h"

namespace roofline {

namespace {

bool aligned_16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace

void paged_attention_cuda(const PagedAttentionParams& p, CudaStream stream) {
  ROOFLINE_CHECK(p.num_seqs >= 0 && p.num_tokens >= 0);
  ROOFLINE_CHECK(p.num_heads > 0 && p.num_kv_heads > 0 && p.num_heads % p.num_kv_heads == 0);
  ROOFLINE_CHECK(p.head_dim > 0 && p.block_size > 0 && p.max_blocks_per_seq > 0);
  ROOFLINE_CHECK(p.sliding_window >= 0 && p.sliding_window <= INT_MAX);
  ROOFLINE_CHECK(p.dtype == DType::kBF16 && p.kv_dtype == DType::kBF16);
  if (p.num_tokens == 0) return;
  ROOFLINE_CHECK(p.num_seqs > 0 && p.num_tokens >= p.num_seqs);  // every sequence has a query
  ROOFLINE_CHECK(p.num_blocks > 0);
  ROOFLINE_CHECK(p.num_heads <= INT_MAX && p.max_blocks_per_seq * p.block_size <= INT_MAX);
  ROOFLINE_CHECK(p.q != nullptr && p.k_cache != nullptr && p.v_cache != nullptr &&
                 p.block_tables != nullptr && p.seq_lens != nullptr && p.query_start != nullptr &&
                 p.out != nullptr);
  // 16-byte vector accesses to q, out and the cache rows.
  ROOFLINE_CHECK(aligned_16(p.q) && aligned_16(p.out) && aligned_16(p.k_cache) &&
                 aligned_16(p.v_cache));
  ROOFLINE_CHECK_MSG(paged_attention_cuda_supports_head_dim(p.head_dim),
                     "paged_attention_cuda: head_dim must be 32, 64, 128 or 256");
  // Each sequence has >= 1 query, so none has more than num_tokens - num_seqs + 1.
  int64_t max_q_len = p.max_q_len > 0 ? p.max_q_len : p.num_tokens - p.num_seqs + 1;
  ROOFLINE_CHECK(max_q_len <= p.num_tokens - p.num_seqs + 1);
  if (p.tree_mask != nullptr) {
    // A tree-masked sequence brings at most kTreeMaxQueries queries (the kernel traps otherwise).
    max_q_len = std::min(max_q_len, kTreeMaxQueries);
  } else if (max_q_len <= kDecodeMaxQueries) {
    const int64_t max_seq_len =
        p.max_seq_len > 0 ? p.max_seq_len : p.max_blocks_per_seq * p.block_size;
    ROOFLINE_CHECK(max_seq_len <= p.max_blocks_per_seq * p.block_size);
    paged_attention_decode_cuda(p, max_q_len, max_seq_len, stream);
    return;
  }
  paged_attention_prefill_cuda(p, max_q_len, stream);
}

}  // namespace roofline
