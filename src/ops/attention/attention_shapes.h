// Shapes shared by the attention test and benchmark, and the builder that lays a batch's K/V out
// in a paged cache (contiguously, or with its pages scattered in a given order).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ops/attention/attention.h"

namespace roofline {

struct AttentionSeq {
  int64_t seq_len;  // cached tokens including this step's
  int64_t q_len;    // this step's queries, <= seq_len
};

struct AttentionShape {
  std::vector<AttentionSeq> seqs;
  int64_t num_heads;
  int64_t num_kv_heads;
  int64_t head_dim;
  int64_t block_size;
  int64_t sliding_window;  // 0: unlimited
};

// Awkward cases for correctness: GQA ratios 1, 4 and 7, block sizes 1, 5 and 16 with partly filled
// last pages, chunked prefill (q_len < seq_len), decode, sliding windows, odd batch sizes.
inline std::vector<AttentionShape> attention_test_shapes() {
  return {
      {{{1, 1}}, 4, 4, 16, 16, 0},
      {{{19, 19}}, 4, 4, 16, 16, 0},
      {{{7, 7}, {33, 1}, {20, 3}}, 8, 2, 32, 5, 0},
      {{{3, 3}, {1, 1}, {12, 1}}, 7, 1, 64, 1, 0},
      {{{40, 40}, {25, 1}, {17, 5}}, 4, 1, 16, 5, 4},
      {{{40, 13}, {64, 1}}, 8, 2, 32, 16, 16},
      {{{5, 2}, {9, 9}, {30, 1}, {2, 1}, {47, 11}}, 14, 2, 64, 16, 0},
      {{{733, 733}}, 2, 1, 64, 16, 0},
      {{{733, 1}}, 7, 7, 128, 5, 100},
  };
}

// Real-model shapes for timing (Llama-3-8B heads: 32 q, 8 kv, head_dim 128, pages of 16).
inline std::vector<AttentionShape> attention_bench_shapes() {
  return {
      {{{1024, 1}}, 32, 8, 128, 16, 0},
      {{{512, 1}, {512, 1}, {512, 1}, {512, 1}, {512, 1}, {512, 1}, {512, 1}, {512, 1}},
       32,
       8,
       128,
       16,
       0},
      {{{4096, 1}}, 32, 8, 128, 16, 0},
      {{{256, 256}}, 32, 8, 128, 16, 0},
  };
}

// The CUDA kernel's cases (head_dim 32, 64, 128, 256): contexts 1, 15, 16, 17, 255, 1000 and 4097
// (around a 16-token page and the kernels' tiles); batches of 1, 3 and 7 mixing decode,
// prefill and chunked prefill in one launch; decode-only batches (the kernel's decode
// configuration); GQA ratios 1, 4 and 7 (32/8, 28/4, 14/2, 7/7) and 16 and 40 (query heads split
// over several blocks; 16 also at head_dim 128, where the prefill kernel's row walks step eight
// rows within one token); block sizes 1, 5, 16, 32 and 64; sliding windows; issue 5's prefill
// cases: a 4097-token prompt, ragged chunked prefill over cached prefixes, head_dim 256 with a
// window; 3 KV heads at head_dim 128, whose 384-element cache slots take the prefill producer's
// multiply-add instead of its shift (prefill_slot_shift).
inline std::vector<AttentionShape> attention_cuda_test_shapes() {
  return {
      {{{1, 1}}, 32, 8, 128, 16, 0},
      {{{15, 15}}, 28, 4, 128, 16, 0},
      {{{16, 16}}, 8, 8, 64, 16, 0},
      {{{17, 17}}, 14, 2, 64, 5, 0},
      {{{255, 255}}, 32, 8, 128, 16, 0},
      {{{1000, 1000}}, 8, 2, 128, 16, 0},
      {{{4097, 1}}, 32, 8, 128, 16, 0},
      {{{4097, 7}}, 28, 4, 128, 16, 0},
      {{{17, 1}, {255, 255}, {1000, 1}}, 28, 4, 128, 16, 0},
      {{{1, 1}, {15, 1}, {16, 16}, {17, 5}, {255, 1}, {1000, 40}, {4097, 1}}, 32, 8, 128, 16, 0},
      {{{1, 1}, {5, 2}, {16, 1}, {17, 17}, {33, 1}, {64, 9}, {100, 1}}, 14, 2, 64, 1, 0},
      {{{15, 15}, {17, 1}, {255, 31}}, 8, 2, 64, 5, 0},
      {{{1000, 200}, {255, 1}, {4097, 1}}, 28, 4, 128, 16, 128},
      {{{40, 40}, {25, 1}, {17, 5}}, 4, 1, 64, 5, 4},
      {{{7, 7}, {33, 1}, {20, 3}}, 8, 2, 32, 5, 0},
      {{{300, 300}, {17, 1}, {64, 5}}, 8, 2, 256, 16, 0},
      {{{1, 1}, {15, 1}, {16, 1}, {17, 1}, {255, 1}, {1000, 1}, {4097, 1}}, 28, 4, 128, 16, 0},
      {{{300, 1}, {17, 1}, {1, 1}}, 7, 7, 128, 5, 100},
      {{{100, 1}, {30, 1}, {4097, 1}}, 16, 1, 256, 16, 1},
      {{{20, 20}, {50, 3}}, 40, 1, 32, 16, 0},
      {{{100, 1}, {30, 1}}, 40, 1, 64, 1, 7},
      {{{4097, 4097}}, 32, 8, 128, 16, 0},
      {{{1000, 1000}, {4097, 255}, {17, 17}, {255, 1}}, 28, 4, 128, 32, 0},
      {{{1000, 1000}, {2000, 300}}, 16, 8, 256, 64, 512},
      {{{255, 255}, {1000, 17}}, 8, 1, 64, 16, 0},
      {{{300, 300}, {17, 5}}, 32, 2, 128, 16, 0},
      {{{300, 300}, {17, 5}}, 12, 3, 128, 16, 0},
  };
}

// Batches of the split-K decode kernel (every sequence brings 1 to 8 queries): contexts 1, 15,
// 16, 17, 1000 and 32769; batches of 1, 3, 64 and 257 with mixed contexts; GQA ratios 1, 4, 7
// and 8 (and 40: five row chunks); multi-query verification (2 to 8 queries, several row
// chunks); block sizes 5, 16, 32 and 64; sliding windows; head_dim 32 to 256 (64, 128 and 256
// also without a window on pages of 16 or more: the bulk-copy kernels); many splits (one long
// sequence) and none (257 sequences).
inline std::vector<AttentionShape> attention_cuda_decode_test_shapes() {
  auto mixed = [](int64_t batch, int64_t max_len) {
    std::vector<AttentionSeq> seqs;
    for (int64_t i = 0; i < batch; ++i) seqs.push_back({1 + (i * 7919 + 13) % max_len, 1});
    return seqs;
  };
  return {
      {{{1, 1}}, 32, 8, 128, 16, 0},
      {{{32769, 1}}, 32, 8, 128, 16, 0},
      {{{15, 1}, {16, 1}, {17, 1}}, 8, 8, 64, 32, 0},
      {mixed(64, 1000), 32, 8, 128, 16, 0},
      {mixed(257, 300), 64, 8, 128, 64, 0},
      {{{17, 4}, {1000, 1}, {33, 3}, {16, 8}}, 28, 4, 128, 16, 0},
      {{{1000, 8}, {300, 2}, {9, 5}}, 8, 2, 256, 16, 128},
      {{{1000, 1}, {33, 2}, {4097, 1}}, 16, 4, 256, 16, 0},
      {{{1000, 1}, {5, 1}, {77, 2}}, 16, 4, 32, 5, 0},
      {{{32769, 1}, {40, 1}}, 8, 1, 64, 32, 4096},
      {{{1, 1}, {1000, 1}, {4097, 1}}, 14, 2, 64, 16, 0},
      {{{100, 1}, {30, 2}}, 40, 1, 64, 16, 7},
  };
}

// The CUDA benchmark's Llama-3-8B attention (32 q / 8 kv heads, head_dim 128, pages of 16): decode
// of B sequences of L cached tokens, and one causal prefill of L tokens.
inline AttentionShape attention_cuda_decode_bench_shape(int64_t batch, int64_t seq_len) {
  return {std::vector<AttentionSeq>(static_cast<size_t>(batch), AttentionSeq{seq_len, 1}),
          32,
          8,
          128,
          16,
          0};
}
inline AttentionShape attention_cuda_prefill_bench_shape(int64_t seq_len) {
  return {{{seq_len, seq_len}}, 32, 8, 128, 16, 0};
}
// Issue 5's prefill grid (batch 1, causal) and its ragged batch: eight prompts of mixed lengths in
// one launch (16,384 tokens), as a prefill-heavy serving step brings them.
inline constexpr int64_t kAttentionCudaBenchPrefillLens[] = {2048, 8192, 16384};
inline AttentionShape attention_cuda_ragged_prefill_bench_shape() {
  return {{{4096, 4096},
           {3072, 3072},
           {2048, 2048},
           {2048, 2048},
           {1536, 1536},
           {1536, 1536},
           {1024, 1024},
           {1024, 1024}},
          32,
          8,
          128,
          16,
          0};
}
inline constexpr int64_t kAttentionCudaBenchBatches[] = {1, 8, 64, 256};
inline constexpr int64_t kAttentionCudaBenchSeqLens[] = {512, 4096, 32768};

// Tree masks for a batch (PagedAttentionParams::tree_mask), one word per query token: in each
// sequence, draft token j hangs under a random earlier one (or directly under the cached prefix)
// and attends itself and its ancestors, as a speculative-decoding token tree does. Every sequence
// must bring at most kTreeMaxQueries queries.
template <typename Rng>
std::vector<uint64_t> random_tree_masks(const AttentionShape& shape, Rng& rng) {
  std::vector<uint64_t> masks;
  for (const auto& s : shape.seqs) {
    const size_t first = masks.size();
    for (int64_t j = 0; j < s.q_len; ++j) {
      // parent in [-1, j - 1]; -1: a child of the prefix.
      const int64_t parent = static_cast<int64_t>(rng() % static_cast<uint64_t>(j + 1)) - 1;
      const uint64_t inherited = parent < 0 ? 0 : masks[first + static_cast<size_t>(parent)];
      masks.push_back(inherited | (uint64_t{1} << j));
    }
  }
  return masks;
}

// The causal mask written as a tree mask: draft token j attends tokens 0..j.
inline std::vector<uint64_t> causal_tree_masks(const AttentionShape& shape) {
  std::vector<uint64_t> masks;
  for (const auto& s : shape.seqs)
    for (int64_t j = 0; j < s.q_len; ++j)
      masks.push_back(j == 63 ? ~uint64_t{0} : (uint64_t{1} << (j + 1)) - 1);
  return masks;
}

// A batch in paged form. Cache slots no sequence owns hold NaN, so reading one poisons the output;
// block-table entries past a sequence's pages are -1, which the op would reject if it read them.
struct PagedBatch {
  std::vector<float> q;        // [num_tokens, num_heads, head_dim]
  std::vector<float> k_cache;  // [num_blocks, block_size, num_kv_heads, head_dim]
  std::vector<float> v_cache;
  std::vector<int32_t> block_tables;  // [num_seqs, max_blocks_per_seq]
  std::vector<int32_t> seq_lens;
  std::vector<int32_t> query_start;
  int64_t num_blocks = 0;
  int64_t max_blocks_per_seq = 0;

  PagedAttentionParams params(const AttentionShape& shape, float* out) const {
    PagedAttentionParams p;
    p.q = q.data();
    p.k_cache = k_cache.data();
    p.v_cache = v_cache.data();
    p.block_tables = block_tables.data();
    p.seq_lens = seq_lens.data();
    p.query_start = query_start.data();
    p.out = out;
    p.num_seqs = static_cast<int64_t>(seq_lens.size());
    p.num_tokens = query_start.back();
    p.num_heads = shape.num_heads;
    p.num_kv_heads = shape.num_kv_heads;
    p.head_dim = shape.head_dim;
    p.block_size = shape.block_size;
    p.max_blocks_per_seq = max_blocks_per_seq;
    p.num_blocks = num_blocks;
    p.scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
    p.sliding_window = shape.sliding_window;
    return p;
  }
};

inline int64_t pages_for(int64_t seq_len, int64_t block_size) {
  return (seq_len + block_size - 1) / block_size;
}

// Physical blocks needed by the batch, plus spare blocks that stay NaN.
inline int64_t attention_num_blocks(const AttentionShape& shape, int64_t spare = 3) {
  int64_t n = spare;
  for (const auto& s : shape.seqs) n += pages_for(s.seq_len, shape.block_size);
  return n;
}

// k[s], v[s]: [seq_len, num_kv_heads, head_dim] of sequence s in position order; q: all queries.
// block_order: a permutation of [0, attention_num_blocks) giving the physical block of each page,
// sequences' pages taken in turn.
inline PagedBatch build_paged_batch(const AttentionShape& shape, std::vector<float> q,
                                    const std::vector<std::vector<float>>& k,
                                    const std::vector<std::vector<float>>& v,
                                    const std::vector<int32_t>& block_order) {
  PagedBatch b;
  const int64_t slot_elems = shape.num_kv_heads * shape.head_dim;
  b.q = std::move(q);
  b.num_blocks = static_cast<int64_t>(block_order.size());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  b.k_cache.assign(static_cast<size_t>(b.num_blocks * shape.block_size * slot_elems), nan);
  b.v_cache = b.k_cache;
  for (const auto& s : shape.seqs) {
    b.max_blocks_per_seq = std::max(b.max_blocks_per_seq, pages_for(s.seq_len, shape.block_size));
  }
  b.max_blocks_per_seq += 1;  // a spare column of -1 entries
  b.block_tables.assign(shape.seqs.size() * static_cast<size_t>(b.max_blocks_per_seq), -1);
  b.query_start.push_back(0);
  size_t next_block = 0;
  for (size_t s = 0; s < shape.seqs.size(); ++s) {
    const int64_t seq_len = shape.seqs[s].seq_len;
    b.seq_lens.push_back(static_cast<int32_t>(seq_len));
    b.query_start.push_back(b.query_start.back() + static_cast<int32_t>(shape.seqs[s].q_len));
    for (int64_t page = 0; page < pages_for(seq_len, shape.block_size); ++page) {
      b.block_tables[s * static_cast<size_t>(b.max_blocks_per_seq) + static_cast<size_t>(page)] =
          block_order[next_block++];
    }
    for (int64_t pos = 0; pos < seq_len; ++pos) {
      const int64_t block = b.block_tables[s * static_cast<size_t>(b.max_blocks_per_seq) +
                                           static_cast<size_t>(pos / shape.block_size)];
      const int64_t slot = block * shape.block_size + pos % shape.block_size;
      std::copy_n(k[s].begin() + pos * slot_elems, slot_elems,
                  b.k_cache.begin() + slot * slot_elems);
      std::copy_n(v[s].begin() + pos * slot_elems, slot_elems,
                  b.v_cache.begin() + slot * slot_elems);
    }
  }
  return b;
}

}  // namespace roofline
