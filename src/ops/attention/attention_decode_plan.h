// The launch plan of the CUDA decode attention kernel (attention_decode_cuda.cu): how many query
// rows a block holds, how many blocks split each sequence's KV length, and the workspace the
// split partials need. Pure host functions, tested on the CPU (attention_decode_plan_test.cc).
//
// A decode block serves one (sequence, KV head, chunk of rows), where a row is one (query, query
// head of the GQA group) pair: every K/V byte a block reads serves all its rows. A block holds 8
// rows (the n of the kernel's m16n8k16 MMAs); more rows take more row chunks. When sequences x
// KV heads x row chunks
// would not fill the GPU, each sequence's KV range is split across blocks (split-K); each block
// keeps a normalised partial output with its log-sum-exp, and the blocks of a group merge them —
// through distributed shared memory when the group's splits fit one cluster, else through the
// workspace, by the last block of the group to finish (no second kernel either way). The split
// count is a function of the launch's shape only — batch, heads, rows, the longest context — so a
// CUDA graph captured for a shape bucket stays valid for any contexts up to that bound. It is an
// upper bound: the kernel uses no more splits for a group than its actual key range fills at
// kDecodeMinKeysPerSplit keys each, so a graph planned for a whole --max-model-len does not merge
// dozens of near-empty splits at short contexts.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "core/cuda_stream.h"
#include "core/host_device.h"
#include "ops/attention/attention.h"
#if defined(ROOFLINE_PHASE_TRACE)
#include "ops/common/phase_trace.h"
#endif

namespace roofline {

// Queries per sequence the decode kernel takes (decode: 1; speculative verification: up to 8).
inline constexpr int64_t kDecodeMaxQueries = 8;
// Rows (query x head pairs) per block: the n of m16n8k16.
inline constexpr int64_t kDecodeMaxRows = 8;
// Splits of one sequence's KV range, at most, and the fewest keys a split is worth.
inline constexpr int64_t kDecodeMaxSplits = 128;
// 128: a split's partial costs its merge a load per row and dim; fewer, longer splits measured
// faster at B=1 than 64-key ones (again with bulk copies and the cluster merge: llama3-8b bs 1
// +2.4 %, qwen2.5-0.5b bs 1 +7.6 % a step at 64;
// bench/results/2026-12-01-l2-prefetch-and-key-patch.md).
inline constexpr int64_t kDecodeMinKeysPerSplit = 128;
// Blocks that write split partials in one launch, at most: bounds the workspace.
inline constexpr int64_t kDecodeMaxSplitBlocks = 2048;
// Up to this many splits form one thread-block cluster (8: the portable cluster size), and merge
// through distributed shared memory instead of the workspace: no partials written to and read
// back from L2, no device-scope atomic, no fence (see attention_decode_cuda.cu).
inline constexpr int64_t kDecodeMaxClusterSplits = 8;
// Partials the merge through L2 loads at once (one L2 round trip per round).
inline constexpr int64_t kDecodeMergeRound = 16;
inline constexpr int64_t kDecodeMaxHeadDim = 256;

struct DecodePlan {
  int64_t rows = kDecodeMaxRows;  // rows per block
  int64_t row_chunks = 1;         // blocks along the rows of one (sequence, KV head)
  int64_t splits = 1;             // blocks along one sequence's KV range
};

// group: query heads per KV head; max_q_len: the most queries any sequence brings (1..8);
// max_seq_len: the longest context (keys) any sequence attends to; resident_blocks: how many
// decode blocks the whole GPU runs at once (SMs x blocks per SM).
inline DecodePlan plan_decode_attention(int64_t num_seqs, int64_t num_kv_heads, int64_t group,
                                        int64_t max_q_len, int64_t max_seq_len,
                                        int64_t resident_blocks) {
  DecodePlan p;
  const int64_t rows_needed = std::max<int64_t>(1, group * std::max<int64_t>(1, max_q_len));
  p.row_chunks = (rows_needed + p.rows - 1) / p.rows;
  const int64_t base = std::max<int64_t>(1, num_seqs * num_kv_heads * p.row_chunks);
  if (base >= resident_blocks) return p;  // one wave or more without splitting
  // Whole waves only: one more split than fits would start a second wave that costs as long as
  // the first (H200, B=8 x L=32768: 5 splits, 320 blocks on 264 slots, 71 % of the copy ceiling).
  int64_t splits = resident_blocks / base;
  splits = std::min(splits, (std::max<int64_t>(1, max_seq_len) + kDecodeMinKeysPerSplit - 1) /
                                kDecodeMinKeysPerSplit);
  splits = std::min(splits, kDecodeMaxSplits);
  splits = std::min(splits, kDecodeMaxSplitBlocks / base);
  // More than a merge round of splits: whole rounds where that costs at most an eighth of them.
  // The last block of a group merges the partials through L2 kDecodeMergeRound loads at a time
  // (attention_decode_cuda.cu), one L2 round trip each: B=1 x 8 heads at 32768 keys planned 33
  // splits, a third round for one split (H200: 32 splits 1 % faster there, and at 8192 keys,
  // where the 33rd split was empty, 3-4 % faster;
  // bench/results/2026-12-02-decode-merge-rounds.md).
  if (splits > kDecodeMergeRound) {
    const int64_t whole = splits / kDecodeMergeRound * kDecodeMergeRound;
    if (8 * whole >= 7 * splits) splits = whole;
  }
  p.splits = std::max<int64_t>(1, splits);
  return p;
}

// How one group (sequence, KV head, row chunk) of a launch planned for `launch_splits` cuts its
// `keys` (>= 1) keys, in the kernel: as many splits as kDecodeMinKeysPerSplit keys each fill, at
// most the launch's, each `per_split` keys (whole 16-key stages, the last split shorter), and
// only the splits that get a key: rounding up to whole stages can leave the last few empty (8192
// keys over 33 splits: 32 of 256), and the group's merge reads only its splits' partials.
struct DecodeGroupSplits {
  int splits;
  int per_split;
};
ROOFLINE_HD DecodeGroupSplits decode_group_splits(int launch_splits, int keys) {
  constexpr int kMin = static_cast<int>(kDecodeMinKeysPerSplit);
  constexpr int kStage = 16;
  int splits = (keys + kMin - 1) / kMin;
  splits = splits < launch_splits ? splits : launch_splits;
  splits = splits > 1 ? splits : 1;
  const int per_split = ((keys + splits - 1) / splits + kStage - 1) / kStage * kStage;
  return {(keys + per_split - 1) / per_split, per_split};
}

// The cluster width of a launch planned for `splits`: its blocks form clusters of this many
// consecutive splits (ceil(splits / width) per group, the last padded with idle blocks), so that a
// group whose actual key range takes 2..width splits — any short context, even in a graph planned
// for a whole --max-model-len — merges them in its first cluster. The launcher clusters only when
// every cluster of the launch fits on the GPU at once: a second wave of clusters costs more than
// the merge saves (H200, B=8 L=512, 64 clusters of 4: 10.2 -> 16.9 us).
inline int64_t decode_cluster_width(int64_t splits) {
  return std::clamp<int64_t>(splits, 1, kDecodeMaxClusterSplits);
}

// capacity[w], w in 0..kDecodeMaxClusterSplits: clusters of w decode blocks the device runs at
// once (0: none).
using DecodeClusterCapacity = std::array<int64_t, kDecodeMaxClusterSplits + 1>;

// Bytes of the workspace the decode kernel needs for any plan: per split block, kDecodeMaxRows
// rows of a kDecodeMaxHeadDim f32 partial output and an f32 log-sum-exp; then one u32 arrival
// counter per (sequence, KV head, row chunk) group of split blocks.
inline constexpr int64_t kDecodePartialOutBytes =
    kDecodeMaxSplitBlocks * kDecodeMaxRows * kDecodeMaxHeadDim * 4;
inline constexpr int64_t kDecodePartialLseBytes = kDecodeMaxSplitBlocks * kDecodeMaxRows * 4;
inline constexpr int64_t kDecodeCounterBytes = kDecodeMaxSplitBlocks * 4;
inline constexpr int64_t kDecodeWorkspaceBytes =
    kDecodePartialOutBytes + kDecodePartialLseBytes + kDecodeCounterBytes;

// The decode kernel (attention_decode_cuda.cu), called by paged_attention_cuda for batches with
// max_q_len <= kDecodeMaxQueries; max_seq_len bounds every sequence's seq_len.
void paged_attention_decode_cuda(const PagedAttentionParams& p, int64_t max_q_len,
                                 int64_t max_seq_len, CudaStream stream);

// The clusters of w = 0..kDecodeMaxClusterSplits decode blocks (head_dim's kernel) the current
// device runs at once, as the launcher sees them (cudaOccupancyMaxActiveClusters; all 0 before
// sm_90 or with ROOFLINE_DECODE_CLUSTER=0), for benchmarks to report: a launch clusters only when
// all its clusters fit (the H200 holds 30 clusters of 8 decode blocks at head_dim 128, so a B=1
// Llama-3-8B launch of 32 splits, 32 clusters of 8, merges through L2).
DecodeClusterCapacity paged_attention_decode_cluster_capacity(int64_t head_dim);

#if defined(ROOFLINE_PHASE_TRACE)
// The decode kernel's phase records (phase_trace.h), in trace builds only
// (attention_trace_bench): armed, every launch writes one record per block.
PhaseTraceRecorder& decode_attention_phase_trace();
#endif

}  // namespace roofline
