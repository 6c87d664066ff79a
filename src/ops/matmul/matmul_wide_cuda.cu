// matmul_wide_cuda: y[m, n] = x[m, k] · W[n, k]ᵀ (+ bias[n] | + residual[m, n]) for decode's
// m <= 64 rows on Hopper's warpgroup MMA; bf16 in and out, fp32 accumulation, one rounding.
// matmul_wide.h says why it exists beside the skinny kernel and how a problem is tiled.
//
// Bound: n·k·2 bytes of weights for 2·m·n·k FLOPs (<= 64 FLOP/byte): memory bound; the goal is the
// 4.28 TB/s copy ceiling. x is read once per 128 weight rows (from L2: m·k·2 bytes per tile).
//
// Block: one consumer warpgroup (warps 0-3) and one producer warp (warp 4). The producer's first
// lane asks the copy engine for each stage's two boxes — 128 weight rows × 64 k (16 KB) and the
// m token rows × 64 k of x (K past k arrives as zeros; the wgmma rows past m multiply whatever the
// stage held before, into sums nobody reads) — into a ring of
// kMatmulWideStages stages, both in the 128-byte swizzle wgmma reads, completing bytes on the
// stage's "full" mbarrier. The consumers wait for a stage, issue four wgmma.m64n128k16 (A = the x
// rows, B = the weight rows, both K-major from shared memory: D[token][weight row]), commit, and
// once the previous stage's group has completed hand that stage back on its "empty" mbarrier (one
// arrival per warp). Nothing in the multiply waits on global memory but the ring.
//   Programmatic dependent launch: weights are constants, so the producer requests the weight
// boxes of the ring's first stages before griddepcontrol.wait, while the kernel before this one
// still runs; x is that kernel's output, so its boxes follow the wait (the stage's mbarrier
// expects both). The consumers wait too before they read the bias or residual or write y.
//   Splits: the K splits of a tile are one thread-block cluster. After its K loop each block
// leaves its fp32 sums [64][128] in its own shared memory (the consumed ring); each block
// finishes an equal share of the tile's m rows; after one cluster barrier every block sends each
// other block that block's rows of its sums by a bulk copy between shared memories, and each adds
// the parts it received to its own in split order (deterministic). A block that has received every
// part arrives on each other block's `released` mbarrier, and a block leaves only once all the
// others have: its sums stay alive until the copies out of them have landed, and no block waits
// for the cluster's slowest outputs (a closing cluster barrier did: on an H100 at m = 64 the
// receipts took Llama-3-8B's q|k|v 22.4 -> 21.9 us, o 16.7 -> 16.6, down 45.6 -> 45.4;
// bench/results/2026-12-06-wide-receipts.md). Unsplit, the block finishes the tile from its own
// sums.
//
// Numerics: products of bf16 values are exact in fp32; sums in fp32 (tensor-core order within a
// wgmma, K order within a split, split order across splits); bias or residual added in fp32; one
// rounding to bf16.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/check.h"
#include "core/cuda_check.h"
#include "ops/common/cuda_async.cuh"
#include "ops/common/cuda_barrier.cuh"
#include "ops/common/cuda_launch.cuh"
#include "ops/common/cuda_phase_trace.cuh"
#include "ops/common/cuda_tensor_map.cuh"
#include "ops/common/cuda_wgmma.cuh"
#include "ops/common/env_switch.h"
#include "ops/matmul/matmul_wide.h"

// wgmma exists on sm_90a only (CMakePresets.json builds 90a).
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "matmul_wide_cuda.cu needs the sm_90a target (wgmma): set CMAKE_CUDA_ARCHITECTURES=90a"
#endif

namespace roofline {

namespace {

constexpr int kTileN = static_cast<int>(kMatmulWideTileN);
constexpr int kTileM = static_cast<int>(kMatmulWideMaxM);
constexpr int kChunkK = static_cast<int>(kMatmulWideChunkK);
constexpr int kConsumers = 128;  // one warpgroup
constexpr int kThreads = kConsumers + 32;
constexpr int kWBytes = kTileN * kChunkK * 2;  // 16 KB
constexpr int kXBytes = kTileM * kChunkK * 2;  // 8 KB
constexpr int kStageBytes = kWBytes + kXBytes;
// The sums left for the merge: [64][128] f32, rows padded by 4 floats (no bank conflicts between
// the 8 rows a warp's float2 stores touch).
constexpr int kSumStride = kTileN + 4;
constexpr int kSumBytes = kTileM * kSumStride * 4;
// The ring, 1024-byte aligned for the swizzle (the dynamic shared memory is asked 1 KB larger),
// then the mbarriers.
constexpr int kStages = kMatmulWideStages;
constexpr int kRingBytes = kStages * kStageBytes;
constexpr int kSmemBytes = 1024 + kRingBytes + (2 * kStages + 2) * 8;
// The merge's receive area follows the sums: a slot of ceil(m / splits) rows per split, at most
// kTileM + kMatmulWideMaxSplits - 1 rows in all.
static_assert(kSumBytes + (kTileM + kMatmulWideMaxSplits) * kSumStride * 4 <= kRingBytes,
              "the merge's sums and receive area reuse the ring");
static_assert(kChunkK * 2 == 128, "a stage row is one 128-byte swizzle row");
static_assert(kWBytes % 1024 == 0 && kXBytes % 1024 == 0, "boxes start 1024-byte aligned");
// The named barrier of the consumer warpgroup (0 is __syncthreads).
constexpr int kConsumerBarrier = 1;

struct WideArgs {
  const __nv_bfloat16* bias;      // [n] or null
  const __nv_bfloat16* residual;  // [m, n] row stride y_row_stride, or null; may equal y
  __nv_bfloat16* y;               // [m, n] row stride y_row_stride
  int m;
  int n;
  int64_t y_row_stride;
  bool vector_io;  // y, the residual and the bias take 16-byte accesses at every 8th column
  int num_chunks;
  int chunks_per_split;
  int splits;
  // A split launch's blocks leave on the other splits' receipts (true) or after a closing cluster
  // barrier (false: ROOFLINE_WIDE_RECEIPTS=0, for A/B runs).
  bool receipts;
  // The logit tile summaries of y (summary_words set): per token, the words of its summary_tiles
  // tiles of summary_tile_tokens columns (8 to 128, dividing the tile: matmul_wide_fuses_summaries)
  // and its non-finite count, in epoch *summary_epoch (logit_tiles.h).
  unsigned long long* summary_words;      // [m, summary_tiles]
  unsigned long long* summary_nonfinite;  // [m]
  const uint32_t* summary_epoch;
  int summary_tile_tokens;
  int summary_tiles;
#if defined(ROOFLINE_PHASE_TRACE)
  uint64_t* trace;  // the launch's phase records, or nullptr
#endif
};

// The logit tile summaries' part of one item: a lane's 8 stored outputs `stored` of a token from
// column `col` (a multiple of 8; those past n are ignored). Returns the word of their largest
// finite value at its first position (the epoch alone where none is finite, 0 past n) and adds
// the non-finite ones to `nonfinite`. One word per lane instead of one per value: the float
// compare keeps the first of equal values, and -0 == +0 as the words' keys have it.
__device__ __forceinline__ unsigned long long item_word(const WideArgs& a, uint32_t epoch, int col,
                                                        const float (&stored)[8],
                                                        unsigned& nonfinite) {
  float best = 0.0f;
  int best_t = -1;
#pragma unroll
  for (int t = 0; t < 8; ++t) {
    if (col + t >= a.n) break;
    if (!sampling::is_finite(stored[t])) {
      ++nonfinite;
    } else if (best_t < 0 || stored[t] > best) {
      best = stored[t];
      best_t = t;
    }
  }
  if (col >= a.n) return 0;
  const int tile = col / a.summary_tile_tokens;
  return best_t < 0
             ? static_cast<unsigned long long>(epoch) << logit_tile::kEpochShift
             : logit_tile::value_word(epoch, best, col - tile * a.summary_tile_tokens + best_t);
}

// The phase marks of a trace build (matmul_skinny_trace_bench trace wide; phase_trace.h), in order,
// taken by the block's thread 0 (a consumer).
enum WideMark : int {
  kMarkWait = 1,    // past the PDL wait
  kMarkFirstStage,  // the first stage landed
  kMarkStreamed,    // every stage multiplied, the last multiply drained
  kMarkSumsShared,  // the sums in shared memory, the (cluster) barrier passed
  kMarkOutputs,     // this block's outputs written
  kMarkDone,        // every other split received its part of the sums (split launches)
};

__global__ void __launch_bounds__(kThreads, 1)
    matmul_wide_kernel(const __grid_constant__ CUtensorMap w_map,
                       const __grid_constant__ CUtensorMap x_map,
                       const __grid_constant__ WideArgs a) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* ring = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~static_cast<uintptr_t>(1023));
  uint64_t* full = reinterpret_cast<uint64_t*>(ring + kRingBytes);
  uint64_t* empty = full + kStages;
  uint64_t* received = empty + kStages;  // the other splits' parts of this block's rows
  uint64_t* released = received + 1;     // the other splits hold their parts of this block's sums
  cuda::PhaseTrace trace(cuda::phase_trace_records(a));
  // Before both roles' PDL waits (the producer's and the consumers').
  cuda::touch_params(a);

  const int tile = static_cast<int>(blockIdx.x) / a.splits;
  const int split = static_cast<int>(blockIdx.x) % a.splits;
  const int chunk0 = split * a.chunks_per_split;
  const int chunks = min(a.chunks_per_split, a.num_chunks - chunk0);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      cuda::mbarrier_init(&full[s], 1);
      cuda::mbarrier_init(&empty[s], kConsumers / 32);
    }
    cuda::mbarrier_init(received, 1);
    cuda::mbarrier_init(released, static_cast<unsigned>(a.splits > 1 ? a.splits - 1 : 1));
    cuda::fence_mbarrier_init_cluster();  // visible to the copy engine and the cluster's blocks
  }
  __syncthreads();

  if (warp == kConsumers / 32) {
    // The producer: its first lane issues every copy; the warp's other lanes leave.
    if (lane != 0) return;
    const auto issue_weights = [&](int i) {
      const int s = i % kStages;
      cuda::tma_load_3d(ring + s * kStageBytes, &w_map, (chunk0 + i) * kChunkK, tile * kTileN, 0,
                        &full[s]);
    };
    const auto issue_x = [&](int i) {
      const int s = i % kStages;
      cuda::tma_load_3d(ring + s * kStageBytes + kWBytes, &x_map, (chunk0 + i) * kChunkK, 0, 0,
                        &full[s]);
    };
    // x's box is its m rows exactly. A 64-row box past the tensor's rows is filled with zeros by
    // the copy engine, which is slow: the stage loop at m = 1 streamed gate_up at 75 % of the copy
    // ceiling with a 64-row box of x, 96 % at m = 64 (bench/results/2026-12-01-wide-stream-k.md).
    const unsigned stage_bytes = static_cast<unsigned>(kWBytes + a.m * kChunkK * 2);
    const int prefetch = min(chunks, kStages);
    for (int i = 0; i < prefetch; ++i) {
      cuda::mbarrier_arrive_expect_tx(&full[i], stage_bytes);
      issue_weights(i);
    }
    cuda::pdl_wait();  // x is the previous kernel's output
    cuda::pdl_launch_dependents();
    for (int i = 0; i < prefetch; ++i) issue_x(i);
    for (int i = prefetch; i < chunks; ++i) {
      const int s = i % kStages;
      cuda::mbarrier_wait(&empty[s], static_cast<unsigned>((i / kStages - 1) & 1));
      cuda::mbarrier_arrive_expect_tx(&full[s], stage_bytes);
      issue_weights(i);
      issue_x(i);
    }
    return;
  }

  // The consumers. The bias, the residual and y may belong to the kernel before this one.
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  trace.mark(kMarkWait);
  // The summaries' epoch: step metadata the host wrote before the launch.
  const uint32_t epoch = a.summary_words != nullptr ? *a.summary_epoch : 0u;
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  const unsigned ring_addr = static_cast<unsigned>(__cvta_generic_to_shared(ring));
  for (int i = 0; i < chunks; ++i) {
    const int s = i % kStages;
    cuda::mbarrier_wait(&full[s], static_cast<unsigned>((i / kStages) & 1));
    if (i == 0) trace.mark(kMarkFirstStage);
    const unsigned w_addr = ring_addr + s * kStageBytes;
    const unsigned x_addr = w_addr + kWBytes;
    cuda::fence_registers(acc);
    cuda::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kChunkK / 16; ++kk) {
      // A k16 step within the 128-byte swizzle row moves both starts by 32 bytes.
      cuda::wgmma_m64n128k16_ss(acc, cuda::wgmma_desc(x_addr + kk * 32, 16, 1024),
                                cuda::wgmma_desc(w_addr + kk * 32, 16, 1024), 1);
    }
    cuda::wgmma_commit();
    cuda::wgmma_wait<1>();  // the previous stage's multiplies are done: hand it back
    if (i > 0 && lane == 0) cuda::mbarrier_arrive(&empty[(i - 1) % kStages]);
  }
  cuda::wgmma_wait<0>();
  cuda::fence_registers(acc);
  trace.mark(kMarkStreamed);

  // The sums into the consumed ring: the m16n8 accumulator layout per warp, D[token][weight row].
  // Every stage's copies have landed (the consumers waited on each) and every multiply is done.
  float* sums = reinterpret_cast<float*>(ring);
  {
    const int r0 = warp * 16 + lane / 4;
    const int c0 = 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < kTileN / 8; ++j) {
      *reinterpret_cast<float2*>(sums + r0 * kSumStride + 8 * j + c0) =
          make_float2(acc[4 * j], acc[4 * j + 1]);
      *reinterpret_cast<float2*>(sums + (r0 + 8) * kSumStride + 8 * j + c0) =
          make_float2(acc[4 * j + 2], acc[4 * j + 3]);
    }
  }
  // The K splits' merge. Block `split` finishes rows [row0, row1) of the tile's m rows; every
  // other block of the cluster sends it those rows of its sums in one bulk copy (the copy engine
  // moves them SM to SM) into slot `sender` of the receive area past the sums, completing on the
  // block's `received` mbarrier. The consumers then add the parts from their own shared memory.
  // Loaded thread by thread over distributed shared memory instead, the parts took 2.0-2.8 µs per
  // block at m = 64 (bench/results/2026-12-01-wide-merge.md).
  const int row0 = a.m * split / a.splits;
  const int row1 = a.m * (split + 1) / a.splits;
  const int slot_rows = (a.m + a.splits - 1) / a.splits;
  float* slots = sums + kTileM * kSumStride;
  if (a.splits > 1) {
    cuda::fence_proxy_async_shared();  // the copy engine reads the sums written above
    if (threadIdx.x == 0)
      cuda::mbarrier_arrive_expect_tx(
          received, static_cast<unsigned>((a.splits - 1) * (row1 - row0) * kSumStride * 4));
    cuda::cluster_sync();  // every block's sums written, its ring consumed, its receipt expected
    if (threadIdx.x == 0) {
      for (int i = 1; i < a.splits; ++i) {  // receivers in turn from the next block on
        const int r = (split + i) % a.splits;
        const int r0 = a.m * r / a.splits;
        const int r1 = a.m * (r + 1) / a.splits;
        if (r1 > r0)
          cuda::cluster_bulk_copy(slots + split * slot_rows * kSumStride, static_cast<unsigned>(r),
                                  sums + r0 * kSumStride,
                                  static_cast<unsigned>((r1 - r0) * kSumStride * 4), received);
      }
    }
    cuda::mbarrier_wait(received, 0);
    // Every part sent here has landed, so its sender may free its sums: a receipt to each other
    // block (the one whose rows here are empty sent nothing and gets one too), one arrival each on
    // its `released` barrier, which it waits on before it leaves.
    if (a.receipts && threadIdx.x == 0)
      for (int i = 1; i < a.splits; ++i)
        cuda::mbarrier_arrive_remote(released, static_cast<unsigned>((split + i) % a.splits));
  } else {
    cuda::named_barrier_sync(kConsumerBarrier, kConsumers);
  }
  trace.mark(kMarkSumsShared);

  // This block's outputs: items of 8 columns of one of its rows (16 bytes of y). A thread takes
  // kBatch items at a time and issues all their loads (each split's part, then the bias and
  // residual) before it adds or stores any, and writes y 16 bytes at a time where the addresses
  // allow. Items walked one at a time, with four 2-byte stores each, took 2.6 µs per block at
  // m = 64 against 0.3 µs at m = 1 (bench/results/2026-12-01-wide-stream-k.md, run 8).
  constexpr int kItemCols = 8;
  constexpr int kRowItems = kTileN / kItemCols;
  static_assert(kRowItems == 16, "a half-warp holds one row's items (the summaries' shuffles)");
  constexpr int kBatch = 4;
  static_assert(kBatch <= 4, "the summaries' non-finite counts take 8 bits per item");
  const int begin = row0 * kRowItems;
  const int end = row1 * kRowItems;
  const int col_base = tile * kTileN;
  // The loop runs while any lane of the warp has an item (warp-uniform: the summaries' shuffles
  // name the whole warp); a lane's items past the end are loaded as the last one and not stored.
  for (int first = begin + static_cast<int>(threadIdx.x); first - lane < end;
       first += kBatch * kConsumers) {
    // An item's offset in a part; items past the end read the last item again (loads without
    // branches) and are never stored. Threads 4-7 of every 8 read an item's halves in the other
    // order, so that a quarter warp's 16-byte loads meet every bank once.
    int at[kBatch][2];  // the offsets of the halves a thread loads first and second
    bool swapped[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int item = min(first + b * kConsumers, end - 1);
      swapped[b] = ((item >> 2) & 1) != 0;
      const int offset = (item / kRowItems - row0) * kSumStride + (item % kRowItems) * kItemCols;
      at[b][0] = offset + (swapped[b] ? 4 : 0);
      at[b][1] = offset + (swapped[b] ? 0 : 4);
    }
    float4 v[kBatch][2];
    for (int sp = 0; sp < a.splits; ++sp) {  // split order: the sum is deterministic
      const float* part_base =
          sp == split ? sums + row0 * kSumStride : slots + sp * slot_rows * kSumStride;
      float4 part[kBatch][2];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        part[b][0] = *reinterpret_cast<const float4*>(part_base + at[b][0]);
        part[b][1] = *reinterpret_cast<const float4*>(part_base + at[b][1]);
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (sp == 0) {
            v[b][h] = part[b][h];
          } else {
            v[b][h].x += part[b][h].x;
            v[b][h].y += part[b][h].y;
            v[b][h].z += part[b][h].z;
            v[b][h].w += part[b][h].w;
          }
        }
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const float4 lo = swapped[b] ? v[b][1] : v[b][0];
      const float4 hi = swapped[b] ? v[b][0] : v[b][1];
      v[b][0] = lo;
      v[b][1] = hi;
    }
    // The bias and residual of every item before any store: the residual may be y itself (each
    // element is read and then written by this thread only).
    uint4 bias8[kBatch];
    uint4 res8[kBatch];
    // The summaries' parts of the items (0 for items past the end) and their non-finite counts,
    // 8 bits per item.
    unsigned long long words[kBatch];
    unsigned nonfinite = 0;
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int item = first + b * kConsumers;
      const int row = item / kRowItems;
      const int col = col_base + (item % kRowItems) * kItemCols;
      const bool whole = a.vector_io && item < end && col + kItemCols <= a.n;
      if (whole && a.bias != nullptr) bias8[b] = *reinterpret_cast<const uint4*>(a.bias + col);
      if (whole && a.residual != nullptr)
        res8[b] = *reinterpret_cast<const uint4*>(a.residual +
                                                  static_cast<int64_t>(row) * a.y_row_stride + col);
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      words[b] = 0;
      const int item = first + b * kConsumers;
      if (item >= end) continue;
      const int row = item / kRowItems;
      const int col = col_base + (item % kRowItems) * kItemCols;
      const int64_t offset = static_cast<int64_t>(row) * a.y_row_stride + col;
      float out[kItemCols] = {v[b][0].x, v[b][0].y, v[b][0].z, v[b][0].w,
                              v[b][1].x, v[b][1].y, v[b][1].z, v[b][1].w};
      if (a.vector_io && col + kItemCols <= a.n) {
        const __nv_bfloat16* bias = reinterpret_cast<const __nv_bfloat16*>(&bias8[b]);
        const __nv_bfloat16* res = reinterpret_cast<const __nv_bfloat16*>(&res8[b]);
        uint4 packed;
        __nv_bfloat16* y8 = reinterpret_cast<__nv_bfloat16*>(&packed);
#pragma unroll
        for (int t = 0; t < kItemCols; ++t) {
          if (a.bias != nullptr) out[t] += __bfloat162float(bias[t]);
          if (a.residual != nullptr) out[t] += __bfloat162float(res[t]);
          y8[t] = __float2bfloat16_rn(out[t]);
          out[t] = __bfloat162float(y8[t]);  // the value stored, which the summaries describe
        }
        *reinterpret_cast<uint4*>(a.y + offset) = packed;
      } else {
        // The last item of an n that is not a multiple of 8, or addresses 16 bytes cannot take.
#pragma unroll
        for (int t = 0; t < kItemCols; ++t) {
          if (col + t >= a.n) break;
          float o = out[t];
          if (a.bias != nullptr) o += __bfloat162float(a.bias[col + t]);
          if (a.residual != nullptr) o += __bfloat162float(a.residual[offset + t]);
          const __nv_bfloat16 stored = __float2bfloat16_rn(o);
          a.y[offset + t] = stored;
          out[t] = __bfloat162float(stored);
        }
      }
      if (a.summary_words != nullptr) {
        unsigned count = 0;
        words[b] = item_word(a, epoch, col, out, count);
        nonfinite |= count << (8 * b);
      }
    }
    if (a.summary_words != nullptr) {
      // The summary tiles' words: a half-warp holds one token's 128 columns (lane l % 16 the 8
      // from 8 · (l % 16)), so a tile of summary_tile_tokens is a run of summary_tile_tokens / 8
      // lanes. The items' reductions interleave (independent shuffles in flight), and the whole
      // warp takes part (items past the end hold 0), so no shuffle waits on a divergent branch.
      for (int offset = a.summary_tile_tokens / 16; offset > 0; offset >>= 1) {
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          const unsigned long long other = __shfl_xor_sync(0xffffffffu, words[b], offset);
          words[b] = other > words[b] ? other : words[b];
        }
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int item = first + b * kConsumers;
        const int col = col_base + (item % kRowItems) * kItemCols;
        if (item < end && col < a.n && lane % (a.summary_tile_tokens / 8) == 0)
          a.summary_words[static_cast<int64_t>(item / kRowItems) * a.summary_tiles +
                          col / a.summary_tile_tokens] = words[b];
      }
      // The rows' non-finite counts (rare: only where the warp found any), summed over each
      // half-warp (a row's 128 columns; at most 128 a row, so the 8-bit fields do not carry).
      if (__any_sync(0xffffffffu, nonfinite != 0)) {
#pragma unroll
        for (int offset = 8; offset > 0; offset >>= 1)
          nonfinite += __shfl_xor_sync(0xffffffffu, nonfinite, offset);
        if (lane % 16 == 0) {
          for (int b = 0; b < kBatch; ++b) {
            const unsigned count = (nonfinite >> (8 * b)) & 0xffu;
            if (count != 0)
              logit_tile::add_nonfinite(a.summary_nonfinite + (first + b * kConsumers) / kRowItems,
                                        epoch, count);
          }
        }
      }
    }
  }
  trace.mark(kMarkOutputs);
  // No block's sums vanish while a copy out of them may still read them: every receipt is in.
  // (A second cluster barrier here kept every block until the cluster's last had written its
  // outputs.)
  if (a.splits > 1 && !a.receipts) cuda::cluster_sync();
  if (a.splits > 1 && a.receipts && threadIdx.x == 0) cuda::mbarrier_wait_cluster(released, 0);
  trace.mark(kMarkDone);
  trace.finish();
}

void configure_kernel() {
  static const bool configured = [] {
    ROOFLINE_CUDA_CHECK(cudaFuncSetAttribute(
        matmul_wide_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    return true;
  }();
  (void)configured;
}

// A bf16 [rows, k] row-major matrix (row stride k) as a rank-3 tensor map of 64 × box_rows boxes.
void encode_rows(CUtensorMap* map, const void* base, int64_t rows, int64_t k, uint32_t box_rows,
                 CUtensorMapL2promotion promotion) {
  const uint64_t dims[3] = {static_cast<uint64_t>(k), static_cast<uint64_t>(rows), 1};
  const uint64_t row_bytes = static_cast<uint64_t>(k) * 2;
  const uint32_t box[3] = {static_cast<uint32_t>(kChunkK), box_rows, 1};
  ROOFLINE_CHECK_MSG(
      cuda::encode_bf16_tensor_map_3d(map, base, dims, row_bytes,
                                      row_bytes * static_cast<uint64_t>(rows), box, promotion),
      "the driver would not encode a tensor map for the wide matmul");
}

}  // namespace

#if defined(ROOFLINE_PHASE_TRACE)
PhaseTraceRecorder& matmul_wide_phase_trace() {
  static PhaseTraceRecorder recorder;
  return recorder;
}
#endif

MatmulWideLaunch matmul_wide_cuda_launch(int64_t m, int64_t n, int64_t k, int requested_splits) {
  int device = 0;
  ROOFLINE_CUDA_CHECK(cudaGetDevice(&device));
  int num_sms = 0;
  ROOFLINE_CUDA_CHECK(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device));
  configure_kernel();  // the occupancy query sees the shared memory
  int64_t clusters[kMatmulWideMaxSplits + 1] = {};
  for (int s = 2; s <= kMatmulWideMaxSplits; ++s)
    clusters[s] =
        cuda::max_active_clusters<matmul_wide_kernel, kThreads, kSmemBytes, kMatmulWideMaxSplits>(
            s, "ROOFLINE_WIDE_CLUSTER");
  return matmul_wide_launch(m, n, k, num_sms, requested_splits, clusters);
}

void matmul_wide_cuda(const MatmulParams& p, MatmulEpilogue epilogue,
                      const MatmulWideLaunch& launch, CudaStream stream) {
  const char* unsupported = matmul_wide_unsupported_reason(p, epilogue);
  ROOFLINE_CHECK_MSG(unsupported == nullptr, unsupported);
  ROOFLINE_CHECK(p.y != nullptr);
  ROOFLINE_CHECK_MSG(matmul_wide_launch_valid(launch, p.n, p.k),
                     "the wide launch was planned for another problem");
  configure_kernel();

  CUtensorMap w_map;
  CUtensorMap x_map;
  // The weights stream once: each request widened to 256 bytes in L2. x is re-read by every tile.
  encode_rows(&w_map, p.w, p.n, p.k, static_cast<uint32_t>(kTileN),
              CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  encode_rows(&x_map, p.x, p.m, p.k, static_cast<uint32_t>(p.m),
              CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
  WideArgs a;
  a.bias = epilogue == MatmulEpilogue::kBias ? static_cast<const __nv_bfloat16*>(p.bias) : nullptr;
  a.residual = epilogue == MatmulEpilogue::kResidual ? static_cast<const __nv_bfloat16*>(p.residual)
                                                     : nullptr;
  a.y = static_cast<__nv_bfloat16*>(p.y);
  a.m = static_cast<int>(p.m);
  a.n = static_cast<int>(p.n);
  a.y_row_stride = p.y_row_stride;
  const auto aligned16 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  a.vector_io = p.y_row_stride % 8 == 0 && aligned16(a.y) &&
                (a.bias == nullptr || aligned16(a.bias)) &&
                (a.residual == nullptr || aligned16(a.residual));
  a.num_chunks = static_cast<int>(launch.num_chunks);
  a.chunks_per_split = static_cast<int>(launch.chunks_per_split);
  a.splits = launch.splits;
  static const bool receipts = env_switch("ROOFLINE_WIDE_RECEIPTS", "a closing cluster barrier",
                                          "receipts between the splits");
  a.receipts = receipts;
  const bool summarized = p.summaries.words != nullptr;
  if (summarized) {
    const char* no_summaries = matmul_summaries_epilogue_reason(p);
    ROOFLINE_CHECK_MSG(no_summaries == nullptr, no_summaries);
    ROOFLINE_CHECK_MSG(matmul_wide_fuses_summaries(p),
                       "the wide matmul writes logit tile summaries of 8, 16, 32, 64 or 128 tokens "
                       "only (summarize_logit_tiles_cuda writes the others)");
  }
  a.summary_words = reinterpret_cast<unsigned long long*>(p.summaries.words);
  a.summary_nonfinite = reinterpret_cast<unsigned long long*>(p.summaries.nonfinite);
  a.summary_epoch = p.summaries.epoch;
  a.summary_tile_tokens = summarized ? static_cast<int>(p.summaries.tile_tokens) : 8;
  a.summary_tiles = summarized ? static_cast<int>(logit_tiles(p.n, p.summaries.tile_tokens)) : 0;
#if defined(ROOFLINE_PHASE_TRACE)
  a.trace = matmul_wide_phase_trace().next(static_cast<int>(launch.grid));
#endif
  cuda::launch_pdl_clustered(matmul_wide_kernel, dim3(static_cast<unsigned>(launch.grid)),
                             dim3(kThreads), static_cast<size_t>(kSmemBytes),
                             static_cast<cudaStream_t>(stream),
                             static_cast<unsigned>(launch.splits), w_map, x_map, a);
  ROOFLINE_CUDA_LAUNCH_CHECK(static_cast<cudaStream_t>(stream));
}

}  // namespace roofline
