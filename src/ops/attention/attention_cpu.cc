// paged_attention_cpu: causal GQA attention over a paged KV cache for a ragged batch, computed the
// way Hugging Face's eager attention does in fp32:
//   scores = (q · k) * scale;  probs = softmax(scores) with the max subtracted;  out = probs · v
// Probabilities are normalised before the weighted sum of V, as torch does.
//
// With a tree mask, a query attends the cached prefix and the draft tokens its bits name instead of
// the causal range.
// Work items are (query token, head) pairs across all sequences, so a decode batch (one token per
// sequence) and a long prefill both spread over the pool. Query head h reads KV head
// h / (num_heads / num_kv_heads). Cached position p of sequence s lives in block
// block_tables[s][p / block_size] at offset p % block_size.
// Bound: each work item reads 2·context·head_dim floats of K/V: memory bound for decode.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "ops/attention/attention.h"
#include "ops/attention/attention_decode_plan.h"

namespace roofline {

namespace {

constexpr int kLanes = 8;

float dot(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (; i < n; ++i) acc[0] += a[i] * b[i];
  float s = 0.0f;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

// y += a * x. x and y never overlap (the cache is read-only here); __restrict lets the compiler
// vectorise the fixed-width blocks.
void axpy(float a, const float* __restrict x, int64_t n, float* __restrict y) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) y[i + l] += a * x[i + l];
  }
  for (; i < n; ++i) y[i] += a * x[i];
}

}  // namespace

void paged_attention_cpu(const PagedAttentionParams& p) {
  ROOFLINE_CHECK(p.num_seqs >= 0 && p.num_tokens >= 0);
  ROOFLINE_CHECK(p.num_heads > 0 && p.num_kv_heads > 0 && p.num_heads % p.num_kv_heads == 0);
  ROOFLINE_CHECK(p.head_dim > 0 && p.block_size > 0 && p.max_blocks_per_seq > 0);
  ROOFLINE_CHECK(p.sliding_window >= 0 && p.num_blocks >= 0);
  // The CPU backend keeps activations and the cache in f32.
  ROOFLINE_CHECK(p.dtype == DType::kF32 && p.kv_dtype == DType::kF32);
  if (p.num_tokens == 0) return;
  ROOFLINE_CHECK(p.q != nullptr && p.k_cache != nullptr && p.v_cache != nullptr &&
                 p.block_tables != nullptr && p.seq_lens != nullptr && p.query_start != nullptr &&
                 p.out != nullptr);

  // Which sequence each query token belongs to; also validates the batch layout.
  ROOFLINE_CHECK(p.query_start[0] == 0 && p.query_start[p.num_seqs] == p.num_tokens);
  std::vector<int32_t> token_seq(static_cast<size_t>(p.num_tokens));
  int64_t total_context = 0;
  for (int64_t s = 0; s < p.num_seqs; ++s) {
    const int64_t q_begin = p.query_start[s];
    const int64_t q_end = p.query_start[s + 1];
    const int64_t seq_len = p.seq_lens[s];
    ROOFLINE_CHECK(q_begin < q_end);  // every sequence contributes at least one query
    ROOFLINE_CHECK(seq_len >= q_end - q_begin);
    ROOFLINE_CHECK(seq_len <= p.max_blocks_per_seq * p.block_size);
    if (p.tree_mask != nullptr) {
      // One word per query: at most 64 draft tokens, no bit past the sequence's queries.
      ROOFLINE_CHECK(q_end - q_begin <= kTreeMaxQueries);
      for (int64_t t = q_begin; t < q_end; ++t)
        ROOFLINE_CHECK(q_end - q_begin == 64 || (p.tree_mask[t] >> (q_end - q_begin)) == 0);
    }
    for (int64_t t = q_begin; t < q_end; ++t)
      token_seq[static_cast<size_t>(t)] = static_cast<int32_t>(s);
    total_context += seq_len * (q_end - q_begin);
  }

  const int64_t d = p.head_dim;
  const int64_t group = p.num_heads / p.num_kv_heads;
  const int64_t kv_slot_stride = p.num_kv_heads * d;  // elements between consecutive cache slots
  const int64_t num_items = p.num_tokens * p.num_heads;
  // Aim for a few thousand multiply-adds per chunk before waking another thread.
  const int64_t avg_work = std::max<int64_t>(1, total_context / p.num_tokens * 2 * d);
  const int64_t min_items = std::max<int64_t>(1, 16384 / avg_work);
  const auto* q_all = static_cast<const float*>(p.q);
  const auto* k_cache = static_cast<const float*>(p.k_cache);
  const auto* v_cache = static_cast<const float*>(p.v_cache);
  auto* out_all = static_cast<float*>(p.out);

  ThreadPool::global().parallel_for(num_items, min_items, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> probs;
    thread_local std::vector<int64_t> offsets;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / p.num_heads;
      const int64_t h = item % p.num_heads;
      const int64_t s = token_seq[static_cast<size_t>(t)];
      const int64_t q_len = p.query_start[s + 1] - p.query_start[s];
      const int64_t pos = p.seq_lens[s] - q_len + (t - p.query_start[s]);
      const int64_t first =
          p.sliding_window > 0 ? std::max<int64_t>(0, pos - p.sliding_window + 1) : 0;
      const int32_t* table = p.block_tables + s * p.max_blocks_per_seq;
      const int64_t kv_head_offset = (h / group) * d;
      const float* q = q_all + (t * p.num_heads + h) * d;

      // Cache offset of each attended position, found once and reused for K and V.
      offsets.clear();
      auto offset_of = [&](int64_t position) {
        const int32_t block = table[position / p.block_size];
        ROOFLINE_CHECK(block >= 0 && (p.num_blocks == 0 || block < p.num_blocks));
        return (static_cast<int64_t>(block) * p.block_size + position % p.block_size) *
                   kv_slot_stride +
               kv_head_offset;
      };
      if (p.tree_mask == nullptr) {
        // Causal: the contiguous range [first, pos]. Walking the pages avoids a division per key.
        offsets.resize(static_cast<size_t>(pos - first + 1));
        for (int64_t i = 0, page = first / p.block_size, in_page = first % p.block_size;
             i <= pos - first; ++i) {
          const int32_t block = table[page];
          ROOFLINE_CHECK(block >= 0 && (p.num_blocks == 0 || block < p.num_blocks));
          offsets[static_cast<size_t>(i)] =
              (static_cast<int64_t>(block) * p.block_size + in_page) * kv_slot_stride +
              kv_head_offset;
          if (++in_page == p.block_size) {
            in_page = 0;
            ++page;
          }
        }
      } else {
        // Tree: the prefix from `first`, then the draft tokens the query's bits name.
        const int64_t ctx0 = p.seq_lens[s] - q_len;
        const uint64_t bits = p.tree_mask[t];
        for (int64_t kp = first; kp < ctx0 + q_len; ++kp) {
          if (kp >= ctx0 && ((bits >> (kp - ctx0)) & 1u) == 0) continue;
          offsets.push_back(offset_of(kp));
        }
        ROOFLINE_CHECK_MSG(
            !offsets.empty(),
            "paged_attention_cpu: a tree-masked query attends no key (set its own bit)");
      }
      const int64_t count = static_cast<int64_t>(offsets.size());

      probs.resize(static_cast<size_t>(count));
      float max_score = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < count; ++i) {
        const float score = dot(q, k_cache + offsets[static_cast<size_t>(i)], d) * p.scale;
        probs[static_cast<size_t>(i)] = score;
        max_score = std::max(max_score, score);
      }
      float sum = 0.0f;
      for (int64_t i = 0; i < count; ++i) {
        const float e = std::exp(probs[static_cast<size_t>(i)] - max_score);
        probs[static_cast<size_t>(i)] = e;
        sum += e;
      }
      float* out = out_all + (t * p.num_heads + h) * d;
      std::fill(out, out + d, 0.0f);
      for (int64_t i = 0; i < count; ++i) {
        // Divide, as torch's softmax does, then weight V.
        const float weight = probs[static_cast<size_t>(i)] / sum;
        axpy(weight, v_cache + offsets[static_cast<size_t>(i)], d, out);
      }
    }
  });
}

bool paged_attention_cuda_supports_head_dim(int64_t head_dim) {
  // Keep in step with the switches in attention_cuda.cu and attention_decode_cuda.cu.
  return head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256;
}

int64_t paged_attention_cuda_workspace_bytes() { return kDecodeWorkspaceBytes; }

}  // namespace roofline
