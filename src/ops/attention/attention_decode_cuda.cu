// paged_attention_decode_cuda: the decode form of paged_attention_cuda, for batches whose
// sequences bring 1 to 8 queries each (decode; speculative verification). Same computation as
// paged_attention_cpu: query j of sequence s sits at position seq_lens[s] - q_len + j and attends
// to cached positions [max(0, pos - window + 1), pos].
//
// Algorithm (the plan — rows per block, row chunks, splits — is attention_decode_plan.h's):
// - Grid (splits, KV heads x row chunks, sequences); 4 warps per block. A block's rows are
//   (query, query head) pairs of one GQA group, held in registers (q pre-scaled by
//   scale·log2(e)), so each K/V byte read serves every query head of the group.
// - The block's key range (the union of its rows' windows) is cut into `splits` equal chunks, a
//   multiple of one stage long; the block takes chunk blockIdx.x. Its warps take the chunk's
//   stages round-robin.
// - Each warp streams its stages through a private shared-memory ring (kStages deep) with
//   cp.async: 16-byte chunks, lane L copying the chunk it will read itself, so the ring needs no
//   barrier, and kStages - 1 stages (8 KB per warp) stay in flight without holding registers.
//   Physical blocks come from the block table one stage ahead of their copies, so table reads do
//   not stall the stream.
// - Lane layout: kLanesPerKey = head_dim / 8 lanes cover one key row (8 dims each); a warp covers
//   32 / kLanesPerKey keys per 16-byte load. Scores: each lane dots its 8 dims with each row's q,
//   xor-shuffle sums across the key's lanes. Each lane group (one key of every load) keeps its
//   own online-softmax state per row (running max, sum, 8 accumulators), so no communication
//   happens per key; groups, then warps (shared memory), merge at the end.
// - One split: the block normalises and writes bf16 out. Several: each block writes its rows'
//   normalised f32 partial and log2-sum-exp to the workspace, then counts itself in with an
//   atomic; the last block of its (sequence, KV head, row chunk) merges the partials (reading
//   them through L2) and resets the counter to zero for the next call. No second kernel, no host
//   state: a CUDA graph can capture it.
//
// Numerics: bf16 q / K / V / out, f32 dots, f32 softmax state in base 2 (weights by the hardware
// ex2.approx, relative error ~2^-22), f32 accumulation, one rounding of the normalised output to
// bf16.
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
#include <mutex>

#include "core/check.h"
#include "core/cuda_check.h"
#include "ops/attention/attention.h"
#include "ops/attention/attention_decode_plan.h"
#include "ops/common/cuda_async.cuh"

namespace roofline {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
// Ring depth per warp, and 16-byte K (and V) chunks each lane copies per stage: a stage is
// 32 x 4 x 16 B = 2 KB of K plus 2 KB of V whatever the head_dim (8 keys at head_dim 128).
// Measured (H200, B=256 x L=4096, head_dim 128, 4 rows): 4 stages (64 KB per block, 3 blocks per
// SM) 69.6 % of the copy ceiling, ncu: issue slots 66 % busy with 1.2 eligible warps of 3 per
// scheduler; 3 stages (48 KB, 4 blocks per SM, the register limit) 73.2 %.
constexpr int kStages = 3;
constexpr int kLoads = 4;
constexpr float kNegInf = -__builtin_huge_valf();
// The running max starts here, not at -inf: exp2(x - kEmptyMax) is then 0 for every masked score
// (-inf) and 1 for alpha while nothing is attended (sum and accumulators stay 0), with no branch.
constexpr float kEmptyMax = -1e30f;

template <int kHeadDim, int kRows>
struct DecodeConfig {
  static_assert(kHeadDim == 32 || kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256,
                "head_dim 32, 64, 128 or 256");
  static_assert(kRows == 1 || kRows == 2 || kRows == 4 || kRows == 8, "rows 1, 2, 4 or 8");
  static constexpr int kLanesPerKey = kHeadDim / 8;
  static constexpr int kKeysPerLoad = 32 / kLanesPerKey;
  static constexpr int kKeysPerStage = kKeysPerLoad * kLoads;
  static constexpr int kStageChunks = 32 * kLoads;  // 16-byte chunks of K per warp stage
  static constexpr int kRingBytes = kWarps * kStages * 2 * kStageChunks * 16;  // 48 KB
  // The end-of-block merge reuses the ring: per warp, its rows' accumulators, max and sum.
  static constexpr int kMergeBytes = kWarps * kRows * (kHeadDim + 2) * 4;
  static constexpr int kSmemBytes = kRingBytes > kMergeBytes ? kRingBytes : kMergeBytes;
};

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
  float scale_log2;
};

__device__ __forceinline__ void bf16x8_to_f32(const uint4& raw, float (&f)[8]) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

// 2^x by the hardware's ex2.approx (relative error ~2^-22, -inf -> 0): the softmax weights.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <int kHeadDim, int kRows>
__global__ void __launch_bounds__(kThreads) paged_decode_kernel(const DecodeArgs a) {
  using Cfg = DecodeConfig<kHeadDim, kRows>;
  constexpr int kLanesPerKey = Cfg::kLanesPerKey;
  constexpr int kKeysPerLoad = Cfg::kKeysPerLoad;
  constexpr int kKeysPerStage = Cfg::kKeysPerStage;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ unsigned s_last;

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int key_group = lane / kLanesPerKey;  // which key of each load this lane serves
  const int dim0 = (lane % kLanesPerKey) * 8;  // this lane's 8 dims of a row
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
  if (row0 >= rows_total) return;  // every split of this group returns: its counter stays 0
  const int rows_here = min(kRows, rows_total - row0);

  // This block's rows: positions, q (scaled, f32) for this lane's 8 dims.
  int pos[kRows];
  float q[kRows][8];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int row = row0 + r;
    pos[r] = -1;  // an unused row attends to nothing
#pragma unroll
    for (int e = 0; e < 8; ++e) q[r][e] = 0.0f;
    if (r < rows_here) {
      const int j = row / a.group;
      const int head = kv_head * a.group + row % a.group;
      pos[r] = seq_len - q_len + j;
      const uint4 raw = *reinterpret_cast<const uint4*>(
          a.q + (static_cast<int64_t>(q_begin + j) * a.num_heads + head) * kHeadDim + dim0);
      bf16x8_to_f32(raw, q[r]);
#pragma unroll
      for (int e = 0; e < 8; ++e) q[r][e] *= a.scale_log2;
    }
  }

  // The block's keys: the union of its rows' windows, [lo, hi); this split's share of it.
  const int first_pos = seq_len - q_len + row0 / a.group;
  const int hi = seq_len - q_len + (row0 + rows_here - 1) / a.group + 1;
  const int lo = a.sliding_window > 0 ? max(0, first_pos - a.sliding_window + 1) : 0;
  const int per_split =
      ((hi - lo + a.splits - 1) / a.splits + kKeysPerStage - 1) / kKeysPerStage * kKeysPerStage;
  const int s_lo = min(hi, lo + split * per_split);
  const int s_hi = min(hi, s_lo + per_split);
  const int num_stages_total = (s_hi - s_lo + kKeysPerStage - 1) / kKeysPerStage;
  const int my_stages = num_stages_total > warp ? (num_stages_total - warp + kWarps - 1) / kWarps : 0;

  // Each row's keys within this split: [row_lo, row_hi) (empty for unused rows).
  int row_lo[kRows], row_hi[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    row_lo[r] = a.sliding_window > 0 ? max(s_lo, pos[r] - a.sliding_window + 1) : s_lo;
    row_hi[r] = min(s_hi, pos[r] + 1);
  }
  // Page and offset of a key: shift and mask for the usual power-of-two block sizes.
  auto page_of = [&](int key) { return a.block_shift >= 0 ? key >> a.block_shift : key / a.block_size; };
  auto offset_of = [&](int key) {
    return a.block_shift >= 0 ? key & (a.block_size - 1) : key % a.block_size;
  };
  const int32_t* table = a.block_tables + static_cast<int64_t>(seq) * a.max_blocks_per_seq;
  const int64_t kv_stride = static_cast<int64_t>(a.num_kv_heads) * kHeadDim;
  uint4* ring = reinterpret_cast<uint4*>(smem) + warp * (kStages * 2 * Cfg::kStageChunks);

  // Key of load j of this warp's stage i, for this lane.
  auto key_of = [&](int i, int j) {
    return s_lo + (warp + i * kWarps) * kKeysPerStage + j * kKeysPerLoad + key_group;
  };
  // Physical block of each of this lane's keys in stage i (0 where the key is out of range).
  auto lookup = [&](int i, int (&blk)[kLoads]) {
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int key = key_of(i, j);
      blk[j] = 0;
      if (i < my_stages && key < s_hi) {
        blk[j] = table[page_of(key)];
        if (blk[j] < 0 || blk[j] >= a.num_blocks) __trap();
      }
    }
  };
  // Stage i's copies into ring slot i % kStages; one commit group per stage, empty past the end.
  auto issue = [&](int i, const int (&blk)[kLoads]) {
    uint4* slot = ring + (i % kStages) * 2 * Cfg::kStageChunks;
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int key = key_of(i, j);
      const bool valid = i < my_stages && key < s_hi;
      const int64_t row_slot =
          static_cast<int64_t>(blk[j]) * a.block_size + (valid ? offset_of(key) : 0);
      const int64_t off = row_slot * kv_stride + static_cast<int64_t>(kv_head) * kHeadDim + dim0;
      cuda::cp_async_16(slot + j * 32 + lane, a.k_cache + (valid ? off : 0), valid);
      cuda::cp_async_16(slot + Cfg::kStageChunks + j * 32 + lane, a.v_cache + (valid ? off : 0),
                        valid);
    }
    cuda::cp_async_commit();
  };

  float m[kRows], l[kRows], acc[kRows][8];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m[r] = kEmptyMax;
    l[r] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[r][e] = 0.0f;
  }

  int blk[kLoads];
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    lookup(i, blk);
    issue(i, blk);
  }
  lookup(kStages - 1, blk);
  for (int i = 0; i < my_stages; ++i) {
    issue(i + kStages - 1, blk);  // blocks looked up one stage ago
    lookup(i + kStages, blk);
    cuda::cp_async_wait<kStages - 1>();  // stage i has landed (this lane's own chunks)
    const uint4* slot = ring + (i % kStages) * 2 * Cfg::kStageChunks;

    float s[kRows][kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      float kf[8];
      bf16x8_to_f32(slot[j * 32 + lane], kf);
      const int key = key_of(i, j);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) dot = fmaf(q[r][e], kf[e], dot);
#pragma unroll
        for (int off = kLanesPerKey / 2; off > 0; off >>= 1)
          dot += __shfl_xor_sync(0xffffffffu, dot, off);
        s[r][j] = key >= row_lo[r] && key < row_hi[r] ? dot : kNegInf;
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float mx = m[r];
#pragma unroll
      for (int j = 0; j < kLoads; ++j) mx = fmaxf(mx, s[r][j]);
      const float alpha = fast_exp2(m[r] - mx);
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kLoads; ++j) {
        s[r][j] = fast_exp2(s[r][j] - mx);
        sum += s[r][j];
      }
      l[r] = l[r] * alpha + sum;
      m[r] = mx;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[r][e] *= alpha;
    }
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      float vf[8];
      bf16x8_to_f32(slot[Cfg::kStageChunks + j * 32 + lane], vf);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r][e] = fmaf(s[r][j], vf[e], acc[r][e]);
      }
    }
  }
  cuda::cp_async_wait_all();

  // Merge the lane groups of this warp (lanes kLanesPerKey, 2·kLanesPerKey, … apart).
#pragma unroll
  for (int off = kLanesPerKey; off < 32; off <<= 1) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float m_o = __shfl_xor_sync(0xffffffffu, m[r], off);
      const float l_o = __shfl_xor_sync(0xffffffffu, l[r], off);
      const float mx = fmaxf(m[r], m_o);
      const float wa = fast_exp2(m[r] - mx), wb = fast_exp2(m_o - mx);
      l[r] = l[r] * wa + l_o * wb;
      m[r] = mx;
#pragma unroll
      for (int e = 0; e < 8; ++e)
        acc[r][e] = acc[r][e] * wa + __shfl_xor_sync(0xffffffffu, acc[r][e], off) * wb;
    }
  }

  // Merge the warps through shared memory (the ring is free: every copy has landed).
  __syncthreads();
  float* s_acc = reinterpret_cast<float*>(smem);        // [kWarps][kRows][kHeadDim]
  float* s_m = s_acc + kWarps * kRows * kHeadDim;        // [kWarps][kRows]
  float* s_l = s_m + kWarps * kRows;                     // [kWarps][kRows]
  if (key_group == 0) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int e = 0; e < 8; ++e) s_acc[(warp * kRows + r) * kHeadDim + dim0 + e] = acc[r][e];
      if (lane == 0) {
        s_m[warp * kRows + r] = m[r];
        s_l[warp * kRows + r] = l[r];
      }
    }
  }
  __syncthreads();

  const int64_t group_index = static_cast<int64_t>(seq) * gridDim.y + blockIdx.y;
  const int64_t split_block = group_index * a.splits + split;
  for (int idx = tid; idx < rows_here * kHeadDim; idx += kThreads) {
    const int r = idx / kHeadDim;
    const int d = idx % kHeadDim;
    float mx = kEmptyMax;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, s_m[w * kRows + r]);
    float sum = 0.0f, o = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float wt = fast_exp2(s_m[w * kRows + r] - mx);
      sum += s_l[w * kRows + r] * wt;
      o += s_acc[(w * kRows + r) * kHeadDim + d] * wt;
    }
    const int row = row0 + r;
    if (a.splits == 1) {
      const int head = kv_head * a.group + row % a.group;
      const int64_t t = q_begin + row / a.group;
      a.out[(t * a.num_heads + head) * kHeadDim + d] = __float2bfloat16_rn(o / sum);
    } else {
      a.part_out[(split_block * kRows + r) * kHeadDim + d] = sum > 0.0f ? o / sum : 0.0f;
      if (d == 0) a.part_lse[split_block * kRows + r] = sum > 0.0f ? mx + log2f(sum) : kNegInf;
    }
  }
  if (a.splits == 1) return;

  // Count this block in; the last of the group's splits merges them all.
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    const unsigned before = atomicAdd(a.counters + group_index, 1u);
    s_last = before == static_cast<unsigned>(a.splits - 1) ? 1u : 0u;
  }
  __syncthreads();
  if (s_last == 0u) return;
  __threadfence();
  if (tid == 0) a.counters[group_index] = 0u;  // ready for the next call
  const int64_t first_block = group_index * a.splits;
  // Each row's split weights 2^(lse - max) / total, one warp per row, into shared memory (free:
  // every thread is past its reads of the block's own merge above).
  float* s_w = reinterpret_cast<float*>(smem);  // [kRows][splits]
  for (int r = warp; r < rows_here; r += kWarps) {
    float mx = kEmptyMax;
    for (int sp = lane; sp < a.splits; sp += 32)
      mx = fmaxf(mx, __ldcg(a.part_lse + (first_block + sp) * kRows + r));
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    float total = 0.0f;
    for (int sp = lane; sp < a.splits; sp += 32) {
      const float w = fast_exp2(__ldcg(a.part_lse + (first_block + sp) * kRows + r) - mx);
      s_w[r * a.splits + sp] = w;
      total += w;
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) total += __shfl_xor_sync(0xffffffffu, total, off);
    const float inv = 1.0f / total;  // > 0: the row's own key is in some split
    for (int sp = lane; sp < a.splits; sp += 32) s_w[r * a.splits + sp] *= inv;
  }
  __syncthreads();
  // Four dims per thread, the splits' loads unrolled so several are in flight at once.
  constexpr int kQuads = kHeadDim / 4;
  for (int idx = tid; idx < rows_here * kQuads; idx += kThreads) {
    const int r = idx / kQuads;
    const int d = (idx % kQuads) * 4;
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 8
    for (int sp = 0; sp < a.splits; ++sp) {
      const float w = s_w[r * a.splits + sp];
      const float4 v = __ldcg(reinterpret_cast<const float4*>(
          a.part_out + ((first_block + sp) * kRows + r) * kHeadDim + d));
      o.x = fmaf(w, v.x, o.x);
      o.y = fmaf(w, v.y, o.y);
      o.z = fmaf(w, v.z, o.z);
      o.w = fmaf(w, v.w, o.w);
    }
    const int row = row0 + r;
    const int head = kv_head * a.group + row % a.group;
    const int64_t t = q_begin + row / a.group;
    __nv_bfloat16* dst = a.out + (t * a.num_heads + head) * kHeadDim + d;
    dst[0] = __float2bfloat16_rn(o.x);
    dst[1] = __float2bfloat16_rn(o.y);
    dst[2] = __float2bfloat16_rn(o.z);
    dst[3] = __float2bfloat16_rn(o.w);
  }
}

// Resident blocks of one kernel on the current device, measured once per device.
template <int kHeadDim, int kRows>
int64_t resident_blocks(int device) {
  constexpr int kMaxDevices = 64;
  static int64_t blocks[kMaxDevices] = {};
  static std::once_flag once[kMaxDevices];
  ROOFLINE_CHECK(device >= 0 && device < kMaxDevices);
  std::call_once(once[device], [device] {
    using Cfg = DecodeConfig<kHeadDim, kRows>;
    auto* kernel = paged_decode_kernel<kHeadDim, kRows>;
    ROOFLINE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             Cfg::kSmemBytes));
    int per_sm = 0, sms = 0;
    ROOFLINE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads,
                                                                      Cfg::kSmemBytes));
    ROOFLINE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    ROOFLINE_CHECK_MSG(per_sm > 0, "paged_decode_kernel cannot be resident on this GPU");
    blocks[device] = static_cast<int64_t>(per_sm) * sms;
  });
  return blocks[device];
}

template <int kHeadDim, int kRows>
void launch(const PagedAttentionParams& p, int64_t max_q_len, int64_t max_seq_len,
            cudaStream_t stream) {
  using Cfg = DecodeConfig<kHeadDim, kRows>;
  int device = 0;
  ROOFLINE_CUDA_CHECK(cudaGetDevice(&device));
  const int64_t group = p.num_heads / p.num_kv_heads;
  const DecodePlan plan = plan_decode_attention(p.num_seqs, p.num_kv_heads, group, max_q_len,
                                                max_seq_len, resident_blocks<kHeadDim, kRows>(device));
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
  a.scale_log2 = p.scale * 1.4426950408889634f;
  const int64_t head_blocks = p.num_kv_heads * plan.row_chunks;
  ROOFLINE_CHECK(head_blocks <= 65535 && p.num_seqs <= 65535);
  const dim3 grid(static_cast<unsigned>(plan.splits), static_cast<unsigned>(head_blocks),
                  static_cast<unsigned>(p.num_seqs));
  paged_decode_kernel<kHeadDim, kRows><<<grid, kThreads, Cfg::kSmemBytes, stream>>>(a);
  ROOFLINE_CUDA_LAUNCH_CHECK(stream);
}

template <int kHeadDim>
void dispatch_rows(const PagedAttentionParams& p, int64_t max_q_len, int64_t max_seq_len,
                   cudaStream_t stream) {
  const int64_t rows =
      plan_decode_attention(1, 1, p.num_heads / p.num_kv_heads, max_q_len, 1, 1).rows;
  switch (rows) {
    case 1:
      launch<kHeadDim, 1>(p, max_q_len, max_seq_len, stream);
      return;
    case 2:
      launch<kHeadDim, 2>(p, max_q_len, max_seq_len, stream);
      return;
    case 4:
      launch<kHeadDim, 4>(p, max_q_len, max_seq_len, stream);
      return;
    default:
      launch<kHeadDim, 8>(p, max_q_len, max_seq_len, stream);
      return;
  }
}

}  // namespace

void paged_attention_decode_cuda(const PagedAttentionParams& p, int64_t max_q_len,
                                 int64_t max_seq_len, CudaStream stream) {
  ROOFLINE_CHECK(max_q_len >= 1 && max_q_len <= kDecodeMaxQueries);
  ROOFLINE_CHECK(max_seq_len >= 1 && max_seq_len <= INT_MAX);
  ROOFLINE_CHECK_MSG(p.workspace != nullptr,
                     "paged_attention_cuda: the decode kernel needs params.workspace "
                     "(paged_attention_cuda_workspace_bytes(), zero-filled)");
  switch (p.head_dim) {
    case 32:
      dispatch_rows<32>(p, max_q_len, max_seq_len, stream);
      return;
    case 64:
      dispatch_rows<64>(p, max_q_len, max_seq_len, stream);
      return;
    case 128:
      dispatch_rows<128>(p, max_q_len, max_seq_len, stream);
      return;
    case 256:
      dispatch_rows<256>(p, max_q_len, max_seq_len, stream);
      return;
    default:
      ROOFLINE_CHECK_MSG(false, "paged_attention_cuda: head_dim must be 32, 64, 128 or 256");
  }
}

}  // namespace roofline
