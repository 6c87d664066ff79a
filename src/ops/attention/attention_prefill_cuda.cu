// paged_attention_prefill_cuda: FlashAttention over a paged bf16 KV cache on tensor cores, for
// ragged batches of prefill and chunked-prefill sequences (and tree-masked verification): exactly
// the computation of paged_attention_cpu, with the n × n score matrix never leaving registers.
//
// Algorithm (FlashAttention-2's forward pass; two kernels, chosen per head dim by kPrefillTiles):
// - One block per (sequence, KV head, tile of rows), a row being one (query token, query head of
//   the GQA group) pair, token-major (attention_prefill_plan.h). The block's key range is [first
//   attended position of its first token, position of its last token]; tiles are taken last-first
//   so the longest causal rows start first: one KV head at a time, or across all heads and
//   sequences where the launch's K/V fit in L2 (PrefillBlockOrder).
// - Q tile -> shared memory with cp.async; K/V tiles gathered through the block table with
//   cp.async (16-byte chunks; positions past the block's range are zero-filled, never read),
//   double-buffered (mma.sync kernel) or through a 3-stage ring (wgmma kernel): the next tiles
//   are in flight while this one is computed.
// - S = Q·Kᵀ on tensor cores (bf16 in, f32 accumulate); the causal / sliding-window / tree mask
//   on the tiles that cross a row's boundary only; an online softmax in registers (running max
//   and sum per row, each row's four owner threads reducing with two shuffles; base-2
//   exponentials with log2(e) folded into the scale); O += P·V with P re-packed from the S
//   accumulators as bf16 A fragments (the C layout of two adjacent n8 columns is the A layout of
//   one k16 step).
// - mma.sync kernel (head_dim 32, 64, 256; the sm_80-style version): padded shared-memory tiles,
//   K fragments by ldmatrix, V fragments by ldmatrix.trans, each warp 16·m_tiles rows.
// - wgmma kernel (head_dim 128), warp-specialised as FlashAttention-3 is: a producer warpgroup
//   only gathers K/V (cp.async into a 3-stage ring whose mbarriers the copies complete; consumers
//   release a stage through another mbarrier) and hands its registers (setmaxnreg) to two
//   consumer warpgroups of 64 rows. They issue Hopper's warpgroup MMA, operands read by the
//   tensor cores from 128-byte-swizzled shared memory through descriptors, P from registers;
//   tile j's Q·Kᵀ and tile j-1's P·V are issued together and the turn passes to the other
//   warpgroup (named barriers), so each softmax runs while the tensor cores work for the other
//   warpgroup or on this one's P·V.
// - Epilogue: O / rowsum, rounded to bf16, staged through shared memory (the Q tile; stmatrix in
//   the wgmma kernel), written as 16-byte row chunks.
//
// Numerics: f32 scores and softmax state, P rounded to bf16 for the P·V MMA (as FlashAttention
// does: a relative error <= 2^-9 per probability, so |out - exact| grows by at most 2^-9·max|v|),
// f32 accumulation, one rounding of the output.
//
// Bound: 4·head_dim FLOPs per (query, key, head) on tensor cores (half of a causal square masked
// away at tile granularity); K/V come from L2 for all but the first block that reads a tile.
//
// Broken invariants on the device (q_len < 1, seq_len < q_len, seq_len beyond the block table, a
// block id outside [0, num_blocks), a tree-masked row that attends no key) trap: the kernel aborts
// the context rather than read outside the cache or write a NaN.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <mutex>

#include "core/check.h"
#include "core/cuda_check.h"
#include "ops/attention/attention.h"
#include "ops/attention/attention_prefill_plan.h"
#include "ops/common/cuda_async.cuh"
#include "ops/common/cuda_barrier.cuh"
#include "ops/common/cuda_mma.cuh"
#include "ops/common/cuda_phase_trace.cuh"
#include "ops/common/cuda_vector.cuh"
#include "ops/common/cuda_wgmma.cuh"
#include "ops/common/env_switch.h"

// The head_dim 128 kernel is built on wgmma, which only sm_90a has (CMakePresets.json builds 90a).
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "attention_prefill_cuda.cu needs the sm_90a target (wgmma): set CMAKE_CUDA_ARCHITECTURES=90a"
#endif

namespace roofline {

namespace {

using cuda::ldmatrix_x4;
using cuda::ldmatrix_x4_trans;
using cuda::mma_bf16;
using cuda::pack_bf16;
using cuda::smem_addr;

constexpr float kLog2e = 1.4426950408889634f;

struct PrefillArgs {
  const __nv_bfloat16* q;        // [num_tokens, num_heads, head_dim]
  const __nv_bfloat16* k_cache;  // [num_blocks, block_size, num_kv_heads, head_dim]
  const __nv_bfloat16* v_cache;
  const int32_t* block_tables;  // [num_seqs, max_blocks_per_seq]
  const int32_t* seq_lens;      // [num_seqs]
  const int32_t* query_start;   // [num_seqs + 1]
  const uint64_t* tree_mask;    // [num_tokens] or null (causal)
  __nv_bfloat16* out;           // [num_tokens, num_heads, head_dim]
  int64_t num_blocks;
  int num_heads;
  int num_kv_heads;
  int group;  // query heads per KV head
  int block_size;
  int block_shift;  // log2(block_size) when it is a power of two (the usual 16), else -1
  int max_blocks_per_seq;
  int sliding_window;  // 0: unlimited
  float scale_log2;    // scale · log2(e)
  int longest_first;   // PrefillBlockOrder::kLongestFirst (block_rows)
  int slot_shift;      // prefill_slot_shift: log2(num_kv_heads · head_dim), or -1
#if defined(ROOFLINE_PHASE_TRACE)
  uint64_t* trace;  // the launch's phase records, or nullptr
#endif
};

// ---- What both kernels share: the block's rows and key range, the Q and K/V gathers, and the
// masked online softmax of one row of an S fragment.

// One block's sequence, rows and keys.
struct BlockRows {
  int q_begin = 0;     // first query token of the sequence in q / out
  int rows_total = 0;  // the sequence's rows: q_len · group
  int r0 = 0;          // the block's first row
  int ctx0 = 0;        // position of the sequence's first query
  int kv_begin = 0;    // keys any row of the block attends: [kv_begin, kv_end)
  int kv_end = 0;
  int window_clear = 0;  // tiles starting at or past this need no window mask
  int causal_clear = 0;  // tiles ending at or before this need no causal / tree mask
  int kv_head = 0;
  const int32_t* table = nullptr;
};

// The rows of block for blocks of kRows rows, in the order the launch chose
// (PrefillBlockOrder): head-major, the grid's own (blockIdx.x counted from the last tile, so the
// longest causal rows start first), or longest first across all heads and sequences (the linear
// block index read as rank = linear / (heads · seqs), then the sequence, then the KV head). False
// when the block has no rows (it leaves). Traps on a broken batch layout: the CPU twin's checks,
// on the device.
template <int kRows>
__device__ __forceinline__ bool block_rows(const PrefillArgs& a, BlockRows* b) {
  int seq = static_cast<int>(blockIdx.z);
  int tile = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  int kv_head = static_cast<int>(blockIdx.y);
  if (a.longest_first) {
    const int64_t heads = gridDim.y;
    const int64_t per_rank = heads * gridDim.z;
    const int64_t linear =
        blockIdx.x + static_cast<int64_t>(gridDim.x) *
                         (blockIdx.y + static_cast<int64_t>(gridDim.y) * blockIdx.z);
    const int64_t rank = linear / per_rank;
    const int rest = static_cast<int>(linear - rank * per_rank);
    seq = rest / static_cast<int>(heads);
    kv_head = rest - seq * static_cast<int>(heads);
    tile = static_cast<int>(gridDim.x - 1 - rank);
  }
  b->q_begin = a.query_start[seq];
  const int q_len = a.query_start[seq + 1] - b->q_begin;
  const int seq_len = a.seq_lens[seq];
  if (q_len < 1 || seq_len < q_len ||
      static_cast<int64_t>(seq_len) > static_cast<int64_t>(a.max_blocks_per_seq) * a.block_size ||
      (a.tree_mask != nullptr && q_len > kTreeMaxQueries)) {
    __trap();
  }
  b->rows_total = q_len * a.group;
  b->r0 = tile * kRows;
  if (b->r0 >= b->rows_total) return false;
  b->ctx0 = seq_len - q_len;
  const int t_first = b->r0 / a.group;
  const int t_last = (min(b->r0 + kRows, b->rows_total) - 1) / a.group;
  b->kv_begin = a.sliding_window > 0 ? max(0, b->ctx0 + t_first - a.sliding_window + 1) : 0;
  b->kv_end = a.tree_mask != nullptr ? seq_len : b->ctx0 + t_last + 1;
  b->window_clear = a.sliding_window > 0 ? max(0, b->ctx0 + t_last - a.sliding_window + 1) : 0;
  b->causal_clear = a.tree_mask != nullptr ? b->ctx0 : b->ctx0 + t_first + 1;
  b->kv_head = kv_head;
  b->table = a.block_tables + static_cast<int64_t>(seq) * a.max_blocks_per_seq;
  return true;
}

// Whether a tile of kKeys keys from tile_start crosses some row's first or last attended key.
template <int kKeys>
__device__ __forceinline__ bool tile_needs_mask(const BlockRows& b, int tile_start) {
  return tile_start + kKeys > b.causal_clear || tile_start < b.window_clear ||
         tile_start + kKeys > b.kv_end;
}

// Cache slot (block · block_size + place in the block) of position kp's key, through the block
// table; the launcher checks that every slot fits 31 bits. A power-of-two block size takes a shift
// and a mask instead of an integer division.
__device__ __forceinline__ int kv_slot(const PrefillArgs& a, const BlockRows& b, int kp) {
  int page, in_page;
  if (a.block_shift >= 0) {
    page = kp >> a.block_shift;
    in_page = kp & (a.block_size - 1);
  } else {
    page = kp / a.block_size;
    in_page = kp - page * a.block_size;
  }
  const int32_t block = b.table[page];
  if (block < 0 || block >= a.num_blocks) __trap();  // a block id outside the cache
  return block * a.block_size + in_page;
}

// Element offset of position kp's K/V row for the block's KV head (the mma.sync kernels' gathers
// compute this for every 16-byte chunk they issue).
__device__ __forceinline__ int64_t kv_row_offset(const PrefillArgs& a, const BlockRows& b, int kp,
                                                 int head_dim) {
  return static_cast<int64_t>(kv_slot(a, b, kp)) *
             (static_cast<int64_t>(a.num_kv_heads) * head_dim) +
         static_cast<int64_t>(b.kv_head) * head_dim;
}

// The block's Q tile (kRows rows) -> shared memory with cp.async, 16-byte chunks; dst(row, chunk)
// is the chunk's shared-memory address. Rows past the sequence's queries are zero-filled.
template <int kRows, int kHeadDim, int kThreads, typename Dst>
__device__ __forceinline__ void load_q_tile(const PrefillArgs& a, const BlockRows& b, int tid,
                                            Dst dst) {
  constexpr int kChunks = kHeadDim / 8;
  for (int idx = tid; idx < kRows * kChunks; idx += kThreads) {
    const int row = idx / kChunks;
    const int chunk = idx % kChunks;
    const int gr = b.r0 + row;
    const bool valid = gr < b.rows_total;
    const __nv_bfloat16* src = a.q;
    if (valid) {
      const int64_t token = b.q_begin + gr / a.group;
      const int head = b.kv_head * a.group + gr % a.group;
      src = a.q + (token * a.num_heads + head) * kHeadDim + chunk * 8;
    }
    cuda::cp_async_16(dst(row, chunk), src, valid);
  }
}

// One K and one V tile of kKeys positions from tile_start -> shared memory with cp.async;
// dst_k(key, chunk) / dst_v(key, chunk) are the chunks' shared-memory addresses. Positions past
// the block's keys are zero-filled, never read.
template <int kKeys, int kHeadDim, int kThreads, typename DstK, typename DstV>
__device__ __forceinline__ void load_kv_tile(const PrefillArgs& a, const BlockRows& b, int tid,
                                             int tile_start, DstK dst_k, DstV dst_v) {
  constexpr int kChunks = kHeadDim / 8;
  static_assert((kKeys * kChunks) % kThreads == 0, "every thread copies as many K/V chunks");
#pragma unroll
  for (int it = 0; it < kKeys * kChunks / kThreads; ++it) {
    const int idx = it * kThreads + tid;
    const int key = idx / kChunks;
    const int chunk = idx % kChunks;
    const int kp = tile_start + key;
    const bool valid = kp < b.kv_end;
    const int64_t offset = valid ? kv_row_offset(a, b, kp, kHeadDim) + chunk * 8 : 0;
    cuda::cp_async_16(dst_k(key, chunk), a.k_cache + offset, valid);
    cuda::cp_async_16(dst_v(key, chunk), a.v_cache + offset, valid);
  }
}

// Row h (0: lane/4, 1: lane/4 + 8) of an m16 S fragment of kTiles n8 tiles (C layout: element
// [n][2h + c] is key tile_start + 8n + 2·(lane%4) + c), global row gr: masks it when the tile
// needs it, folds it into the row's running max m (of raw scores) and sum l, and leaves the
// probabilities exp2((s - m)·scale·log2e) in place. Returns the factor the row's output must be
// rescaled by. Scores stay unscaled until the exponent: one FFMA per score (scale > 0 keeps the
// order of the maximum). The mask is a template argument: the tiles inside every row's range
// (all but one or two per block) run straight-line code with no per-score compare.
template <bool kMasked, int kTiles>
__device__ __forceinline__ float softmax_row(float (&s)[kTiles][4], int h, int gr, int tile_start,
                                             int lane, const PrefillArgs& a, const BlockRows& b,
                                             float& m, float& l) {
  int pos = 0, first = 0;
  uint64_t tree = 0;
  if constexpr (kMasked) {
    const int t = gr / a.group;  // past q_len for padding rows: harmless, never written
    pos = b.ctx0 + t;
    first = a.sliding_window > 0 ? max(0, pos - a.sliding_window + 1) : 0;
    if (a.tree_mask != nullptr && gr < b.rows_total) tree = a.tree_mask[b.q_begin + t];
  }
  float mx = -INFINITY;
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      float x = s[n][2 * h + c];
      if constexpr (kMasked) {
        const int kp = tile_start + n * 8 + (lane % 4) * 2 + c;
        bool attended = kp < b.kv_end && kp >= first;
        if (a.tree_mask != nullptr) {
          attended = attended && (kp < b.ctx0 || ((tree >> (kp - b.ctx0)) & 1u) != 0);
        } else {
          attended = attended && kp <= pos;
        }
        if (!attended) x = -INFINITY;
      }
      s[n][2 * h + c] = x;
      mx = fmaxf(mx, x);
    }
  }
  // The row's four owner threads are lanes 4·(lane/4) ... + 3.
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  const float m_new = fmaxf(m, mx);
  // A row that has attended nothing yet keeps m = -inf; an exponent base of 0 then keeps every
  // exp2(-inf) = 0 instead of exp2(-inf - -inf) = NaN.
  const float m_ref = m_new == -INFINITY ? 0.0f : m_new * a.scale_log2;
  const float alpha = cuda::fast_exp2(fmaf(m, a.scale_log2, -m_ref));
  m = m_new;
  float sum = 0.0f;
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const float p = cuda::fast_exp2(fmaf(s[n][2 * h + c], a.scale_log2, -m_ref));
      s[n][2 * h + c] = p;
      sum += p;
    }
  }
  l = l * alpha + sum;
  return alpha;
}

// The P·V A fragment of k16 step kk from an m16 S fragment: the C layout of n8 tiles 2kk and
// 2kk + 1 is the A layout of one k16 step.
template <int kTiles>
__device__ __forceinline__ void p_fragment(const float (&s)[kTiles][4], int kk, uint32_t (&pa)[4]) {
  pa[0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
  pa[1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
  pa[2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
  pa[3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

// The row sum of row h across its four owner threads; traps when a row the block owns attended no
// key (a tree mask without the query's own bit), returns 1 / sum (0 for padding rows).
__device__ __forceinline__ float row_normaliser(float l, int gr, const BlockRows& b) {
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  if (gr < b.rows_total && !(l > 0.0f)) __trap();
  return gr < b.rows_total ? 1.0f / l : 0.0f;
}

// Writes row `row` of a staged output tile (16-byte chunks at src(row, chunk)) to out, if the block
// owns it.
template <int kHeadDim, typename Src>
__device__ __forceinline__ void store_out_row(const PrefillArgs& a, const BlockRows& b, int row,
                                              int chunk, Src src) {
  const int gr = b.r0 + row;
  if (gr >= b.rows_total) return;
  const int64_t token = b.q_begin + gr / a.group;
  const int head = b.kv_head * a.group + gr % a.group;
  *reinterpret_cast<uint4*>(a.out + (token * a.num_heads + head) * kHeadDim + chunk * 8) =
      *reinterpret_cast<const uint4*>(src(row, chunk));
}

// ---- The mma.sync kernel (head_dim 32, 64, 256): padded tiles, each warp 16·kMTiles rows.
template <int kHeadDim, int kWarps, int kMTiles, int kKeys, bool kQInRegisters>
__global__ void __launch_bounds__(kWarps * 32) flash_prefill_kernel(const PrefillArgs a) {
  constexpr int kWarpRows = 16 * kMTiles;
  constexpr int kRows = kWarpRows * kWarps;
  constexpr int kThreads = 32 * kWarps;
  constexpr int kStride = kHeadDim + 8;     // shared-memory row, elements
  constexpr int kChunks = kHeadDim / 8;     // 16-byte chunks of a bf16 row
  constexpr int kDimSteps = kHeadDim / 16;  // k-steps of Q·Kᵀ
  constexpr int kKeyTiles = kKeys / 8;      // n8 tiles of S
  constexpr int kKeySteps = kKeys / 16;     // k-steps of P·V
  constexpr int kDimTiles = kHeadDim / 8;   // n8 tiles of O
  static_assert(kHeadDim % 16 == 0 && kKeys % 16 == 0, "whole m16n8k16 steps");

  extern __shared__ __align__(16) unsigned char smem[];
  auto* q_s = reinterpret_cast<__nv_bfloat16*>(smem);  // [kRows][kStride]
  __nv_bfloat16* k_s = q_s + kRows * kStride;          // [2][kKeys][kStride]
  __nv_bfloat16* v_s = k_s + 2 * kKeys * kStride;      // [2][kKeys][kStride]

  BlockRows b;
  if (!block_rows<kRows>(a, &b)) return;  // uniform: the whole block leaves
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  // This thread's rows: lane/4 + 8·i of the warp's, i < 2·kMTiles (m16 tile i/2, half i%2).
  const int thread_row0 = b.r0 + warp * kWarpRows + lane / 4;

  load_q_tile<kRows, kHeadDim, kThreads>(
      a, b, tid, [&](int row, int chunk) { return q_s + row * kStride + chunk * 8; });
  cuda::cp_async_commit();
  auto load_kv = [&](int stage, int tile_start) {
    __nv_bfloat16* kd = k_s + stage * kKeys * kStride;
    __nv_bfloat16* vd = v_s + stage * kKeys * kStride;
    load_kv_tile<kKeys, kHeadDim, kThreads>(
        a, b, tid, tile_start, [&](int key, int chunk) { return kd + key * kStride + chunk * 8; },
        [&](int key, int chunk) { return vd + key * kStride + chunk * 8; });
  };

  float m[2 * kMTiles], l[2 * kMTiles];
#pragma unroll
  for (int i = 0; i < 2 * kMTiles; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
  }
  float o[kMTiles][kDimTiles][4];  // unnormalised output, C layout
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n)
      o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.0f;
  uint32_t qf[kQInRegisters ? kMTiles : 1][kQInRegisters ? kDimSteps : 1][4];

  const int num_tiles = (b.kv_end - b.kv_begin + kKeys - 1) / kKeys;
  load_kv(0, b.kv_begin);
  cuda::cp_async_commit();

  // Lane's ldmatrix row addresses. Q (A operand): rows lane%16, dims + (lane/16)·8. K (B operand
  // of Q·Kᵀ): keys (lane/16)·8 + lane%8 of each 16-key pair, dims + ((lane/8)%2)·8. V (B operand of
  // P·V, transposed): keys ((lane/8)%2)·8 + lane%8 of each k16 step, dims + (lane/16)·8.
  const __nv_bfloat16* q_row = q_s + (warp * kWarpRows + lane % 16) * kStride + (lane / 16) * 8;
  const int k_lane = ((lane / 16) * 8 + lane % 8) * kStride + ((lane / 8) % 2) * 8;
  const int v_lane = (((lane / 8) % 2) * 8 + lane % 8) * kStride + (lane / 16) * 8;

  for (int j = 0; j < num_tiles; ++j) {
    const int stage = j & 1;
    const int tile_start = b.kv_begin + j * kKeys;
    if (j + 1 < num_tiles) {
      load_kv(stage ^ 1, tile_start + kKeys);
      cuda::cp_async_commit();
      cuda::cp_async_wait<1>();  // Q and this tile have landed; the next one is in flight
    } else {
      cuda::cp_async_wait<0>();
    }
    __syncthreads();
    const __nv_bfloat16* k_row = k_s + stage * kKeys * kStride + k_lane;
    const __nv_bfloat16* v_row = v_s + stage * kKeys * kStride + v_lane;

    if constexpr (kQInRegisters) {
      if (j == 0) {
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
          for (int ks = 0; ks < kDimSteps; ++ks)
            ldmatrix_x4(qf[mt][ks], q_row + mt * 16 * kStride + ks * 16);
      }
    }

    // ---- S = Q·Kᵀ for the warp's rows × kKeys keys: each K fragment feeds kMTiles MMAs.
    float s[kMTiles][kKeyTiles][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int n = 0; n < kKeyTiles; ++n)
        s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < kDimSteps; ++ks) {
      uint32_t qa[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        if constexpr (kQInRegisters) {
#pragma unroll
          for (int r = 0; r < 4; ++r) qa[mt][r] = qf[mt][ks][r];
        } else {
          ldmatrix_x4(qa[mt], q_row + mt * 16 * kStride + ks * 16);
        }
      }
#pragma unroll
      for (int np = 0; np < kKeyTiles / 2; ++np) {
        uint32_t kb[4];
        ldmatrix_x4(kb, k_row + np * 16 * kStride + ks * 16);
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          mma_bf16(s[mt][2 * np], qa[mt], kb[0], kb[1]);
          mma_bf16(s[mt][2 * np + 1], qa[mt], kb[2], kb[3]);
        }
      }
    }

    // ---- Mask where the tile crosses a row's boundary, online softmax, rescale O.
    const bool masked = tile_needs_mask<kKeys>(b, tile_start);
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = 2 * mt + h;
        const int gr = thread_row0 + 8 * i;
        const float alpha =
            masked ? softmax_row<true>(s[mt], h, gr, tile_start, lane, a, b, m[i], l[i])
                   : softmax_row<false>(s[mt], h, gr, tile_start, lane, a, b, m[i], l[i]);
#pragma unroll
        for (int n = 0; n < kDimTiles; ++n) {
          o[mt][n][2 * h] *= alpha;
          o[mt][n][2 * h + 1] *= alpha;
        }
      }
    }

    // ---- O += P·V: each V fragment feeds kMTiles MMAs.
#pragma unroll
    for (int kk = 0; kk < kKeySteps; ++kk) {
      uint32_t pa[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) p_fragment(s[mt], kk, pa[mt]);
#pragma unroll
      for (int dp = 0; dp < kDimTiles / 2; ++dp) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, v_row + kk * 16 * kStride + dp * 16);
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          mma_bf16(o[mt][2 * dp], pa[mt], vb[0], vb[1]);
          mma_bf16(o[mt][2 * dp + 1], pa[mt], vb[2], vb[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with this stage before the next load overwrites it
  }

  // ---- Normalise, stage the warp's rows in its own rows of the Q tile, write 16-byte chunks.
  __nv_bfloat16* stage_rows = q_s + warp * kWarpRows * kStride;
#pragma unroll
  for (int i = 0; i < 2 * kMTiles; ++i) {
    const int mt = i / 2, h = i % 2;
    const float inv = row_normaliser(l[i], thread_row0 + 8 * i, b);
    __nv_bfloat16* dst = stage_rows + (lane / 4 + 8 * i) * kStride + (lane % 4) * 2;
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) {
      *reinterpret_cast<__nv_bfloat162*>(dst + n * 8) =
          __floats2bfloat162_rn(o[mt][n][2 * h] * inv, o[mt][n][2 * h + 1] * inv);
    }
  }
  __syncwarp();
#pragma unroll
  for (int it = 0; it < kWarpRows * kChunks / 32; ++it) {
    const int idx = it * 32 + lane;
    store_out_row<kHeadDim>(a, b, warp * kWarpRows + idx / kChunks, idx % kChunks,
                            [&](int row, int chunk) { return q_s + row * kStride + chunk * 8; });
  }
}

// ---- The Hopper path (head_dim 128): warpgroup MMA (wgmma) with operands in 128-byte-swizzled
// shared memory.
//
// Layout: a tile of rows × 128 bf16 is stored as two column blocks of 64 elements (128-byte rows),
// each block rows × 128 bytes, and the 16-byte chunk c of row r sits at chunk c ^ (r % 8) of its
// row (the 128-byte swizzle wgmma expects; every block starts 1024-byte aligned so the hardware's
// address-bit swizzle and ours agree). cp.async writes the tiles in this layout directly.
//
// Per tile, each warpgroup (64 rows) computes S = Q·Kᵀ with 8 k16 steps of wgmma.m64n128k16 (Q
// and K both K-major through descriptors), masks and softmaxes S in registers (the accumulator
// layout per warp is the m16n8k16 C layout, so the online softmax is the mma.sync kernel's), packs
// P to bf16 as the register A operand and accumulates O += P·V with 8 more wgmma steps, V read
// MN-major (transposed) from the same row-major tile layout as K.
constexpr int kWgHeadDim = 128;
constexpr int kWsStages = static_cast<int>(prefill_tile(kWgHeadDim).stages);
__host__ __device__ constexpr int wg_col_block_bytes(int rows) { return rows * 128; }

// Byte offset of 16-byte chunk `chunk` (0..15) of row `row` in a swizzled tile of `rows` rows.
__device__ __forceinline__ int swizzled_chunk(int row, int chunk, int rows) {
  return (chunk / 8) * wg_col_block_bytes(rows) + row * 128 + (((chunk % 8) ^ (row % 8)) * 16);
}

using cuda::fence_registers;
using cuda::wgmma_commit;
using cuda::wgmma_desc;
using cuda::wgmma_fence;
using cuda::wgmma_m64n128k16_rs_tb;
using cuda::wgmma_m64n128k16_ss;
using cuda::wgmma_wait;

// The warp-specialised kernel's shape: a producer warpgroup (warpgroup 0) and two consumer
// warpgroups of 64 rows, 128-key K/V tiles in a ring of kWsStages stages.
constexpr int kWsKeys = 128;
constexpr int kWsRows = 128;
constexpr int kWsThreads = 384;
constexpr int kWsQBytes = kWsRows * kWgHeadDim * 2;
constexpr int kWsTileBytes = kWsKeys * kWgHeadDim * 2;
// Registers per thread after the hand-over: 128 · 40 + 256 · 232 <= 64 K. The producer keeps only
// its loop state and one K/V row offset at a time. ptxas (nvcc 13.0) allocates each role within
// its setmaxnreg value: the disassembly's highest consumer register is R228, the producer's R37.
// A persistent version (one block per SM over work items from a grid-wide counter) makes ptxas
// give up that budget — 168 registers, spills, serialised wgmma (note C7512) — when the
// producer's item loop reads the batch layout from global memory; with each item's rows handed
// over in shared memory it compiles clean (branch wip/persistent-prefill, not yet run).
constexpr int kWsProducerRegs = 40;
constexpr int kWsConsumerRegs = 232;
// Named barriers: 1 + w is consumer w's turn on the tensor cores, 3 + w its warpgroup-local sync.
constexpr int kWsTurnBarrier = 1;
constexpr int kWsLocalBarrier = 3;

// The phase marks of a trace build (attention_trace_bench; phase_trace.h), in order, recorded by
// consumer 0's first thread; the block's K/V tiles go to the record's sink word.
enum PrefillMark : int {
  kMarkRows = 1,   // the block's rows and keys known, barriers initialised
  kMarkQ,          // consumer 0's Q rows landed
  kMarkFirstK,     // the first K tile landed
  kMarkFirstTile,  // tile 0's Q·Kᵀ and softmax done
  // One tile in the middle of the block's (traced_tile(); blocks of 4 tiles or more), step by
  // step (two of them wait for a value through the record's sink word; kMarkLoop puts the block's
  // tile count back there for phase_trace_occupancy):
  kMarkTileK,        // its K tile landed (the tiles before it all done)
  kMarkTileTurn,     // this warpgroup's turn on the tensor cores came
  kMarkTileIssued,   // its Q·Kᵀ and the previous tile's P·V issued, the turn passed on
  kMarkTileQk,       // its Q·Kᵀ done
  kMarkTileSoftmax,  // its masked online softmax done
  kMarkTilePv,       // the previous tile's P·V done
  kMarkTilePacked,   // O rescaled, P packed: ready for the next tile
  kMarkLoop,         // every tile's Q·Kᵀ and softmax done, the last P·V not yet issued
  kMarkLastPv,       // the last P·V done
  kMarkStaged,       // this thread's normalised rows in shared memory
  kMarkStagedAll,    // the warpgroup's
  kMarkStored,       // out written
};
// Consumer 0's first thread.
constexpr unsigned kWsTraceOwner = 128;
// The tile the kMarkTile* marks follow: the middle one, in blocks of 4 tiles or more.
__device__ __forceinline__ int traced_tile(int num_tiles) {
  return num_tiles >= 4 ? num_tiles / 2 : -1;
}

struct WsBarriers {
  uint64_t full_k[kWsStages];  // a K tile has landed (128 producer arrivals)
  uint64_t full_v[kWsStages];
  uint64_t empty_k[kWsStages];  // both consumers' MMAs have read it (8 consumer-warp arrivals)
  uint64_t empty_v[kWsStages];
};

// The producer: tile j's K and V into stage j % kWsStages once both consumers have released both
// (the V stage frees a tile later than the K stage: tile j-3's P·V issues with tile j-2's Q·Kᵀ;
// with 3 stages that still leaves K a tile of slack). Lane L of warp w copies 16-byte chunks c and
// c + 8 (c = L % 8: the same place in both 64-column blocks) of keys 4w + L/8 + 16i, i < 8, in K
// and in V: a warp covers four 128-byte half rows per copy. Each tile's block-table lookups are
// done once, one key per lane (lane L: key 4w + L % 4 + 16·(L / 4)), and the key's 32-bit cache
// slot passed to the lanes that copy its row by one shuffle, whose offset serves K and V.
// kShiftSlots: the offset is a shift (prefill_slot_shift), else a multiply-add. The producer's
// per-copy work shares the SM sub-partitions' issue slots and pipes with the consumers' softmax
// (shuffles queue with MUFU.EX2 on MIO, IMAD.WIDE runs on the FFMA pipe). Measured on the H200
// (bench/results/2026-12-02-prefill-producer-slots.md): 64-bit offsets (two shuffles a copy)
// were 3-4 % slower at L=8192-16384 than the shift, and gathering K and V apart (tile j's K, then
// tile j-1's V, each with its own shuffles) 4 % slower than together. The copies complete the
// stage's full barriers by themselves.
template <bool kShiftSlots>
__device__ __forceinline__ void ws_produce(const PrefillArgs& a, const BlockRows& b, int tid,
                                           int num_tiles, unsigned char* k_s, unsigned char* v_s,
                                           WsBarriers* bars) {
  constexpr int kRowsPerCopy = 16;  // keys one copy instruction of the warpgroup covers
  constexpr int kCopies = kWsKeys / kRowsPerCopy;
  static_assert(kWgHeadDim == 128 && kCopies == 8, "8 lanes per 256-byte row, 32 keys per warp");
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int chunk = lane % 8;
  const int row_in_warp = lane / 8;
  const int key0 = 4 * warp + row_in_warp;
  const int shift = a.slot_shift;
  const int slot_elems = a.num_kv_heads * kWgHeadDim;
  // This lane's key's cache slot (0 past the block's keys: never read).
  auto lane_slot = [&](int tile_start) -> int {
    const int kp = tile_start + 4 * warp + (lane % 4) + kRowsPerCopy * (lane / 4);
    return kp < b.kv_end ? kv_slot(a, b, kp) : 0;
  };
  // Key key0 + 16i sits at row%8 = key0 % 8 for every i: one swizzle per thread, its rows 2 KiB
  // apart, its second chunk one column block on.
  const int dst0 = swizzled_chunk(key0, chunk, kWsKeys);
  const int64_t head_chunk = static_cast<int64_t>(b.kv_head) * kWgHeadDim + chunk * 8;
  const __nv_bfloat16* k_src = a.k_cache + head_chunk;
  const __nv_bfloat16* v_src = a.v_cache + head_chunk;
  for (int j = 0; j < num_tiles; ++j) {
    const int stage = j % kWsStages;
    const int tile_start = b.kv_begin + j * kWsKeys;
    const int slots = lane_slot(tile_start);
    const unsigned parity = ((j / kWsStages) & 1) ^ 1;
    cuda::mbarrier_wait(&bars->empty_k[stage], parity);
    cuda::mbarrier_wait(&bars->empty_v[stage], parity);
    unsigned char* dk = k_s + stage * kWsTileBytes + dst0;
    unsigned char* dv = v_s + stage * kWsTileBytes + dst0;
    const int keys_left = b.kv_end - tile_start - key0;  // copies with 16i < this
#pragma unroll 4
    for (int i = 0; i < kCopies; ++i) {
      const uint32_t slot =
          static_cast<uint32_t>(__shfl_sync(0xffffffffu, slots, 4 * i + row_in_warp));
      const uint64_t offset = kShiftSlots ? static_cast<uint64_t>(slot) << shift
                                          : static_cast<uint64_t>(slot) * slot_elems;
      const __nv_bfloat16* k_row = k_src + offset;
      const __nv_bfloat16* v_row = v_src + offset;
      const bool valid = kRowsPerCopy * i < keys_left;
      const int d = i * kRowsPerCopy * 128;
      cuda::cp_async_16(dk + d, k_row, valid);
      cuda::cp_async_16(dk + d + wg_col_block_bytes(kWsKeys), k_row + 64, valid);
      cuda::cp_async_16(dv + d, v_row, valid);
      cuda::cp_async_16(dv + d + wg_col_block_bytes(kWsKeys), v_row + 64, valid);
    }
    cuda::cp_async_mbarrier_arrive(&bars->full_k[stage]);
    cuda::cp_async_mbarrier_arrive(&bars->full_v[stage]);
  }
  cuda::cp_async_wait_all();  // nothing in flight from a thread that has left
}

// Calls f(i, smem_offset, global_offset, valid) for the 16-byte chunks of consumer warpgroup w's
// 64 rows of a [rows][128] bf16 tile (its Q rows in, its output rows out) that thread tid moves:
// chunk tid % 16 of rows 64w + tid / 16 + 8i, i < 8 (valid: the row is one of the sequence's).
// Every one of its rows has the same row % 8, so its chunks sit 1 KiB apart in the swizzled tile;
// and 8 rows on is 8 / group tokens and 8 % group heads on (one token more where the head passes
// the group), so its global offsets step by one of two constants. The per-row integer divisions of
// the general walk made these loops issue-bound: ~2.8 us to land Q and ~1.9 us to store out per
// block, one warp per scheduler each (bench/results/2026-12-02-prefill-block-phases.md). Each
// walk derives its constants from an opaque copy of the group size: the compiler would otherwise
// keep the Q walk's across the key loop for the output's, and spill.
template <typename F>
__device__ __forceinline__ void ws_for_each_row(const PrefillArgs& a, const BlockRows& b, int w,
                                                int tid, F&& f) {
  int group = a.group;
  asm volatile("" : "+r"(group));
  const int chunk = tid % 16;
  const int row0 = w * 64 + tid / 16;  // the block's row of i = 0
  const int smem0 = swizzled_chunk(row0, chunk, kWsRows);
  const int token = (b.r0 + row0) / group;
  int head = b.r0 + row0 - token * group;  // of the current row, within the group
  int64_t offset =
      (static_cast<int64_t>(b.q_begin + token) * a.num_heads + b.kv_head * group + head) *
          kWgHeadDim +
      chunk * 8;
  const int dh = 8 % group;
  const int64_t step = (static_cast<int64_t>(8 / group) * a.num_heads + dh) * kWgHeadDim;
  const int64_t wrap = static_cast<int64_t>(a.num_heads - group) * kWgHeadDim;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    f(i, smem0 + i * 1024, offset, b.r0 + row0 + 8 * i < b.rows_total);
    head += dh;
    offset += step;
    if (head >= group) {
      head -= group;
      offset += wrap;
    }
  }
}

// Consumer warpgroup w (rows 64w ... of the block; tid its thread in the warpgroup): Q from
// shared memory, then for each K/V tile
// S = Q·Kᵀ, the masked online softmax, O += P·V, FlashAttention-3's order: tile j's Q·Kᵀ and tile
// j-1's P·V are issued together in this warpgroup's turn, the turn passes to the other
// warpgroup, and tile j's softmax runs while both MMAs (and then the other warpgroup's) execute.
__device__ __forceinline__ void ws_consume(const PrefillArgs& a, const BlockRows& b, int w, int tid,
                                           int num_tiles, unsigned char* q_s, unsigned q_addr,
                                           unsigned k_addr, unsigned v_addr, WsBarriers* bars,
                                           cuda::PhaseTraceThrough& trace) {
  constexpr int kKeyTiles = kWsKeys / 8;  // n8 tiles of S per warp
  constexpr int kDimTiles = kWgHeadDim / 8;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int thread_row0 = b.r0 + w * 64 + warp * 16 + lane / 4;
  const int turn = kWsTurnBarrier + w;
  const int other_turn = kWsTurnBarrier + (1 - w);

  // Q: this thread's eight chunks, all in flight at once.
  ws_for_each_row(a, b, w, tid, [&](int, int smem, int64_t offset, bool valid) {
    cuda::cp_async_16(q_s + smem, valid ? a.q + offset : a.q, valid);
  });
  cuda::cp_async_commit();
  cuda::cp_async_wait_all();
  cuda::fence_proxy_async_shared();
  cuda::named_barrier_sync(kWsLocalBarrier + w, 128);
  trace.mark(kMarkQ);
  if (w == 0) cuda::named_barrier_arrive(turn, 256);  // consumer 0 takes the first turn

  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
  float o[kDimTiles][4];  // per warp the m16n8k16 C layout, as wgmma's accumulator is
  float s[kKeyTiles][4];
#pragma unroll
  for (int n = 0; n < kDimTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  auto& s_flat = reinterpret_cast<float(&)[kWsKeys / 2]>(s);
  auto& o_flat = reinterpret_cast<float(&)[64]>(o);
  uint32_t pa[kWsKeys / 16][4];  // the previous tile's P, bf16 A fragments

  // S = Q·Kᵀ: 8 k16 steps; a step within a 64-column block moves the start by 32 bytes.
  auto issue_qk = [&](int stage) {
    const unsigned k_stage = k_addr + stage * kWsTileBytes;
    fence_registers(s_flat);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kWgHeadDim / 16; ++ks) {
      const unsigned qa =
          q_addr + (ks / 4) * wg_col_block_bytes(kWsRows) + w * 64 * 128 + (ks % 4) * 32;
      const unsigned kb = k_stage + (ks / 4) * wg_col_block_bytes(kWsKeys) + (ks % 4) * 32;
      wgmma_m64n128k16_ss(s_flat, wgmma_desc(qa, 16, 1024), wgmma_desc(kb, 16, 1024),
                          ks > 0 ? 1 : 0);
    }
    wgmma_commit();
  };
  // O += P·V: V MN-major, 64-column blocks wg_col_block_bytes apart (LBO), 8-key groups 1024
  // bytes apart (SBO).
  auto issue_pv = [&](int stage) {
    const unsigned v_stage = v_addr + stage * kWsTileBytes;
    fence_registers(o_flat);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kWsKeys / 16; ++kk) {
      wgmma_m64n128k16_rs_tb(
          o_flat, pa[kk], wgmma_desc(v_stage + kk * 16 * 128, wg_col_block_bytes(kWsKeys), 1024));
    }
    wgmma_commit();
  };
  auto release = [&](uint64_t* bar) {
    __syncwarp();
    if (lane == 0) cuda::mbarrier_arrive(bar);
  };
  // Mask and online softmax of tile j's S; returns each row's rescale factor and leaves P in pa.
  auto softmax = [&](int j, float(&alpha)[2]) {
    const int tile_start = b.kv_begin + j * kWsKeys;
    if (tile_needs_mask<kWsKeys>(b, tile_start)) {
#pragma unroll
      for (int h = 0; h < 2; ++h)
        alpha[h] = softmax_row<true>(s, h, thread_row0 + 8 * h, tile_start, lane, a, b, m[h], l[h]);
    } else {
#pragma unroll
      for (int h = 0; h < 2; ++h)
        alpha[h] =
            softmax_row<false>(s, h, thread_row0 + 8 * h, tile_start, lane, a, b, m[h], l[h]);
    }
  };
  // Once a row's running maximum has settled most tiles leave it unchanged (alpha == 1 exactly):
  // a warp whose 16 rows all kept theirs skips the 64 multiplies.
  auto rescale_and_pack = [&](const float(&alpha)[2]) {
    if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
      for (int n = 0; n < kDimTiles; ++n) {
        o[n][0] *= alpha[0];
        o[n][1] *= alpha[0];
        o[n][2] *= alpha[1];
        o[n][3] *= alpha[1];
      }
    }
#pragma unroll
    for (int kk = 0; kk < kWsKeys / 16; ++kk) p_fragment(s, kk, pa[kk]);
  };

  // Tile 0: Q·Kᵀ alone.
  float alpha[2];
  cuda::mbarrier_wait(&bars->full_k[0], 0);
  trace.mark(kMarkFirstK);
  cuda::fence_proxy_async_shared();
  issue_qk(0);
  wgmma_wait<0>();
  fence_registers(s_flat);
  release(&bars->empty_k[0]);
  softmax(0, alpha);
  rescale_and_pack(alpha);
  trace.mark(kMarkFirstTile);

  const int traced = traced_tile(num_tiles);  // unused (dead) where trace marks compile to nothing
  for (int j = 1; j < num_tiles; ++j) {
    const int stage = j % kWsStages;
    const int prev = (j - 1) % kWsStages;
    const bool mark = j == traced;
    cuda::mbarrier_wait(&bars->full_k[stage], (j / kWsStages) & 1);
    if (mark) trace.mark(kMarkTileK);
    cuda::fence_proxy_async_shared();
    cuda::named_barrier_sync(turn, 256);
    if (mark) trace.mark(kMarkTileTurn);
    issue_qk(stage);
    cuda::mbarrier_wait(&bars->full_v[prev], ((j - 1) / kWsStages) & 1);
    cuda::fence_proxy_async_shared();
    issue_pv(prev);
    cuda::named_barrier_arrive(other_turn, 256);
    if (mark) trace.mark(kMarkTileIssued);
    wgmma_wait<1>();  // Q·Kᵀ done (groups complete in order); P·V still running
    fence_registers(s_flat);
    if (mark) trace.mark(kMarkTileQk);
    release(&bars->empty_k[stage]);
    softmax(j, alpha);
    if (mark) trace.mark_after(kMarkTileSoftmax, __float_as_uint(alpha[0]));
    wgmma_wait<0>();
    fence_registers(o_flat);
    if (mark) trace.mark(kMarkTilePv);
    release(&bars->empty_v[prev]);
    rescale_and_pack(alpha);
    if (mark) trace.mark_after(kMarkTilePacked, pa[kWsKeys / 16 - 1][3]);
  }
  // The last tile's P·V.
  trace.mark_after(kMarkLoop, static_cast<uint32_t>(num_tiles));  // the sink's tiles again
  const int last = (num_tiles - 1) % kWsStages;
  cuda::mbarrier_wait(&bars->full_v[last], ((num_tiles - 1) / kWsStages) & 1);
  cuda::fence_proxy_async_shared();
  issue_pv(last);
  wgmma_wait<0>();
  fence_registers(o_flat);
  release(&bars->empty_v[last]);
  trace.mark(kMarkLastPv);

  // Normalise; stage the warpgroup's rows in its own rows of the Q tile (same swizzle; its
  // Q·Kᵀ reads are complete) by stmatrix: each instruction stores the warp's 16 rows × 16 columns
  // (dim tiles n and n + 1, fragment rows h = 0 and 1); lane L gives the address of row
  // (L / 8) % 2 · 8 + L % 8 of dim tile n + L / 16. Then 16-byte row chunks out.
  const float inv0 = row_normaliser(l[0], thread_row0, b);
  const float inv1 = row_normaliser(l[1], thread_row0 + 8, b);
  const int matrix = lane / 8;
  const int staged_row = w * 64 + warp * 16 + (matrix % 2) * 8 + lane % 8;
#pragma unroll
  for (int n = 0; n < kDimTiles; n += 2) {
    cuda::stmatrix_x4(q_s + swizzled_chunk(staged_row, n + matrix / 2, kWsRows),
                      pack_bf16(o[n][0] * inv0, o[n][1] * inv0),
                      pack_bf16(o[n][2] * inv1, o[n][3] * inv1),
                      pack_bf16(o[n + 1][0] * inv0, o[n + 1][1] * inv0),
                      pack_bf16(o[n + 1][2] * inv1, o[n + 1][3] * inv1));
  }
  trace.mark(kMarkStaged);
  cuda::named_barrier_sync(kWsLocalBarrier + w, 128);
  trace.mark(kMarkStagedAll);
  // This thread's eight chunks read from shared memory before the first store.
  uint4 chunks[8];
  ws_for_each_row(a, b, w, tid, [&](int i, int smem, int64_t, bool) {
    chunks[i] = *reinterpret_cast<const uint4*>(q_s + smem);
  });
  ws_for_each_row(a, b, w, tid, [&](int i, int, int64_t offset, bool valid) {
    if (valid) *reinterpret_cast<uint4*>(a.out + offset) = chunks[i];
  });
  trace.mark(kMarkStored);
}

__global__ void __launch_bounds__(kWsThreads, 1) flash_prefill_ws_kernel(const PrefillArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // 1024-byte alignment for the swizzle atoms (the launch allocates 1 KiB of slack).
  const unsigned raw_addr = smem_addr(smem_raw);
  unsigned char* smem = smem_raw + ((1024 - (raw_addr % 1024)) % 1024);
  unsigned char* q_s = smem;
  unsigned char* k_s = smem + kWsQBytes;
  unsigned char* v_s = k_s + kWsStages * kWsTileBytes;
  auto* bars = reinterpret_cast<WsBarriers*>(v_s + kWsStages * kWsTileBytes);

  cuda::PhaseTraceThrough trace(cuda::phase_trace_records(a), kWsTraceOwner);
  BlockRows b;
  if (!block_rows<kWsRows>(a, &b)) return trace.finish();  // uniform: the whole block leaves
  const int tid = static_cast<int>(threadIdx.x);
  if (tid == 0) {
    for (int st = 0; st < kWsStages; ++st) {
      cuda::mbarrier_init(&bars->full_k[st], 128);
      cuda::mbarrier_init(&bars->full_v[st], 128);
      cuda::mbarrier_init(&bars->empty_k[st], 8);
      cuda::mbarrier_init(&bars->empty_v[st], 8);
    }
  }
  __syncthreads();
  const int num_tiles = (b.kv_end - b.kv_begin + kWsKeys - 1) / kWsKeys;
  trace.mark_after(kMarkRows, static_cast<uint32_t>(num_tiles));
  const int wg = tid / 128;
  if (wg == 0) {
    cuda::setmaxnreg_dec<kWsProducerRegs>();
    if (a.slot_shift >= 0) {
      ws_produce<true>(a, b, tid, num_tiles, k_s, v_s, bars);
    } else {
      ws_produce<false>(a, b, tid, num_tiles, k_s, v_s, bars);
    }
  } else {
    cuda::setmaxnreg_inc<kWsConsumerRegs>();
    ws_consume(a, b, wg - 1, tid % 128, num_tiles, q_s, smem_addr(q_s), smem_addr(k_s),
               smem_addr(v_s), bars, trace);
  }
  trace.finish();
}

// The opt-in shared-memory limit of the current device, read once per device.
int max_dynamic_smem_bytes(int device) {
  constexpr int kMaxDevices = 64;
  static int limits[kMaxDevices] = {};
  static std::once_flag once[kMaxDevices];
  ROOFLINE_CHECK(device >= 0 && device < kMaxDevices);
  std::call_once(once[device], [device] {
    ROOFLINE_CUDA_CHECK(
        cudaDeviceGetAttribute(&limits[device], cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  });
  return limits[device];
}

// The order of p's blocks: the plan's for the current device's L2 (prefill_block_order), unless
// ROOFLINE_PREFILL_BLOCK_ORDER is `head` or `longest` (the GPU tests run every shape both ways).
PrefillBlockOrder block_order(const PagedAttentionParams& p) {
  static const int forced = [] {  // -1: the plan's choice
    switch (env_choice("ROOFLINE_PREFILL_BLOCK_ORDER", {"auto", "head", "longest"},
                       "auto (the plan's, the default), head or longest")) {
      case 1:
        return static_cast<int>(PrefillBlockOrder::kHeadMajor);
      case 2:
        return static_cast<int>(PrefillBlockOrder::kLongestFirst);
      default:
        return -1;
    }
  }();
  if (forced >= 0) return static_cast<PrefillBlockOrder>(forced);
  return prefill_block_order(prefill_kv_bytes_bound(p), cuda::device_l2_bytes());
}

// The kernel kPrefillTiles names for head_dim (only the chosen one is instantiated).
template <int kHeadDim>
auto prefill_kernel_for() {
  constexpr PrefillTile kTile = prefill_tile(kHeadDim);
  if constexpr (kTile.wgmma) {
    return flash_prefill_ws_kernel;
  } else {
    return flash_prefill_kernel<kHeadDim, static_cast<int>(kTile.warps),
                                static_cast<int>(kTile.m_tiles), static_cast<int>(kTile.keys),
                                kTile.q_in_registers>;
  }
}

template <int kHeadDim>
void launch(const PagedAttentionParams& p, int64_t max_q_len, cudaStream_t stream) {
  constexpr PrefillTile kTile = prefill_tile(kHeadDim);
  static_assert(kTile.head_dim == kHeadDim, "a kPrefillTiles row for every head dim launched");
  static_assert(
      !kTile.wgmma ||
          (kHeadDim == kWgHeadDim && 32 * kTile.warps == kWsThreads &&
           prefill_rows(kTile) == kWsRows && kTile.keys == kWsKeys && kTile.stages == kWsStages &&
           prefill_smem_bytes(kTile) ==
               1024 + kWsQBytes + 2 * kWsStages * kWsTileBytes + sizeof(WsBarriers)),
      "the wgmma row of kPrefillTiles describes flash_prefill_ws_kernel");
  auto* kernel = prefill_kernel_for<kHeadDim>();
  constexpr int64_t kSmem = prefill_smem_bytes(kTile);
  int device = 0;
  ROOFLINE_CUDA_CHECK(cudaGetDevice(&device));
  ROOFLINE_CHECK(kSmem <= max_dynamic_smem_bytes(device));
  // Above 48 KiB a kernel must opt in to its dynamic shared memory, once per device.
  constexpr int kMaxDevices = 64;
  static std::once_flag configured[kMaxDevices];
  std::call_once(configured[device], [kernel] {
    ROOFLINE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(kSmem)));
  });

  PrefillArgs a;
  a.q = static_cast<const __nv_bfloat16*>(p.q);
  a.k_cache = static_cast<const __nv_bfloat16*>(p.k_cache);
  a.v_cache = static_cast<const __nv_bfloat16*>(p.v_cache);
  a.block_tables = p.block_tables;
  a.seq_lens = p.seq_lens;
  a.query_start = p.query_start;
  a.tree_mask = p.tree_mask;
  a.out = static_cast<__nv_bfloat16*>(p.out);
  a.num_blocks = p.num_blocks;
  a.num_heads = static_cast<int>(p.num_heads);
  a.num_kv_heads = static_cast<int>(p.num_kv_heads);
  a.group = static_cast<int>(p.num_heads / p.num_kv_heads);
  a.block_size = static_cast<int>(p.block_size);
  a.block_shift = (p.block_size & (p.block_size - 1)) == 0 ? __builtin_ctzll(p.block_size) : -1;
  a.max_blocks_per_seq = static_cast<int>(p.max_blocks_per_seq);
  a.sliding_window = static_cast<int>(p.sliding_window);
  a.scale_log2 = p.scale * kLog2e;
  a.longest_first = block_order(p) == PrefillBlockOrder::kLongestFirst ? 1 : 0;
  a.slot_shift = prefill_slot_shift(p.num_kv_heads, p.head_dim);
  ROOFLINE_CHECK_MSG(p.scale > 0.0f, "paged_attention_cuda: scale must be positive");
  // Cache slots are 31-bit integers on the device (kv_slot).
  ROOFLINE_CHECK_MSG(p.num_blocks <= INT_MAX / p.block_size,
                     "paged_attention_cuda: the KV cache has more than 2^31 slots");

  const int64_t row_tiles = prefill_row_tiles(kTile, max_q_len, a.group);
  ROOFLINE_CHECK(max_q_len * a.group <= INT_MAX && row_tiles <= INT_MAX);
  ROOFLINE_CHECK(p.num_kv_heads <= 65535 && p.num_seqs <= 65535);
  const dim3 grid(static_cast<unsigned>(row_tiles), static_cast<unsigned>(p.num_kv_heads),
                  static_cast<unsigned>(p.num_seqs));
#if defined(ROOFLINE_PHASE_TRACE)
  a.trace =
      kTile.wgmma
          ? prefill_attention_phase_trace().next(static_cast<int64_t>(grid.x) * grid.y * grid.z)
          : nullptr;
#endif
  kernel<<<grid, static_cast<unsigned>(32 * kTile.warps), static_cast<size_t>(kSmem), stream>>>(a);
  ROOFLINE_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace

#if defined(ROOFLINE_PHASE_TRACE)
PhaseTraceRecorder& prefill_attention_phase_trace() {
  static PhaseTraceRecorder recorder;
  return recorder;
}
#endif

void paged_attention_prefill_cuda(const PagedAttentionParams& p, int64_t max_q_len,
                                  CudaStream stream) {
  switch (p.head_dim) {
    case 32:
      launch<32>(p, max_q_len, stream);
      return;
    case 64:
      launch<64>(p, max_q_len, stream);
      return;
    case 128:
      launch<128>(p, max_q_len, stream);
      return;
    case 256:
      launch<256>(p, max_q_len, stream);
      return;
    default:
      ROOFLINE_CHECK_MSG(false, "paged_attention_cuda: head_dim must be 32, 64, 128 or 256");
  }
}

}  // namespace roofline
