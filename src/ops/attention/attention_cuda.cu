// paged_attention_cuda: causal GQA attention over a paged bf16 KV cache for a ragged batch
// (prefill, chunked prefill and decode in one launch), exactly the computation of
// paged_attention_cpu: query j of sequence s sits at position seq_lens[s] - q_len + j and attends
// to cached positions [max(0, pos - window + 1), pos].
//
// Algorithm (a first, correct version; speed is the job of later issues):
// - One thread block per (sequence, KV head, chunk of that KV head's query heads, tile of the
//   sequence's query tokens). Its rows are (token, query head) pairs of one GQA group, so a K/V
//   tile staged in shared memory serves every query head of the group: each K/V byte is read from
//   memory once per block, never once per query head.
// - K/V tiles of kTileKeys positions are gathered through the block table with cp.async (16-byte
//   chunks, every chunk of the tile in flight at once; positions past the block's last query are
//   zero-filled, never read).
// - Each warp owns kRowsPerWarp rows and one 32-key sub-tile of every K/V tile. Scores: lane i
//   takes key i of the sub-tile and dots it with each of the warp's query rows (queries in shared
//   memory as f32, read as broadcasts). Online softmax per row in registers (running max, running
//   sum, rescaled accumulator; base-2 exponentials with log2(e) folded into the scale). P·V: lane
//   i owns head_dim/32 output dimensions; each key's probability is broadcast with a shuffle.
// - Routing: batches whose sequences bring at most kDecodeMaxQueries (8) queries each go to the
//   split-K decode kernel (attention_decode_cuda.cu); the rest run here, in the prefill
//   configuration (4 row-warps, 1 key split: 32 rows, 32 keys per tile). The kernel template also
//   splits a tile's keys across warps (kKeySplits > 1, merged through shared memory): the decode
//   configuration before the decode kernel existed, no longer instantiated.
// - The grid does not know the sequences' q_len (they live on the device): its token-tile
//   dimension covers the longest possible one, num_tokens - num_seqs + 1, and blocks past their
//   sequence's queries exit at once. Tiles are taken last-first so the longest causal rows start
//   first.
//
// Numerics: bf16 q / K / V / out, f32 dots, f32 softmax state and accumulation, one rounding of
// the normalised output to bf16 (round to nearest even).
//
// Bound: decode reads 2·context·num_kv_heads·head_dim·2 bytes of K/V per sequence: memory bound;
// prefill does 4·q_len·context·num_heads·head_dim FLOPs (half of them masked for causal rows) on
// CUDA cores: compute bound in this version.
//
// Broken invariants on the device (q_len < 1, seq_len < q_len, seq_len beyond the block table, a
// block id outside [0, num_blocks)) trap: the kernel aborts the context rather than read outside
// the cache.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <mutex>

#include "core/check.h"
#include "core/cuda_check.h"
#include "ops/attention/attention.h"
#include "ops/attention/attention_decode_plan.h"
#include "ops/common/cuda_async.cuh"

namespace roofline {

namespace {

constexpr int kWarpSize = 32;
// (token, head) rows per warp: 8 rows × head_dim/32 accumulators per lane (32 registers at
// head_dim 128) keep the accumulators in registers while each K/V element read from shared memory
// feeds 8 rows.
constexpr int kRowsPerWarp = 8;
// Keys per warp sub-tile: one per lane in the score phase.
constexpr int kKeysPerSubTile = kWarpSize;
// Prefill: 4 warps × 8 rows = 32 rows per block, so a llama-style group of 4 heads covers 8 tokens
// per K/V tile; more rows would cost more registers or shared memory per block.
constexpr int kPrefillRowWarps = 4;
// The K/V shared-memory row is padded by 16 bytes so that 16-byte reads of 8 consecutive key rows
// (one shared-memory wavefront) fall in distinct banks.
constexpr int kKvRowPadElems = 8;
constexpr float kLog2e = 1.4426950408889634f;

template <int kHeadDim, int kRowWarps, int kKeySplits>
struct AttentionConfig {
  static_assert(kHeadDim % 32 == 0 && kHeadDim >= 32 && kHeadDim <= 256,
                "head_dim must be a multiple of 32 in [32, 256]: lanes own head_dim/32 dimensions");
  static_assert(kRowWarps == 1 || kKeySplits == 1,
                "a block splits either rows (prefill) or keys (decode) across its warps");
  static constexpr int kWarps = kRowWarps * kKeySplits;
  static constexpr int kThreads = kWarps * kWarpSize;
  static constexpr int kRows = kRowWarps * kRowsPerWarp;
  static constexpr int kTileKeys = kKeySplits * kKeysPerSubTile;
  static constexpr int kDimsPerLane = kHeadDim / kWarpSize;
  static constexpr int kChunksPerRow = kHeadDim / 8;              // 16-byte chunks of a bf16 row
  static constexpr int kKvRowStride = kHeadDim + kKvRowPadElems;  // elements
  static constexpr int kTileChunks = kTileKeys * kChunksPerRow;
  static_assert(kTileChunks % kThreads == 0, "every thread copies the same number of chunks");
  static constexpr size_t kQBytes = size_t{kRows} * kHeadDim * sizeof(float);
  static constexpr size_t kKvTileBytes = size_t{kTileKeys} * kKvRowStride * sizeof(__nv_bfloat16);
  // Decode's cross-warp merge: per split, each row's accumulator, running max and sum.
  static constexpr size_t kMergeBytes = kKeySplits > 1 ? size_t{kKeySplits} * kRows*(kHeadDim + 2) *
                                                             sizeof(float)
                                                       : 0;
  static constexpr size_t kSmemBytes =
      kQBytes + (2 * kKvTileBytes > kMergeBytes ? 2 * kKvTileBytes : kMergeBytes);
  static_assert(kQBytes % 16 == 0 && kKvTileBytes % 16 == 0, "16-byte aligned regions");
};

struct AttentionArgs {
  const __nv_bfloat16* q;        // [num_tokens, num_heads, head_dim]
  const __nv_bfloat16* k_cache;  // [num_blocks, block_size, num_kv_heads, head_dim]
  const __nv_bfloat16* v_cache;  // [num_blocks, block_size, num_kv_heads, head_dim]
  const int32_t* block_tables;   // [num_seqs, max_blocks_per_seq]
  const int32_t* seq_lens;       // [num_seqs]
  const int32_t* query_start;    // [num_seqs + 1]
  __nv_bfloat16* out;            // [num_tokens, num_heads, head_dim]
  int64_t num_blocks;
  int num_heads;
  int num_kv_heads;
  int group;             // query heads per KV head
  int heads_per_block;   // query heads of the group one block serves
  int head_chunks;       // ceil(group / heads_per_block)
  int tokens_per_block;  // query tokens one block serves
  int block_size;
  int max_blocks_per_seq;
  int sliding_window;  // 0: unlimited
  float scale_log2;    // scale · log2(e)
};

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// N consecutive bf16 (N in 1, 2, 4, 8; the address aligned to 2·N bytes) to f32.
template <int N>
__device__ __forceinline__ void load_bf16(const __nv_bfloat16* src, float* dst) {
  if constexpr (N == 1) {
    dst[0] = __bfloat162float(*src);
  } else if constexpr (N == 2) {
    const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(src));
    dst[0] = f.x;
    dst[1] = f.y;
  } else if constexpr (N == 4) {
    const uint2 raw = *reinterpret_cast<const uint2*>(src);
    const auto* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float2 f = __bfloat1622float2(h[i]);
      dst[2 * i] = f.x;
      dst[2 * i + 1] = f.y;
    }
  } else {
    static_assert(N == 8, "1, 2, 4 or 8 elements");
    const uint4 raw = *reinterpret_cast<const uint4*>(src);
    const auto* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __bfloat1622float2(h[i]);
      dst[2 * i] = f.x;
      dst[2 * i + 1] = f.y;
    }
  }
}

// N f32 to N consecutive bf16 (round to nearest even), one store of 2·N bytes.
template <int N>
__device__ __forceinline__ void store_bf16(const float* src, __nv_bfloat16* dst) {
  if constexpr (N == 1) {
    *dst = __float2bfloat16_rn(src[0]);
  } else {
    static_assert(N % 2 == 0 && N <= 8, "1, 2, 4 or 8 elements");
    alignas(2 * N) __nv_bfloat162 h[N / 2];  // aligned for the one vector store below
#pragma unroll
    for (int i = 0; i < N / 2; ++i) h[i] = __floats2bfloat162_rn(src[2 * i], src[2 * i + 1]);
    if constexpr (N == 2) {
      *reinterpret_cast<__nv_bfloat162*>(dst) = h[0];
    } else if constexpr (N == 4) {
      *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(h);
    } else {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(h);
    }
  }
}

template <int kHeadDim, int kRowWarps, int kKeySplits>
__global__ void __launch_bounds__(AttentionConfig<kHeadDim, kRowWarps, kKeySplits>::kThreads)
    paged_attention_kernel(const AttentionArgs a) {
  using Cfg = AttentionConfig<kHeadDim, kRowWarps, kKeySplits>;
  constexpr int kDpl = Cfg::kDimsPerLane;
  extern __shared__ __align__(16) unsigned char smem[];
  float* q_s = reinterpret_cast<float*>(smem);                        // [kRows][kHeadDim]
  auto* k_s = reinterpret_cast<__nv_bfloat16*>(smem + Cfg::kQBytes);  // [kTileKeys][kKvRowStride]
  __nv_bfloat16* v_s = k_s + Cfg::kTileKeys * Cfg::kKvRowStride;

  // ---- Which sequence, KV head, query heads and query tokens this block serves.
  const int seq = static_cast<int>(blockIdx.z);
  const int kv_head = static_cast<int>(blockIdx.y) / a.head_chunks;
  const int head_chunk = static_cast<int>(blockIdx.y) % a.head_chunks;
  const int token_tile = static_cast<int>(gridDim.x - 1 - blockIdx.x);  // last tiles first
  const int q_begin = a.query_start[seq];
  const int q_len = a.query_start[seq + 1] - q_begin;
  const int seq_len = a.seq_lens[seq];
  if (q_len < 1 || seq_len < q_len ||
      static_cast<int64_t>(seq_len) > static_cast<int64_t>(a.max_blocks_per_seq) * a.block_size) {
    __trap();  // the batch layout is broken: the CPU twin's checks, on the device
  }
  const int t0 = token_tile * a.tokens_per_block;  // first query of the tile, within the sequence
  if (t0 >= q_len) return;                         // uniform: the whole block leaves
  const int tile_tokens = min(a.tokens_per_block, q_len - t0);
  const int head0 = kv_head * a.group + head_chunk * a.heads_per_block;
  const int tile_heads = min(a.heads_per_block, a.group - head_chunk * a.heads_per_block);
  const int pos0 = seq_len - q_len + t0;  // position of the tile's first query

  // ---- Queries -> shared memory as f32 (rows of other tokens / heads: zeros, never written back).
  for (int idx = threadIdx.x; idx < Cfg::kRows * Cfg::kChunksPerRow; idx += Cfg::kThreads) {
    const int row = idx / Cfg::kChunksPerRow;
    const int chunk = idx % Cfg::kChunksPerRow;
    const int tl = row / a.heads_per_block;
    const int hl = row % a.heads_per_block;
    float vals[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (tl < tile_tokens && hl < tile_heads) {
      const int64_t token = q_begin + t0 + tl;
      load_bf16<8>(a.q + (token * a.num_heads + head0 + hl) * kHeadDim + chunk * 8, vals);
    }
    float4* dst = reinterpret_cast<float4*>(q_s + row * kHeadDim + chunk * 8);
    dst[0] = make_float4(vals[0], vals[1], vals[2], vals[3]);
    dst[1] = make_float4(vals[4], vals[5], vals[6], vals[7]);
  }

  // ---- This warp's rows and the keys they may attend.
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int row_warp = warp % kRowWarps;
  const int key_split = warp / kRowWarps;
  const int row0 = row_warp * kRowsPerWarp;
  int pos[kRowsPerWarp];    // the row's query position; -1 for rows without a query
  int first[kRowsPerWarp];  // the row's first attended position
  int warp_lo = INT_MAX;    // keys any of the warp's rows attends: [warp_lo, warp_hi]
  int warp_hi = -1;
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int row = row0 + i;
    const int tl = row / a.heads_per_block;
    const int hl = row % a.heads_per_block;
    if (tl < tile_tokens && hl < tile_heads) {
      pos[i] = pos0 + tl;
      first[i] = a.sliding_window > 0 ? max(0, pos[i] - a.sliding_window + 1) : 0;
      warp_lo = min(warp_lo, first[i]);
      warp_hi = max(warp_hi, pos[i]);
    } else {
      pos[i] = -1;
      first[i] = 0;
    }
  }

  // ---- The block's key range: first of its first query to its last query.
  const int kv_begin = a.sliding_window > 0 ? max(0, pos0 - a.sliding_window + 1) : 0;
  const int kv_end = pos0 + tile_tokens;
  const int32_t* table = a.block_tables + static_cast<int64_t>(seq) * a.max_blocks_per_seq;
  const int64_t slot_stride = static_cast<int64_t>(a.num_kv_heads) * kHeadDim;

  float m[kRowsPerWarp];          // running max of the row's scores (log2 domain)
  float l[kRowsPerWarp];          // this lane's share of the running sum of exp2(score - m)
  float acc[kRowsPerWarp][kDpl];  // unnormalised output, dimensions lane·kDpl ...
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int d = 0; d < kDpl; ++d) acc[i][d] = 0.0f;
  }

  for (int tile_start = kv_begin; tile_start < kv_end; tile_start += Cfg::kTileKeys) {
    __syncthreads();  // every warp is done with the previous tile (and q_s is written)

    // ---- Gather the K/V tile through the block table. cp.async keeps every chunk in flight
    // whatever the unrolling, so a partial unroll only bounds the address registers.
#pragma unroll 4
    for (int it = 0; it < Cfg::kTileChunks / Cfg::kThreads; ++it) {
      const int idx = it * Cfg::kThreads + static_cast<int>(threadIdx.x);
      const int key = idx / Cfg::kChunksPerRow;
      const int chunk = idx % Cfg::kChunksPerRow;
      const int kp = tile_start + key;
      const bool valid = kp < kv_end;
      int64_t offset = 0;
      if (valid) {
        const int32_t block = table[kp / a.block_size];
        if (block < 0 || block >= a.num_blocks) __trap();  // a block id outside the cache
        const int64_t slot = static_cast<int64_t>(block) * a.block_size + kp % a.block_size;
        offset = slot * slot_stride + static_cast<int64_t>(kv_head) * kHeadDim + chunk * 8;
      }
      const int dst = key * Cfg::kKvRowStride + chunk * 8;
      cuda::cp_async_16(k_s + dst, a.k_cache + offset, valid);
      cuda::cp_async_16(v_s + dst, a.v_cache + offset, valid);
    }
    cuda::cp_async_wait_all();
    __syncthreads();

    // ---- This warp's 32-key sub-tile, skipped when none of its rows attends any of its keys.
    const int sub_start = tile_start + key_split * kKeysPerSubTile;
    if (sub_start > warp_hi || sub_start + kKeysPerSubTile - 1 < warp_lo) continue;

    // Scores: lane `lane` takes key sub_start + lane.
    const __nv_bfloat16* k_row = k_s + (key_split * kKeysPerSubTile + lane) * Cfg::kKvRowStride;
    float s[kRowsPerWarp];
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) s[i] = 0.0f;
#pragma unroll 4
    for (int c = 0; c < kHeadDim; c += 8) {
      float kf[8];
      load_bf16<8>(k_row + c, kf);
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const float4 qa = *reinterpret_cast<const float4*>(q_s + (row0 + i) * kHeadDim + c);
        const float4 qb = *reinterpret_cast<const float4*>(q_s + (row0 + i) * kHeadDim + c + 4);
        s[i] += qa.x * kf[0] + qa.y * kf[1] + qa.z * kf[2] + qa.w * kf[3] + qb.x * kf[4] +
                qb.y * kf[5] + qb.z * kf[6] + qb.w * kf[7];
      }
    }

    // Online softmax: mask, new running max, rescale, probabilities.
    const int kp = sub_start + lane;
    float p[kRowsPerWarp];
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const bool attended = kp >= first[i] && kp <= pos[i];
      const float x = attended ? s[i] * a.scale_log2 : -INFINITY;
      const float m_new = fmaxf(m[i], warp_max(x));
      // A row that has attended nothing yet keeps m = -inf; subtracting 0 then keeps every
      // exponential exp2(-inf) = 0 instead of exp2(-inf - -inf) = NaN.
      const float m_ref = m_new == -INFINITY ? 0.0f : m_new;
      const float alpha = exp2f(m[i] - m_ref);
      p[i] = exp2f(x - m_ref);
      l[i] = l[i] * alpha + p[i];
#pragma unroll
      for (int d = 0; d < kDpl; ++d) acc[i][d] *= alpha;
      m[i] = m_new;
    }

    // P·V: lane `lane` owns output dimensions lane·kDpl ... lane·kDpl + kDpl - 1.
    const __nv_bfloat16* v_sub =
        v_s + key_split * kKeysPerSubTile * Cfg::kKvRowStride + lane * kDpl;
#pragma unroll 4
    for (int j = 0; j < kKeysPerSubTile; ++j) {
      float vf[kDpl];
      load_bf16<kDpl>(v_sub + j * Cfg::kKvRowStride, vf);
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const float pj = __shfl_sync(0xffffffffu, p[i], j);
#pragma unroll
        for (int d = 0; d < kDpl; ++d) acc[i][d] += pj * vf[d];
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) l[i] = warp_sum(l[i]);

  // ---- Normalise and write (decode: merge the key splits first).
  const int64_t out_token0 = static_cast<int64_t>(q_begin) + t0;
  if constexpr (kKeySplits == 1) {
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      if (pos[i] < 0) continue;
      const int row = row0 + i;
      const float inv = 1.0f / l[i];
      float o[kDpl];
#pragma unroll
      for (int d = 0; d < kDpl; ++d) o[d] = acc[i][d] * inv;
      const int64_t token = out_token0 + row / a.heads_per_block;
      store_bf16<kDpl>(
          o,
          a.out + (token * a.num_heads + head0 + row % a.heads_per_block) * kHeadDim + lane * kDpl);
    }
  } else {
    // Merge area (reuses the K/V tile): acc [kKeySplits][kRows][kHeadDim], then m and l
    // [kKeySplits][kRows].
    float* acc_s = reinterpret_cast<float*>(smem + Cfg::kQBytes);
    float* m_s = acc_s + kKeySplits * Cfg::kRows * kHeadDim;
    float* l_s = m_s + kKeySplits * Cfg::kRows;
    __syncthreads();  // every warp is done reading the last K/V tile
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int row = row0 + i;
#pragma unroll
      for (int d = 0; d < kDpl; ++d)
        acc_s[(key_split * Cfg::kRows + row) * kHeadDim + lane * kDpl + d] = acc[i][d];
      if (lane == 0) {
        m_s[key_split * Cfg::kRows + row] = m[i];
        l_s[key_split * Cfg::kRows + row] = l[i];
      }
    }
    __syncthreads();
    if (key_split == 0) {
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        if (pos[i] < 0) continue;
        const int row = row0 + i;
        // The row's own position lies in some split's keys, so the overall max is finite.
        float m_all = -INFINITY;
        for (int sp = 0; sp < kKeySplits; ++sp) m_all = fmaxf(m_all, m_s[sp * Cfg::kRows + row]);
        float l_all = 0.0f;
        float o[kDpl];
#pragma unroll
        for (int d = 0; d < kDpl; ++d) o[d] = 0.0f;
        for (int sp = 0; sp < kKeySplits; ++sp) {
          const float w = exp2f(m_s[sp * Cfg::kRows + row] - m_all);  // 0 for an empty split
          l_all += w * l_s[sp * Cfg::kRows + row];
#pragma unroll
          for (int d = 0; d < kDpl; ++d)
            o[d] += w * acc_s[(sp * Cfg::kRows + row) * kHeadDim + lane * kDpl + d];
        }
        const float inv = 1.0f / l_all;
#pragma unroll
        for (int d = 0; d < kDpl; ++d) o[d] *= inv;
        const int64_t token = out_token0 + row / a.heads_per_block;
        store_bf16<kDpl>(o, a.out +
                                (token * a.num_heads + head0 + row % a.heads_per_block) * kHeadDim +
                                lane * kDpl);
      }
    }
  }
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

template <int kHeadDim, int kRowWarps, int kKeySplits>
void launch(const PagedAttentionParams& p, cudaStream_t stream) {
  using Cfg = AttentionConfig<kHeadDim, kRowWarps, kKeySplits>;
  auto* kernel = paged_attention_kernel<kHeadDim, kRowWarps, kKeySplits>;
  int device = 0;
  ROOFLINE_CUDA_CHECK(cudaGetDevice(&device));
  ROOFLINE_CHECK(Cfg::kSmemBytes <= static_cast<size_t>(max_dynamic_smem_bytes(device)));
  // Above 48 KiB a kernel must opt in to its dynamic shared memory, once per device.
  constexpr int kMaxDevices = 64;
  static std::once_flag configured[kMaxDevices];
  std::call_once(configured[device], [kernel] {
    ROOFLINE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(Cfg::kSmemBytes)));
  });

  AttentionArgs a;
  a.q = static_cast<const __nv_bfloat16*>(p.q);
  a.k_cache = static_cast<const __nv_bfloat16*>(p.k_cache);
  a.v_cache = static_cast<const __nv_bfloat16*>(p.v_cache);
  a.block_tables = p.block_tables;
  a.seq_lens = p.seq_lens;
  a.query_start = p.query_start;
  a.out = static_cast<__nv_bfloat16*>(p.out);
  a.num_blocks = p.num_blocks;
  a.num_heads = static_cast<int>(p.num_heads);
  a.num_kv_heads = static_cast<int>(p.num_kv_heads);
  a.group = static_cast<int>(p.num_heads / p.num_kv_heads);
  a.heads_per_block = std::min(a.group, Cfg::kRows);
  a.head_chunks = (a.group + a.heads_per_block - 1) / a.heads_per_block;
  a.tokens_per_block = Cfg::kRows / a.heads_per_block;
  a.block_size = static_cast<int>(p.block_size);
  a.max_blocks_per_seq = static_cast<int>(p.max_blocks_per_seq);
  a.sliding_window = static_cast<int>(p.sliding_window);
  a.scale_log2 = p.scale * kLog2e;

  // Each sequence has >= 1 query, so none has more than num_tokens - num_seqs + 1.
  const int64_t max_q_len = p.num_tokens - p.num_seqs + 1;
  const int64_t token_tiles = (max_q_len + a.tokens_per_block - 1) / a.tokens_per_block;
  const int64_t head_blocks = p.num_kv_heads * a.head_chunks;
  ROOFLINE_CHECK(token_tiles <= INT_MAX && head_blocks <= 65535 && p.num_seqs <= 65535);
  const dim3 grid(static_cast<unsigned>(token_tiles), static_cast<unsigned>(head_blocks),
                  static_cast<unsigned>(p.num_seqs));
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(a);
  ROOFLINE_CUDA_LAUNCH_CHECK(stream);
}

template <int kHeadDim>
void dispatch_kernel(const PagedAttentionParams& p, cudaStream_t stream) {
  launch<kHeadDim, kPrefillRowWarps, 1>(p, stream);
}

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
  const int64_t max_q_len = p.max_q_len > 0 ? p.max_q_len : p.num_tokens - p.num_seqs + 1;
  ROOFLINE_CHECK(max_q_len <= p.num_tokens - p.num_seqs + 1);
  if (max_q_len <= kDecodeMaxQueries) {
    const int64_t max_seq_len =
        p.max_seq_len > 0 ? p.max_seq_len : p.max_blocks_per_seq * p.block_size;
    ROOFLINE_CHECK(max_seq_len <= p.max_blocks_per_seq * p.block_size);
    paged_attention_decode_cuda(p, max_q_len, max_seq_len, stream);
    return;
  }
  switch (p.head_dim) {
    case 32:
      dispatch_kernel<32>(p, stream);
      return;
    case 64:
      dispatch_kernel<64>(p, stream);
      return;
    case 128:
      dispatch_kernel<128>(p, stream);
      return;
    case 256:
      dispatch_kernel<256>(p, stream);
      return;
    default:
      ROOFLINE_CHECK_MSG(false, "paged_attention_cuda: head_dim must be 32, 64, 128 or 256");
  }
}

}  // namespace roofline
