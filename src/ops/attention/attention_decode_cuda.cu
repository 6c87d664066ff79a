// paged_attention_decode_cuda: the decode form of paged_attention_cuda, for batches whose
// sequences bring 1 to 8 queries each (decode; speculative verification). Same computation as
// paged_attention_cpu: query j of sequence s sits at position seq_lens[s] - q_len + j and attends
// to cached positions [max(0, pos - window + 1), pos].
//
// Algorithm (the plan — row chunks, splits — is attention_decode_plan.h's):
// - Grid (splits, KV heads x row chunks, sequences); 4 warps per block. A block's 8 rows are
//   (query, query head) pairs of one GQA group, so each K/V byte read serves every query head of
//   the group.
// - The block's key range (the union of its rows' windows) is cut into equal chunks, a multiple
//   of one 16-key stage long: the launch's `splits`, or fewer where the range is shorter than
//   the launch was planned for (at most one per kDecodeMinKeysPerSplit keys; the splits past
//   those exit at once). The block takes chunk blockIdx.x. Its warps take the chunk's stages
//   round-robin.
// - Each warp streams its stages through a private, swizzled shared-memory ring (kStages deep)
//   with cp.async, so the ring needs no block barrier, and kStages - 1 stages stay in flight
//   without holding registers. One table read per lane per stage (a key's physical block, shared
//   by shuffle), one stage ahead of its copies, so table reads do not stall the stream. With
//   pages of a power-of-two size >= 16 and a 16-aligned chunk (every launch without a sliding
//   window cut), a stage's 16 keys lie in one page: its copies take that one entry and step by a
//   constant stride from the stage's first row (~80 instructions a stage at head_dim 128 where
//   the general path spends ~410: B=1 L=512 7.3 -> 5.2 us, B=256 L=512 81 -> 97 % of the copy
//   ceiling; bench/results/2026-12-01-decode-attention-page-stages.md).
// - Bulk copies (paged_kv_takes_bulk_copies: such pages, no sliding window, head_dim 64-256): the
//   same ring, filled by the copy engine instead. Lane 0 of each warp asks for a stage's K and V
//   as one box per 64 dims (16 keys x 128 bytes, from a tensor map over each cache, in the
//   engine's 128-byte swizzle) with the stage slot's mbarrier expecting their bytes; the warp
//   waits on that barrier. No per-lane address arithmetic or copy instructions, and fewer
//   registers (120 where cp.async takes 166 at head_dim 128). On the H200 the first stage lands
//   sooner and the decode steps are 1-4 % faster (llama3-8b bs 1 -4 %), long streams level
//   (bench/results/2026-12-01-decode-attention-bulk-copies.md). ROOFLINE_DECODE_TMA=0 keeps
//   cp.async everywhere (A/B runs; the second run of attention_cuda_test).
// - On tensor cores, transposed so the 8 rows are the n of mma.sync m16n8k16: S^T = K·Q^T per 16
//   keys (Q^T's fragments stay in registers, K's come by ldmatrix), the online softmax on the
//   accumulators (each row's 8 owner lanes agree on its max by 3 shuffles per stage), then
//   O^T += V^T·P^T (V^T by ldmatrix.trans, P^T by one movmatrix transpose of each 8 x 8 half of
//   S^T rounded to bf16). About 40 warp instructions per 16 keys at head_dim 128, where the
//   CUDA-core kernel it replaced spent ~100 per key and was bound by instruction issue at ~70 % of
//   the copy ceiling (bench/results/2026-11-30-decode-attention-tensor-cores.md).
// - One split: the block normalises and writes bf16 out. When all of the launch's clusters fit on
//   the GPU at once, its blocks form thread-block clusters of up to kDecodeMaxClusterSplits
//   consecutive splits, and a group whose key range takes 2 to that many splits has them all in
//   its first cluster; each other split stores its rows' normalised f32 partial and log2-sum-exp
//   into the first block's shared memory over distributed shared memory and arrives on that
//   block's mbarrier, and the first block merges them all from its own shared memory (one
//   cluster barrier, no L2 round trips, no device-scope atomic). More: each block writes its
//   partial to the workspace, then counts itself in with an atomic; the last block of its
//   (sequence, KV head, row chunk) merges the partials (reading them through L2) and resets the
//   counter to zero for the next call. No second kernel, no host state: a CUDA graph can capture
//   either.
//
// Numerics: bf16 q / K / V / out, f32 dots, f32 softmax state in base 2 (weights by the hardware
// ex2.approx, relative error ~2^-22), each probability rounded to bf16 for the P·V MMA (relative
// error <= 2^-9, as FlashAttention's kernels and the prefill kernel do), f32 accumulation, one
// rounding of the normalised output to bf16.
//
// Bound: memory. Reads 2·context·num_kv_heads·head_dim·2 bytes of K/V per sequence (once per row
// chunk; row chunks of one group run together and share it through L2).
//
// Broken invariants on the device (q_len outside [1, 8], seq_len < q_len, seq_len beyond the
// block table, a block id outside [0, num_blocks)) trap, as in attention_cuda.cu.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/check.h"
#include "core/cuda_check.h"
#include "ops/attention/attention.h"
#include "ops/attention/attention_bulk_copy.h"
#include "ops/attention/attention_decode_plan.h"
#include "ops/attention/attention_kv_maps.cuh"
#include "ops/common/cuda_async.cuh"
#include "ops/common/cuda_barrier.cuh"
#include "ops/common/cuda_launch.cuh"
#include "ops/common/cuda_mma.cuh"
#include "ops/common/cuda_phase_trace.cuh"

namespace roofline {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr float kNegInf = -__builtin_huge_valf();
// The running max starts here, not at -inf: exp2(x - kEmptyMax) is then 0 for every masked score
// (-inf) and 1 for alpha while nothing is attended (sum and accumulators stay 0), with no branch.
constexpr float kEmptyMax = -1e30f;

struct DecodeArgs {
  const __nv_bfloat16* q;
  const __nv_bfloat16* k_cache;
  const __nv_bfloat16* v_cache;
  const int32_t* block_tables;
  const int32_t* seq_lens;
  const int32_t* query_start;
  __nv_bfloat16* out;
  float* part_out;     // [split blocks][kRows][kHeadDim]
  float* part_lse;     // [split blocks][kRows]
  unsigned* counters;  // [sequences x KV heads x row chunks]
  int64_t num_blocks;
  int num_heads;
  int num_kv_heads;
  int group;
  int block_size;
  int block_shift;  // log2(block_size) when a power of two, else -1
  int max_blocks_per_seq;
  int sliding_window;
  int row_chunks;
  int splits;
  // 0: no clusters. Else the launch's blocks form clusters of this many consecutive splits, and a
  // group whose key range takes 2..cluster_width splits merges them in its first cluster.
  int cluster_width;
  float scale_log2;
#if defined(ROOFLINE_PHASE_TRACE)
  uint64_t* trace;  // the launch's phase records, or nullptr
#endif
};

// The phase marks of a trace build (attention_trace_bench; phase_trace.h), in order.
enum DecodeMark : int {
  kMarkMetadata = 1,  // query_start / seq_lens read, the split known
  kMarkTable,         // the first stages' block-table entries landed
  kMarkWait,          // past the PDL wait
  kMarkQuery,         // q's fragments landed
  kMarkFirstStage,    // warp 0's first K/V stage landed
  kMarkLoop,          // every K/V stage of the block done
  kMarkWarpsMerged,   // the warps' accumulators met in shared memory
  kMarkPartial,       // out written (one split) or the partial left for the merge
  kMarkArrived,       // the other splits' partials in (a cluster's first block), past the cluster
                      // barrier (the others), or counted in at the group's counter (L2 merge)
  kMarkMerged,        // the splits merged and out written, or (a cluster's other splits) pushed
};

// Merges the splits' normalised partials of a group's rows (four dims of one row per item, items
// first_item, + item_stride, ...) online over the splits — running max, rescaled sum and output —
// and writes out in bf16. load(sp, r, d, &lse, &v): split sp's log2-sum-exp of row r and its dims
// d..d+3. The loads are independent of one another, so the loop unrolled by a round of
// kDecodeMergeRound has a round's loads in flight at once. kWholeRounds (the merge through L2):
// the count is padded to whole rounds with empty splits (weight exactly 0, nothing loaded), as the
// unrolled loop's remainder went one load, one L2 round trip, at a time (H200: B=1 L=3000, 24
// splits, 30 -> 37 % of the copy ceiling; L=4100, 29 splits, 33 -> 45 %;
// bench/results/2026-12-02-decode-merge-rounds.md).
template <int kHeadDim, bool kWholeRounds, typename Load>
__device__ __forceinline__ void merge_splits(const DecodeArgs& a, int kv_head, int row0,
                                             int rows_here, int q_begin, int splits, int first_item,
                                             int item_stride, Load load) {
  constexpr int kQuads = kHeadDim / 4;
  constexpr int kRound = static_cast<int>(kDecodeMergeRound);
  static_assert(kRound == 16, "the loop below unrolls by one round");
  for (int idx = first_item; idx < rows_here * kQuads; idx += item_stride) {
    const int r = idx / kQuads;
    const int d = (idx % kQuads) * 4;
    float mx = kEmptyMax, total = 0.0f;
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    // Past the count: lse = -inf, so keep = 1 and w = 0 exactly, the sums unchanged.
    const int padded = kWholeRounds ? (splits + kRound - 1) / kRound * kRound : splits;
#pragma unroll 16
    for (int sp = 0; sp < padded; ++sp) {
      float lse = kNegInf;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (sp < splits) load(sp, r, d, &lse, &v);
      const float m_new = fmaxf(mx, lse);
      const float keep = cuda::fast_exp2(mx - m_new);
      const float w = cuda::fast_exp2(lse - m_new);  // 0: an empty split
      total = total * keep + w;
      o.x = o.x * keep + w * v.x;
      o.y = o.y * keep + w * v.y;
      o.z = o.z * keep + w * v.z;
      o.w = o.w * keep + w * v.w;
      mx = m_new;
    }
    const float inv = 1.0f / total;  // > 0: the row's own key is in some split
    const int row = row0 + r;
    const int head = kv_head * a.group + row % a.group;
    const int64_t t = q_begin + row / a.group;
    __nv_bfloat16* dst = a.out + (t * a.num_heads + head) * kHeadDim + d;
    dst[0] = __float2bfloat16_rn(o.x * inv);
    dst[1] = __float2bfloat16_rn(o.y * inv);
    dst[2] = __float2bfloat16_rn(o.z * inv);
    dst[3] = __float2bfloat16_rn(o.w * inv);
  }
}

// The end of a block: its warps have left their rows' un-normalised
// accumulators, running maxima and sums in shared memory (s_acc [kWarps][kRows][kHeadDim], then
// s_m and s_l [kWarps][kRows]). Merges the warps; with one split writes bf16 out. With several in
// a cluster (clustered), the group's first block (split 0, cluster rank 0) receives: once its own
// ring is free it opens its receive area (s_recv [splits][kRows][kHeadDim], then s_recv_lse
// [splits][kRows], after s_l, in the ring's space) with a cluster barrier arrival, leaves its own
// partial there, waits on an mbarrier for the other splits, merges the partials from its own
// shared memory and writes out. Each other split waits for that barrier, stores its partial and
// log2-sum-exp into the first block's area over distributed shared memory, arrives on the
// mbarrier and exits. One cluster barrier and one-way stores: the pull merge it replaced (every
// block read the others' partials, then a second cluster barrier kept them alive until all had)
// spent ~1.6 us of a 7.5 us B=1 call in those two barriers and the remote reads (H200,
// bench/results/2026-12-01-decode-attention-phase-trace.md). Otherwise writes the partial to the
// workspace, counts itself in, and the group's last block merges the splits through L2.
template <int kHeadDim, int kRows>
__device__ __forceinline__ void finish_block(const DecodeArgs& a, unsigned char* smem,
                                             unsigned* s_last_ptr, uint64_t* push_bar, int seq,
                                             int kv_head, int row0, int rows_here, int q_begin,
                                             int splits, bool clustered, cuda::PhaseTrace& trace) {
  unsigned& s_last = *s_last_ptr;
  const int tid = static_cast<int>(threadIdx.x);
  const int split = static_cast<int>(blockIdx.x);
  const float* s_acc = reinterpret_cast<const float*>(smem);
  const float* s_m = s_acc + kWarps * kRows * kHeadDim;
  const float* s_l = s_m + kWarps * kRows;
  float* s_recv = reinterpret_cast<float*>(smem) + kWarps * kRows * (kHeadDim + 2);
  float* s_recv_lse = s_recv + kDecodeMaxClusterSplits * kRows * kHeadDim;
  // Every warp is past its loop (and the barrier before this call), so the ring is free.
  const bool receiver = clustered && split == 0;
  if (receiver) {
    if (tid == 0) {
      cuda::mbarrier_init(push_bar, static_cast<unsigned>(splits - 1));
      cuda::fence_mbarrier_init_cluster();
    }
    cuda::cluster_arrive();  // releases the ring's reads and the barrier's initialisation
  } else if (clustered) {
    cuda::cluster_arrive_relaxed();  // a sender publishes nothing through the barrier
  }
  __syncthreads();
  trace.mark(kMarkWarpsMerged);

  const int64_t group_index = static_cast<int64_t>(seq) * gridDim.y + blockIdx.y;
  const int64_t split_block = group_index * a.splits + split;
  // One item per thread at head_dim 128 and 4 rows (or 64 and 7): a row's 4 consecutive dims, read
  // as one 16-byte load per warp (an item per dim took 4-7 rounds of shared-memory latency, the
  // exp2s, a log2f and a division each: 1.2 us of a 7.9 us B=1 call on the H200). A sender keeps
  // its items in registers until the receiver's area is open.
  constexpr int kQuads = kHeadDim / 4;
  constexpr int kMaxItems = (kRows * kQuads + kThreads - 1) / kThreads;
  // f(j, r, d) for this thread's items j: row r, dims d..d+3.
  const auto for_each_item = [&](auto f) {
#pragma unroll
    for (int j = 0; j < kMaxItems; ++j) {
      const int idx = tid + j * kThreads;
      if (idx >= rows_here * kQuads) break;
      f(j, idx / kQuads, (idx % kQuads) * 4);
    }
  };
  float4 send_part[kMaxItems];
  float send_lse[kMaxItems];
  for_each_item([&](int j, int r, int d) {
    float mx = kEmptyMax;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, s_m[w * kRows + r]);
    float sum = 0.0f;
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float wt = cuda::fast_exp2(s_m[w * kRows + r] - mx);
      const float4 v = *reinterpret_cast<const float4*>(s_acc + (w * kRows + r) * kHeadDim + d);
      sum += s_l[w * kRows + r] * wt;
      o.x += v.x * wt;
      o.y += v.y * wt;
      o.z += v.z * wt;
      o.w += v.w * wt;
    }
    const int row = row0 + r;
    if (splits == 1) {
      const int head = kv_head * a.group + row % a.group;
      const int64_t t = q_begin + row / a.group;
      __nv_bfloat16* dst = a.out + (t * a.num_heads + head) * kHeadDim + d;
      dst[0] = __float2bfloat16_rn(o.x / sum);
      dst[1] = __float2bfloat16_rn(o.y / sum);
      dst[2] = __float2bfloat16_rn(o.z / sum);
      dst[3] = __float2bfloat16_rn(o.w / sum);
      return;
    }
    const float4 part = sum > 0.0f ? make_float4(o.x / sum, o.y / sum, o.z / sum, o.w / sum)
                                   : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float lse = sum > 0.0f ? mx + log2f(sum) : kNegInf;
    if (receiver) {
      *reinterpret_cast<float4*>(s_recv + r * kHeadDim + d) = part;
      if (d == 0) s_recv_lse[r] = lse;
    } else if (clustered) {
      send_part[j] = part;
      send_lse[j] = lse;
    } else {
      *reinterpret_cast<float4*>(a.part_out + (split_block * kRows + r) * kHeadDim + d) = part;
      if (d == 0) a.part_lse[split_block * kRows + r] = lse;
    }
  });
  trace.mark(kMarkPartial);
  if (splits == 1) return trace.finish();
  if (receiver) {
    // The group's splits are ranks 0..splits-1 of its first cluster; rank 0 merges.
    __syncthreads();       // its own partial, and the mbarrier's initialisation
    cuda::cluster_wait();  // no thread leaves a cluster barrier it arrived at unfinished
    cuda::mbarrier_wait_cluster(push_bar, 0);  // every other split's partial has landed
    trace.mark(kMarkArrived);
    merge_splits<kHeadDim, false>(  // shared-memory loads: no round trip to hide
        a, kv_head, row0, rows_here, q_begin, splits, tid, kThreads,
        [&](int sp, int r, int d, float* lse, float4* v) {
          *lse = s_recv_lse[sp * kRows + r];
          *v = *reinterpret_cast<const float4*>(s_recv + (sp * kRows + r) * kHeadDim + d);
        });
    trace.mark(kMarkMerged);
    return trace.finish();
  }
  if (clustered) {
    cuda::cluster_wait();  // rank 0's area is open
    trace.mark(kMarkArrived);
    for_each_item([&](int j, int r, int d) {
      cuda::cluster_store_f32x4(s_recv + (split * kRows + r) * kHeadDim + d, 0u, send_part[j]);
      if (d == 0) cuda::cluster_store_f32(s_recv_lse + split * kRows + r, 0u, send_lse[j]);
    });
    __syncthreads();  // the block's stores are ordered before the arrival that releases them
    if (tid == 0) cuda::mbarrier_arrive_remote(push_bar, 0u);
    trace.mark(kMarkMerged);
    return trace.finish();
  }

  // Count this block in (cuda::arrive_last_of); the last of the group's splits merges them all.
  __syncthreads();
  if (tid == 0)
    s_last =
        cuda::arrive_last_of(a.counters + group_index, static_cast<unsigned>(splits)) ? 1u : 0u;
  __syncthreads();
  trace.mark(kMarkArrived);
  if (s_last == 0u) return trace.finish();
  const int64_t first_block = group_index * a.splits;
  merge_splits<kHeadDim, true>(a, kv_head, row0, rows_here, q_begin, splits, tid, kThreads,
                               [&](int sp, int r, int d, float* lse, float4* v) {
                                 *lse = __ldcg(a.part_lse + (first_block + sp) * kRows + r);
                                 *v = __ldcg(reinterpret_cast<const float4*>(
                                     a.part_out + ((first_block + sp) * kRows + r) * kHeadDim + d));
                               });
  trace.mark(kMarkMerged);
  trace.finish();
}

// Shapes per head dim. A warp stage is 16 keys (one MMA's m) of K and of V; the ring depth keeps
// 2 stages per warp in flight while a third is computed (96 KB per block at head_dim 128, two
// blocks per SM: 128 KB in flight per SM, ~3.5x what 4.8 TB/s x ~1 us of DRAM latency needs per
// SM); head_dim 256 has 16 KB stages and keeps one in flight per warp (128 KB per block).
template <int kHeadDim>
struct MmaDecodeConfig {
  static_assert(kHeadDim == 32 || kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256,
                "head_dim 32, 64, 128 or 256");
  static constexpr int kRows = 8;                               // n of m16n8k16
  static constexpr int kKeysPerStage = 16;                      // m of m16n8k16
  static constexpr int kChunks = kHeadDim / 8;                  // 16-byte chunks per key row
  static constexpr int kStageChunks = kKeysPerStage * kChunks;  // per tensor
  static constexpr int kCopies = kStageChunks / 32;             // cp.async per lane per tensor
  static constexpr int kSteps = kHeadDim / 16;                  // k steps of S, m tiles of O
  static constexpr int kStages = kHeadDim <= 128 ? 3 : 2;
  static constexpr int kRingBytes = kWarps * kStages * 2 * kStageChunks * 16;
  // The block's end: the warps' accumulators, maxima and sums, then (a cluster's receiver) every
  // split's partial and log2-sum-exp.
  static constexpr int kMergeBytes =
      kWarps * kRows * (kHeadDim + 2) * 4 +
      static_cast<int>(kDecodeMaxClusterSplits) * kRows * (kHeadDim + 1) * 4;
  static_assert(kMergeBytes <= kRingBytes, "the block's end lives in the ring's shared memory");
  static constexpr int kSmemBytes = kRingBytes > kMergeBytes ? kRingBytes : kMergeBytes;
  // Key rows are kChunks 16-byte chunks; chunk c of key k sits at c ^ f(k) so the 8 rows an
  // ldmatrix reads (8 keys, one chunk) fall in 8 different 16-byte bank groups: f(k) = k mod 8
  // for rows of 128 bytes and more, (k / 2) mod 4 for head_dim 32's 64-byte rows.
  static constexpr int kSwizzleShift = kChunks >= 8 ? 0 : 1;
  static constexpr int kSwizzleMask = (kChunks >= 8 ? 8 : kChunks) - 1;
  __device__ static int at(int key, int chunk) {
    return key * kChunks + (chunk ^ ((key >> kSwizzleShift) & kSwizzleMask));
  }
  // The bulk-copy stage (kTma): each 64-dim block of the stage's 16 keys is one box of
  // 16 x 128 bytes, 2 KB, in the copy engine's 128-byte swizzle (chunk c of key k at c ^ (k mod
  // 8): again 8 different bank groups for the 8 keys an ldmatrix reads).
  static constexpr int kBoxChunks = kKeysPerStage * 8;  // 16-byte chunks of one box
  __device__ static int tma_at(int key, int chunk) {
    return (chunk >> 3) * kBoxChunks + key * 8 + ((chunk & 7) ^ (key & 7));
  }
};

// kTma: the pages' K and V come by bulk tensor copies (one per 64 dims of a stage's 16 keys,
// issued by lane 0, completing on the stage slot's mbarrier) instead of 16-byte cp.async by every
// lane; launched only where every stage's keys lie in one page (page_stages below, always true
// there) and head_dim >= 64.
template <int kHeadDim, bool kTma>
__global__ void __launch_bounds__(kThreads)
    paged_decode_kernel(const DecodeArgs a, const __grid_constant__ PagedKvMaps maps) {
  using Cfg = MmaDecodeConfig<kHeadDim>;
  constexpr int kRows = Cfg::kRows;
  constexpr int kKeysPerStage = Cfg::kKeysPerStage;
  constexpr int kSteps = Cfg::kSteps;
  static_assert(!kTma || (kHeadDim >= 64 && kKeysPerStage == kKvBulkCopyKeys),
                "a bulk-copy box is 64 dims of one stage's keys");
  // 1024: the copy engine's 128-byte swizzle repeats every 8 rows of 128 bytes, and the ldmatrix
  // addresses (Cfg::tma_at) assume each box starts at such a boundary.
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ unsigned s_last;
  __shared__ uint64_t s_push_bar;  // the cluster receiver's: the other splits' arrivals
  __shared__ uint64_t s_stage_bar[kTma ? kWarps * Cfg::kStages : 1];  // kTma: a slot's copies
  cuda::PhaseTrace trace(cuda::phase_trace_records(a));

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int g = lane >> 2;        // fragment row group: a key of S^T, a dim of O^T, a row of Q
  const int t2 = (lane & 3) * 2;  // fragment column pair: this lane's two rows of S^T and O^T
  const int split = static_cast<int>(blockIdx.x);
  const int kv_head = static_cast<int>(blockIdx.y) / a.row_chunks;
  const int chunk = static_cast<int>(blockIdx.y) % a.row_chunks;
  const int seq = static_cast<int>(blockIdx.z);

  const int q_begin = a.query_start[seq];
  const int q_len = a.query_start[seq + 1] - q_begin;
  const int seq_len = a.seq_lens[seq];
  if (q_len < 1 || q_len > kDecodeMaxQueries || seq_len < q_len ||
      seq_len > a.max_blocks_per_seq * a.block_size)
    __trap();
  const int rows_total = q_len * a.group;
  const int row0 = chunk * kRows;
  if (row0 >= rows_total) return trace.finish();  // every split of this group: counter stays 0
  const int rows_here = min(kRows, rows_total - row0);

  // The block's keys: the union of its rows' windows, [lo, hi); this split's share of it.
  const int first_pos = seq_len - q_len + row0 / a.group;
  const int hi = seq_len - q_len + (row0 + rows_here - 1) / a.group + 1;
  const int lo = a.sliding_window > 0 ? max(0, first_pos - a.sliding_window + 1) : 0;
  // The splits this group uses: the launch's count is planned for the longest context the launch
  // allows (in a CUDA graph, the block table's capacity, e.g. a whole --max-model-len); a shorter
  // key range takes only as many as kDecodeMinKeysPerSplit keys each fill, as the host plan would
  // for its length, and the launch's other splits leave at once (decode_group_splits, which also
  // drops splits that whole stages leave empty). Every block of the group computes the same count,
  // so they agree on who merges and over how many partials.
  static_assert(kKeysPerStage == 16, "decode_group_splits cuts whole 16-key stages");
  const DecodeGroupSplits cut = decode_group_splits(a.splits, hi - lo);  // hi > lo: its own key
  const int splits = cut.splits, per_split = cut.per_split;
  // Whether the group merges its splits in its first cluster (group-uniform, like splits). Its
  // idle blocks there still take part in the cluster barrier (finish_block); the blocks of
  // its other clusters are all idle and leave at once, as do all idle blocks of an unclustered
  // group (a group of one split writes out directly, without barriers).
  const bool clustered = splits > 1 && splits <= a.cluster_width;
  if (split >= splits) {
    if (clustered && split < a.cluster_width) {
      cuda::pdl_launch_dependents();
      cuda::cluster_arrive_relaxed();  // the receiver's barrier counts every thread of the cluster
      cuda::cluster_wait();
    }
    return trace.finish();
  }
  trace.mark(kMarkMetadata);
  const int s_lo = min(hi, lo + split * per_split);
  const int s_hi = min(hi, s_lo + per_split);
  const int num_stages_total = (s_hi - s_lo + kKeysPerStage - 1) / kKeysPerStage;
  const int my_stages =
      num_stages_total > warp ? (num_stages_total - warp + kWarps - 1) / kWarps : 0;

  // Keys of this lane's two rows (t2, t2 + 1) within this split: [row_lo, row_hi), empty for
  // unused rows.
  int row_lo[2], row_hi[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int pos = t2 + r < rows_here ? seq_len - q_len + (row0 + t2 + r) / a.group : -1;
    row_lo[r] = a.sliding_window > 0 ? max(s_lo, pos - a.sliding_window + 1) : s_lo;
    row_hi[r] = min(s_hi, pos + 1);
  }
  const int32_t* table = a.block_tables + static_cast<int64_t>(seq) * a.max_blocks_per_seq;
  const int64_t kv_stride = static_cast<int64_t>(a.num_kv_heads) * kHeadDim;
  uint4* ring = reinterpret_cast<uint4*>(smem) + warp * (Cfg::kStages * 2 * Cfg::kStageChunks);
  auto stage_key = [&](int i) { return s_lo + (warp + i * kWarps) * kKeysPerStage; };
  uint64_t* stage_bar = s_stage_bar + (kTma ? warp * Cfg::kStages : 0);
  if constexpr (kTma) {
    // The warp's slot barriers: one arrival (lane 0's, with the stage's bytes) per phase.
    if (lane == 0) {
#pragma unroll
      for (int st = 0; st < Cfg::kStages; ++st) cuda::mbarrier_init(stage_bar + st, 1);
      cuda::fence_proxy_async_shared();  // the copy engine sees them initialised
    }
    __syncwarp();
  }

  // The physical block of key stage_key(i) + lane % 16 (0 where out of range): one table read
  // per lane per stage, shared with the lanes that copy that key by a shuffle.
  auto lookup = [&](int i) {
    const int key = stage_key(i) + (lane & 15);
    int blk = 0;
    if (i < my_stages && key < s_hi) {
      blk = table[a.block_shift >= 0 ? key >> a.block_shift : key / a.block_size];
      if (blk < 0 || blk >= a.num_blocks) __trap();
    }
    return blk;
  };
  // Stage i's K and V rows into ring slot i % kStages (swizzled); one commit group per stage,
  // empty past the end. Copy c of lane: chunk lane + 32c of the stage, i.e. key (lane + 32c) /
  // kChunks = lane / kChunks + c · kKeysPerCopy: consecutive lanes read consecutive 16 bytes of
  // one key row.
  constexpr int kKeysPerCopy = 32 / Cfg::kChunks;
  const int lane_key = lane / Cfg::kChunks, lane_chunk = lane % Cfg::kChunks;
  const int64_t lane_off =
      static_cast<int64_t>(kv_head) * kHeadDim + lane_chunk * 8 + lane_key * kv_stride;
  // Pages of a power-of-two size >= 16 and a 16-aligned split (no sliding window cut): each
  // stage's 16 keys lie in one page, so a stage needs one table entry and its copies' addresses
  // step by a constant stride from the stage's first row — ~10 instructions a copy where the
  // general path below spends ~45 (a shuffle, 64-bit multiplies, the page offset).
  const bool page_stages =
      a.block_shift >= 4 && (s_lo & (kKeysPerStage - 1)) == 0;  // block-uniform
  const int64_t copy_stride = kKeysPerCopy * kv_stride;
  auto issue = [&](int i, int blk) {
    uint4* slot = ring + (i % Cfg::kStages) * 2 * Cfg::kStageChunks;
    const int base = stage_key(i);
    if constexpr (kTma) {
      // Every stage's keys lie in one page here: the page's slots, one box per tensor and half.
      // Nothing past the split's stages (they are never awaited). Keys of the page past the
      // range arrive too (stale or never written: the loop masks their scores and zeroes their V).
      const int page = __shfl_sync(0xffffffffu, blk, 0);
      if (i < my_stages && lane == 0) {
        uint64_t* bar = stage_bar + i % Cfg::kStages;
        const int slot0 = (page << a.block_shift) + (base & (a.block_size - 1));
        cuda::mbarrier_arrive_expect_tx(bar, 2 * Cfg::kStageChunks * 16);
#pragma unroll
        for (int h = 0; h < kHeadDim / 64; ++h) {
          const int row = kv_head * (kHeadDim / 64) + h;
          cuda::tma_load_3d(slot + h * Cfg::kBoxChunks, &maps.k, 0, row, slot0, bar);
          cuda::tma_load_3d(slot + Cfg::kStageChunks + h * Cfg::kBoxChunks, &maps.v, 0, row, slot0,
                            bar);
        }
      }
      return;
    }
    if (page_stages) {
      const int64_t page = __shfl_sync(0xffffffffu, blk, 0);  // every lane looked up this page
      const int keys_left = i < my_stages ? s_hi - base : 0;
      int64_t off = ((page << a.block_shift) + (base & (a.block_size - 1))) * kv_stride + lane_off;
#pragma unroll
      for (int c = 0; c < Cfg::kCopies; ++c, off += copy_stride) {
        const int k = lane_key + c * kKeysPerCopy;
        const bool valid = k < keys_left;
        cuda::cp_async_16(slot + Cfg::at(k, lane_chunk), a.k_cache + off, valid);
        cuda::cp_async_16(slot + Cfg::kStageChunks + Cfg::at(k, lane_chunk), a.v_cache + off,
                          valid);
      }
      cuda::cp_async_commit();
      return;
    }
#pragma unroll
    for (int c = 0; c < Cfg::kCopies; ++c) {
      const int q = lane + 32 * c;
      const int k = q / Cfg::kChunks;
      const int ch = q % Cfg::kChunks;
      const int key = base + k;
      const int64_t b = __shfl_sync(0xffffffffu, blk, k);
      const bool valid = i < my_stages && key < s_hi;
      const int offset = !valid               ? 0
                         : a.block_shift >= 0 ? key & (a.block_size - 1)
                                              : key % a.block_size;
      const int64_t off = (b * a.block_size + offset) * kv_stride +
                          static_cast<int64_t>(kv_head) * kHeadDim + ch * 8;
      cuda::cp_async_16(slot + Cfg::at(k, ch), a.k_cache + (valid ? off : 0), valid);
      cuda::cp_async_16(slot + Cfg::kStageChunks + Cfg::at(k, ch), a.v_cache + (valid ? off : 0),
                        valid);
    }
    cuda::cp_async_commit();
  };

  float m[2] = {kEmptyMax, kEmptyMax}, l[2] = {0.0f, 0.0f};
  float acc[kSteps][4];  // O^T tile ms: dims 16·ms + g (+8), rows t2, t2 + 1
#pragma unroll
  for (int ms = 0; ms < kSteps; ++ms)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[ms][e] = 0.0f;

  // ldmatrix row addresses within a stage: K (A of S^T, non-transposed): matrix lane/8 is keys
  // 8·(lane/8 % 2) + lane % 8, chunk 2·ks + lane/16; V (A of O^T, transposed): keys
  // 8·(lane/16) + lane % 8, chunk 2·ms + lane/8 % 2.
  const int k_key = ((lane >> 3) & 1) * 8 + (lane & 7), k_half = lane >> 4;
  const int v_key = (lane >> 4) * 8 + (lane & 7), v_half = (lane >> 3) & 1;

  // The first stages' table reads all in flight together, then their copies.
  int first_blocks[Cfg::kStages];
#pragma unroll
  for (int i = 0; i < Cfg::kStages; ++i) first_blocks[i] = lookup(i);
  trace.mark_after(kMarkTable, static_cast<uint32_t>(first_blocks[0]));
  // The ring's first stages whose keys all precede this step's (positions < seq_len - q_len:
  // written by earlier steps, never by the kernel before) are copied before the PDL wait, while
  // the kernel before still runs — a prefix of them, as keys grow with the stage; warp-uniform.
  // Where that kernel leaves SMs free (Qwen2.5-0.5B's q|k|v with its RoPE epilogue: 72 blocks)
  // this block is resident early and the first stage's DRAM latency overlaps it: the qwen2.5-0.5b
  // bs 1 step -1.3 to -2.1 %, llama3-8b bs 1 -0 to -0.7 % on the H200
  // (bench/results/2026-12-01-skinny-cluster-merge.md). This step's keys are copied after the
  // wait (ReadsThisStepsKeysOnlyAfterTheKernelBeforeWroteThem guards it). Issuing that stage early
  // too and copying the key's row again after the wait measured level
  // (bench/results/2026-12-01-l2-prefetch-and-key-patch.md).
  int early = 0;
  {
    const int cached_keys = seq_len - q_len;
#pragma unroll
    for (int i = 0; i < Cfg::kStages - 1; ++i)
      if (early == i && (i >= my_stages || min(stage_key(i) + kKeysPerStage, s_hi) <= cached_keys))
        early = i + 1;
  }
#pragma unroll
  for (int i = 0; i < Cfg::kStages - 1; ++i)
    if (i < early) issue(i, first_blocks[i]);
  // Everything above read only host-uploaded metadata, tables and earlier steps' K/V; q and the
  // K/V this step's qkv_rope wrote come from the kernel before, so wait for it here
  // (programmatic dependent launch: the prologue above overlapped its tail).
  cuda::pdl_wait();
  trace.mark(kMarkWait);
  cuda::pdl_launch_dependents();
  // Q^T as B fragments, for all of head_dim: row g of the block, dims 16·ks + t2 (+1) and +8.
  uint32_t qf[kSteps][2];
  {
    const int row = row0 + g;
    const bool used = g < rows_here;
    const int j = row / a.group;
    const int head = kv_head * a.group + row % a.group;
    const uint32_t* q_row = reinterpret_cast<const uint32_t*>(
        a.q + (static_cast<int64_t>(q_begin + j) * a.num_heads + head) * kHeadDim);
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      qf[ks][0] = used ? q_row[(ks * 16 + t2) / 2] : 0u;
      qf[ks][1] = used ? q_row[(ks * 16 + 8 + t2) / 2] : 0u;
    }
  }
  trace.mark_after(kMarkQuery, qf[0][0]);
#pragma unroll
  for (int i = 0; i < Cfg::kStages - 1; ++i)
    if (i >= early) issue(i, first_blocks[i]);
  int blk = first_blocks[Cfg::kStages - 1];
  for (int i = 0; i < my_stages; ++i) {
    issue(i + Cfg::kStages - 1, blk);  // its block looked up one stage ago
    blk = lookup(i + Cfg::kStages);
    uint4* slot = ring + (i % Cfg::kStages) * 2 * Cfg::kStageChunks;
    if constexpr (kTma) {
      cuda::mbarrier_wait(stage_bar + i % Cfg::kStages,
                          static_cast<unsigned>(i / Cfg::kStages) & 1u);  // the slot's copies
      // A stage past the range's end holds keys of the page no one attends: their scores are
      // masked below, and their V rows (stale, never written: possibly NaN, which times a zero
      // probability is still NaN) are zeroed, as the cp.async path zero-fills them.
      const int keys_left = s_hi - stage_key(i);
      if (keys_left < kKeysPerStage) {
        for (int c = lane; c < (kKeysPerStage - keys_left) * Cfg::kChunks; c += 32)
          slot[Cfg::kStageChunks + Cfg::tma_at(keys_left + c / Cfg::kChunks, c % Cfg::kChunks)] =
              make_uint4(0u, 0u, 0u, 0u);
        __syncwarp();
      }
    } else {
      cuda::cp_async_wait<Cfg::kStages - 1>();  // this lane's copies of stage i have landed
      __syncwarp();                             // and every lane's are visible to the warp
    }
    if (i == 0) trace.mark(kMarkFirstStage);

    // S^T = K · Q^T for 16 keys: s[0], s[1]: key g, rows t2, t2+1; s[2], s[3]: key g + 8.
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      uint32_t ka[4];
      cuda::ldmatrix_x4(ka, slot + (kTma ? Cfg::tma_at(k_key, 2 * ks + k_half)
                                         : Cfg::at(k_key, 2 * ks + k_half)));
      cuda::mma_bf16(s, ka, qf[ks][0], qf[ks][1]);
    }
    const int key0 = stage_key(i) + g;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = key0 + (e >> 1) * 8, r = e & 1;
      s[e] = key >= row_lo[r] && key < row_hi[r] ? s[e] * a.scale_log2 : kNegInf;
    }
    // Online softmax per row over the warp's 8 lanes that hold it (lanes t2/2 + 4j).
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = fmaxf(s[r], s[2 + r]);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
      mx = fmaxf(m[r], mx);
      const float alpha = cuda::fast_exp2(m[r] - mx);
      s[r] = cuda::fast_exp2(s[r] - mx);
      s[2 + r] = cuda::fast_exp2(s[2 + r] - mx);
      l[r] = l[r] * alpha + s[r] + s[2 + r];  // this lane's keys only; summed over lanes at the end
      m[r] = mx;
#pragma unroll
      for (int ms = 0; ms < kSteps; ++ms) {
        acc[ms][r] *= alpha;
        acc[ms][2 + r] *= alpha;
      }
    }
    // P^T as B fragments (keys 2·(lane%4) (+1) and +8, row g): the transposes of the S^T
    // accumulators' two 8 x 8 halves.
    const uint32_t pb0 = cuda::movmatrix_trans(cuda::pack_bf16(s[0], s[1]));
    const uint32_t pb1 = cuda::movmatrix_trans(cuda::pack_bf16(s[2], s[3]));
    // O^T += V^T · P^T, 16 head dims per MMA.
#pragma unroll
    for (int ms = 0; ms < kSteps; ++ms) {
      uint32_t va[4];
      cuda::ldmatrix_x4_trans(
          va, slot + Cfg::kStageChunks +
                  (kTma ? Cfg::tma_at(v_key, 2 * ms + v_half) : Cfg::at(v_key, 2 * ms + v_half)));
      cuda::mma_bf16(acc[ms], va, pb0, pb1);
    }
    __syncwarp();  // every lane is done reading this slot before the warp refills it
  }
  if constexpr (!kTma) cuda::cp_async_wait_all();  // (the bulk copies were all awaited)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 4);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 8);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 16);
  }
  trace.mark(kMarkLoop);

  // Leave each warp's rows in shared memory (the ring is free once every warp's copies landed).
  __syncthreads();
  float* s_acc = reinterpret_cast<float*>(smem);   // [kWarps][kRows][kHeadDim]
  float* s_m = s_acc + kWarps * kRows * kHeadDim;  // [kWarps][kRows]
  float* s_l = s_m + kWarps * kRows;               // [kWarps][kRows]
#pragma unroll
  for (int ms = 0; ms < kSteps; ++ms)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      s_acc[(warp * kRows + t2 + (e & 1)) * kHeadDim + ms * 16 + g + (e >> 1) * 8] = acc[ms][e];
  if (g == 0) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      s_m[warp * kRows + t2 + r] = m[r];
      s_l[warp * kRows + t2 + r] = l[r];
    }
  }
  finish_block<kHeadDim, kRows>(a, smem, &s_last, &s_push_bar, seq, kv_head, row0, rows_here,
                                q_begin, splits, clustered, trace);
}

// Resident blocks of one kernel on the current device, measured once per device and kernel.
template <auto kKernel, int kSmemBytes>
int64_t resident_blocks(int device) {
  constexpr int kMaxDevices = 64;
  static int64_t blocks[kMaxDevices] = {};
  static std::once_flag once[kMaxDevices];
  ROOFLINE_CHECK(device >= 0 && device < kMaxDevices);
  std::call_once(once[device], [device] {
    ROOFLINE_CUDA_CHECK(
        cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    int per_sm = 0, sms = 0;
    ROOFLINE_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kKernel, kThreads, kSmemBytes));
    ROOFLINE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    ROOFLINE_CHECK_MSG(per_sm > 0, "paged decode attention kernel cannot be resident on this GPU");
    blocks[device] = static_cast<int64_t>(per_sm) * sms;
  });
  return blocks[device];
}

// Clusters of the decode kernel the device runs at once (cuda::max_active_clusters). A launch
// clusters its splits only when all its clusters fit at once: a second wave of short blocks costs
// more than the merge saves (H200, B=8 L=512: 64 clusters of 4, 10.2 -> 16.9 us).
// ROOFLINE_DECODE_CLUSTER=0 merges every split through the workspace, for A/B runs.
template <auto kKernel, int kSmemBytes>
int64_t max_active_clusters(int64_t size) {
  return cuda::max_active_clusters<kKernel, kThreads, kSmemBytes, kDecodeMaxClusterSplits>(
      size, "ROOFLINE_DECODE_CLUSTER");
}

// Plans and launches one kernel (kRows rows per block) over the batch; `maps` for the bulk-copy
// kernels.
template <auto kKernel, int kSmemBytes, int kRows>
void launch(const PagedAttentionParams& p, int64_t max_q_len, int64_t max_seq_len,
            const PagedKvMaps& maps, cudaStream_t stream) {
  int device = 0;
  ROOFLINE_CUDA_CHECK(cudaGetDevice(&device));
  const int64_t group = p.num_heads / p.num_kv_heads;
  const DecodePlan plan =
      plan_decode_attention(p.num_seqs, p.num_kv_heads, group, max_q_len, max_seq_len,
                            resident_blocks<kKernel, kSmemBytes>(device));
  ROOFLINE_CHECK(plan.rows == kRows);
  DecodeArgs a;
  a.q = static_cast<const __nv_bfloat16*>(p.q);
  a.k_cache = static_cast<const __nv_bfloat16*>(p.k_cache);
  a.v_cache = static_cast<const __nv_bfloat16*>(p.v_cache);
  a.block_tables = p.block_tables;
  a.seq_lens = p.seq_lens;
  a.query_start = p.query_start;
  a.out = static_cast<__nv_bfloat16*>(p.out);
  auto* ws = static_cast<uint8_t*>(p.workspace);
  a.part_out = reinterpret_cast<float*>(ws);
  a.part_lse = reinterpret_cast<float*>(ws + kDecodePartialOutBytes);
  a.counters = reinterpret_cast<unsigned*>(ws + kDecodePartialOutBytes + kDecodePartialLseBytes);
  a.num_blocks = p.num_blocks;
  a.num_heads = static_cast<int>(p.num_heads);
  a.num_kv_heads = static_cast<int>(p.num_kv_heads);
  a.group = static_cast<int>(group);
  a.block_size = static_cast<int>(p.block_size);
  a.block_shift = -1;
  for (int shift = 0; shift < 31; ++shift)
    if ((int64_t{1} << shift) == p.block_size) a.block_shift = shift;
  a.max_blocks_per_seq = static_cast<int>(p.max_blocks_per_seq);
  a.sliding_window = static_cast<int>(p.sliding_window);
  a.row_chunks = static_cast<int>(plan.row_chunks);
  a.splits = static_cast<int>(plan.splits);
  // Clusters of `width` splits, ceil(splits / width) per group, the last padded with blocks that
  // leave at once: only when every cluster of the launch fits on the GPU at once.
  const int64_t width = decode_cluster_width(plan.splits);
  const int64_t clusters_per_group = (plan.splits + width - 1) / width;
  const int64_t groups = p.num_seqs * p.num_kv_heads * plan.row_chunks;
  const bool clustered =
      width > 1 && groups * clusters_per_group <= max_active_clusters<kKernel, kSmemBytes>(width);
  a.cluster_width = clustered ? static_cast<int>(width) : 0;
  const int64_t grid_x = clustered ? width * clusters_per_group : plan.splits;
  a.scale_log2 = p.scale * 1.4426950408889634f;
  const int64_t head_blocks = p.num_kv_heads * plan.row_chunks;
  ROOFLINE_CHECK(head_blocks <= 65535 && p.num_seqs <= 65535);
  const dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(head_blocks),
                  static_cast<unsigned>(p.num_seqs));
#if defined(ROOFLINE_PHASE_TRACE)
  a.trace = decode_attention_phase_trace().next(grid_x * head_blocks * p.num_seqs);
#endif
  cuda::launch_pdl_clustered(kKernel, grid, dim3(kThreads), kSmemBytes, stream,
                             clustered ? static_cast<unsigned>(width) : 1u, a, maps);
  ROOFLINE_CUDA_LAUNCH_CHECK(stream);
}

// Whether launches may take the bulk-copy kernels: ROOFLINE_DECODE_TMA=0 keeps every launch on
// cp.async (the A/B switch; read once).
bool decode_tma_allowed() {
  static const bool on = [] {
    const char* v = std::getenv("ROOFLINE_DECODE_TMA");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

template <int kHeadDim>
void dispatch(const PagedAttentionParams& p, int64_t max_q_len, int64_t max_seq_len,
              cudaStream_t stream) {
  using Cfg = MmaDecodeConfig<kHeadDim>;
  PagedKvMaps maps;  // the cp.async kernels take it too (zeroed, unread): one launcher for both
  std::memset(&maps, 0, sizeof(maps));
  if constexpr (kHeadDim >= 64) {
    if (decode_tma_allowed() && encode_paged_kv_maps(p, &maps))
      return launch<paged_decode_kernel<kHeadDim, true>, Cfg::kSmemBytes, Cfg::kRows>(
          p, max_q_len, max_seq_len, maps, stream);
  }
  launch<paged_decode_kernel<kHeadDim, false>, Cfg::kSmemBytes, Cfg::kRows>(
      p, max_q_len, max_seq_len, maps, stream);
}

}  // namespace

#if defined(ROOFLINE_PHASE_TRACE)
PhaseTraceRecorder& decode_attention_phase_trace() {
  static PhaseTraceRecorder recorder;
  return recorder;
}
#endif

namespace {

template <int kHeadDim>
DecodeClusterCapacity cluster_capacity() {
  constexpr auto kKernel = paged_decode_kernel<kHeadDim, false>;
  constexpr int kSmemBytes = MmaDecodeConfig<kHeadDim>::kSmemBytes;
  int device = 0;
  ROOFLINE_CUDA_CHECK(cudaGetDevice(&device));
  resident_blocks<kKernel, kSmemBytes>(device);  // sets the kernel's shared memory size first
  DecodeClusterCapacity c{};
  for (int64_t w = 2; w <= kDecodeMaxClusterSplits; ++w)
    c[static_cast<size_t>(w)] = max_active_clusters<kKernel, kSmemBytes>(w);
  return c;
}

}  // namespace

DecodeClusterCapacity paged_attention_decode_cluster_capacity(int64_t head_dim) {
  switch (head_dim) {
    case 32:
      return cluster_capacity<32>();
    case 64:
      return cluster_capacity<64>();
    case 128:
      return cluster_capacity<128>();
    case 256:
      return cluster_capacity<256>();
    default:
      ROOFLINE_CHECK_MSG(false,
                         "paged_attention_decode_cluster_capacity: head_dim must be 32, 64, 128 "
                         "or 256");
      return {};
  }
}

void paged_attention_decode_cuda(const PagedAttentionParams& p, int64_t max_q_len,
                                 int64_t max_seq_len, CudaStream stream) {
  ROOFLINE_CHECK(max_q_len >= 1 && max_q_len <= kDecodeMaxQueries);
  ROOFLINE_CHECK(max_seq_len >= 1 && max_seq_len <= INT_MAX);
  ROOFLINE_CHECK_MSG(p.workspace != nullptr,
                     "paged_attention_cuda: the decode kernel needs params.workspace "
                     "(paged_attention_cuda_workspace_bytes(), zero-filled)");
  switch (p.head_dim) {
    case 32:
      dispatch<32>(p, max_q_len, max_seq_len, stream);
      return;
    case 64:
      dispatch<64>(p, max_q_len, max_seq_len, stream);
      return;
    case 128:
      dispatch<128>(p, max_q_len, max_seq_len, stream);
      return;
    case 256:
      dispatch<256>(p, max_q_len, max_seq_len, stream);
      return;
    default:
      ROOFLINE_CHECK_MSG(false, "paged_attention_cuda: head_dim must be 32, 64, 128 or 256");
  }
}

}  // namespace roofline
