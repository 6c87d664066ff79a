// qkv_rope_cuda: post-processing of the fused q|k|v projection in one pass per token: optional
// per-head RMSNorm of q and k (Qwen3), rotate-half RoPE of q and k, rotated q to q_out, and k, v
// written into the paged KV cache at slot_mapping[t] (slots < 0 are padding: skipped).
//
// Algorithm (head_dim 32, 64, 128 or 256, 16-byte aligned pointers): one block per token
// (grid-stride over tokens). A head is handled by G = head_dim / 2 / N consecutive lanes (N = 8
// bf16 or 4 f32 per 16-byte pack); lane j of a head loads the pack at j·N and its rotation partner
// at j·N + head_dim/2, so every thread moves two 16-byte packs in, two out. The block first issues
// those loads, then computes cos/sin of the token's head_dim/2 angles into shared memory (once per
// token, not once per head), then normalises (the G lanes of a head sum squares with xor
// shuffles), rotates and stores. V heads are copied. A token with more than 1024 lanes of work
// loops over its heads in rounds of the block size. Any other head_dim or a misaligned pointer
// takes the generic kernel: one warp per (token, head), one element pair per lane at a time.
//
// Numerics: f32 math. angle = float(position) * inv_freq[i] (one f32 multiply, as the CPU twin and
// transformers); cos and sin by sincosf, the accurate version (positions reach 32k and beyond,
// where the fast __sinf loses all accuracy); the rotation is qkv_rope_math.cuh's, shared with the
// skinny matmul's RoPE epilogue so that the fused qkv projection gives the same bits. The norm is
// (x * (1 / sqrtf(mean(x^2) + eps))) * w; the rotation rounds each product before the add (x1·cos −
// x2·sin with __fmul_rn, no FMA), as the CPU twin. Each output is rounded once to the activation /
// cache dtype; v is copied exactly. A slot at or beyond num_blocks · block_size (a scheduler bug)
// is skipped: a kernel cannot abort. sincosf's large-argument reduction (|angle| > ~1e5, positions
// beyond ~100k) keeps a 28-byte array in local memory: the 32-byte stack frame ptxas reports for
// these kernels is that, not a register spill; it costs nothing below that angle.
//
// Bound: memory. Reads T·(H + 2·KV)·D elements, writes T·H·D to q_out and 2·T·KV·D to the cache:
// llama3-8b (32 / 8 heads, D 128) at 8192 tokens in bf16 = 201 MB, 47 us at 4.28 TB/s.
#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <utility>

#include "ops/common/cuda_async.cuh"
#include "ops/common/cuda_launch.cuh"
#include "ops/common/cuda_vector.cuh"
#include "ops/qkv_rope/qkv_rope.h"
#include "ops/qkv_rope/qkv_rope_cuda_variant.h"
#include "ops/qkv_rope/qkv_rope_math.cuh"

namespace roofline {

namespace {

// Threads per block of the vector kernel: the whole token at once for up to 1024 lanes of work
// (llama3-8b: 48 heads x 8 lanes = 384); larger tokens loop. A multiple of 32 (shuffles).
constexpr int kMaxThreads = 1024;
// Generic kernel: 8 warps per block, one (token, head) per warp at a time.
constexpr int kGenericThreads = 256;

struct QkvRopeArgs {
  const void* qkv;              // [num_tokens, (num_heads + 2 * num_kv_heads) * head_dim]
  void* q_out;                  // [num_tokens, num_heads * head_dim]
  const int32_t* positions;     // [num_tokens]
  const int64_t* slot_mapping;  // [num_tokens]
  void* k_cache;                // [num_slots, num_kv_heads, head_dim]
  void* v_cache;                // [num_slots, num_kv_heads, head_dim]
  const float* inv_freq;        // [head_dim / 2]
  const void* q_norm_weight;    // [head_dim]; kQkNorm only
  const void* k_norm_weight;    // [head_dim]; kQkNorm only
  DType norm_weight_dtype;
  float norm_eps;
  int64_t num_tokens;
  int num_heads;
  int num_kv_heads;
  int head_dim;
  int64_t num_slots;  // num_blocks * block_size
};

// The vector kernels' shared steps. A lane holds N pairs (x1[i], x2[i]) = elements col + i and
// kHalf + col + i of one head.

// q's and k's RMSNorm weights into shared memory, as f32 (visible after the caller's next barrier).
template <int kHeadDim>
__device__ __forceinline__ void load_qk_norm_weights(const QkvRopeArgs& a, float* s_q_weight,
                                                     float* s_k_weight, int tid, int threads) {
  for (int i = tid; i < kHeadDim; i += threads) {
    float w[1];
    cuda::load_weight_f32<1>(a.q_norm_weight, a.norm_weight_dtype, i, w);
    s_q_weight[i] = w[0];
    cuda::load_weight_f32<1>(a.k_norm_weight, a.norm_weight_dtype, i, w);
    s_k_weight[i] = w[0];
  }
}

// The per-head RMSNorm of a q or k head (the G lanes of the head sum their squares with xor
// shuffles, so every lane of the warp must call this); v heads pass through.
template <int N, int G, int kHeadDim>
__device__ __forceinline__ void qk_norm_lane(float (&x1)[N], float (&x2)[N], float norm_eps,
                                             const float* s_q_weight, const float* s_k_weight,
                                             int head, int q_heads, bool is_v, int col) {
  constexpr int kHalf = kHeadDim / 2;
  float sum_sq = 0.0f;
#pragma unroll
  for (int i = 0; i < N; ++i) sum_sq += x1[i] * x1[i] + x2[i] * x2[i];
#pragma unroll
  for (int offset = G / 2; offset > 0; offset >>= 1)
    sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);
  if (!is_v) {
    const float inv_rms = 1.0f / sqrtf(sum_sq / static_cast<float>(kHeadDim) + norm_eps);
    const float* w = head < q_heads ? s_q_weight : s_k_weight;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      x1[i] = (x1[i] * inv_rms) * w[col + i];
      x2[i] = (x2[i] * inv_rms) * w[kHalf + col + i];
    }
  }
}

// Rotates a q or k lane by the token's cos / sin (v lanes are copied) and stores the lane's two
// packs at dst (the head's row in q_out or in the cache).
template <typename T, int N, int kHeadDim>
__device__ __forceinline__ void rotate_store_lane(float (&x1)[N], float (&x2)[N],
                                                  typename T::Storage* dst, const float* s_cos,
                                                  const float* s_sin, bool is_v, int col) {
  constexpr int kHalf = kHeadDim / 2;
  if (!is_v) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      float o1, o2;
      cuda::rope_rotate(x1[i], x2[i], s_cos[col + i], s_sin[col + i], o1, o2);
      x1[i] = o1;
      x2[i] = o2;
    }
  }
  cuda::store_f32<T, N>(dst + col, x1);
  cuda::store_f32<T, N>(dst + kHalf + col, x2);
}

template <typename T, int kHeadDim, bool kQkNorm>
__global__ void __launch_bounds__(kMaxThreads)
    qkv_rope_kernel(const __grid_constant__ QkvRopeArgs a) {
  cuda::touch_params(a);
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  using S = typename T::Storage;
  constexpr int N = cuda::kVec16<T>;
  constexpr int kHalf = kHeadDim / 2;
  constexpr int G = kHalf / N;  // lanes per head
  static_assert(kHalf % N == 0 && G >= 1 && G <= 32 && (G & (G - 1)) == 0,
                "a head is a power-of-two group of lanes inside one warp");
  __shared__ float s_cos[kHalf];
  __shared__ float s_sin[kHalf];
  __shared__ float s_q_weight[kQkNorm ? kHeadDim : 1];
  __shared__ float s_k_weight[kQkNorm ? kHeadDim : 1];

  const S* qkv = static_cast<const S*>(a.qkv);
  S* q_out = static_cast<S*>(a.q_out);
  S* k_cache = static_cast<S*>(a.k_cache);
  S* v_cache = static_cast<S*>(a.v_cache);
  const int tid = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  const int q_heads = a.num_heads;
  const int qk_heads = a.num_heads + a.num_kv_heads;
  const int units = (qk_heads + a.num_kv_heads) * G;
  const int64_t row_elems = static_cast<int64_t>(qk_heads + a.num_kv_heads) * kHeadDim;
  const int64_t kv_row_elems = static_cast<int64_t>(a.num_kv_heads) * kHeadDim;

  // Visible to all after the first barrier below.
  if constexpr (kQkNorm) load_qk_norm_weights<kHeadDim>(a, s_q_weight, s_k_weight, tid, threads);

  for (int64_t t = blockIdx.x; t < a.num_tokens; t += gridDim.x) {
    const int64_t slot = a.slot_mapping[t];
    const bool write_kv = slot >= 0 && slot < a.num_slots;
    const float position = static_cast<float>(a.positions[t]);
    const S* src = qkv + t * row_elems;

    // Rounds over the token's heads; u0 is the same for the whole block, so barriers and
    // shuffles below are reached by every thread.
    for (int u0 = 0; u0 < units; u0 += threads) {
      const int u = u0 + tid;
      const bool active = u < units;
      const int head = u / G;
      const int col = (u % G) * N;  // first of this lane's pairs
      float x1[N], x2[N];
      if (active) {
        cuda::load_f32<T, N>(src + static_cast<int64_t>(head) * kHeadDim + col, x1);
        cuda::load_f32<T, N>(src + static_cast<int64_t>(head) * kHeadDim + kHalf + col, x2);
      } else {
#pragma unroll
        for (int i = 0; i < N; ++i) x1[i] = x2[i] = 0.0f;
      }
      if (u0 == 0) {
        // While the loads are in flight: this token's cos / sin, once for all its heads.
        for (int i = tid; i < kHalf; i += threads) {
          float s, c;
          cuda::rope_cos_sin(position, a.inv_freq[i], c, s);
          s_cos[i] = c;
          s_sin[i] = s;
        }
        __syncthreads();
      }
      const bool is_v = head >= qk_heads;
      if constexpr (kQkNorm)
        qk_norm_lane<N, G, kHeadDim>(x1, x2, a.norm_eps, s_q_weight, s_k_weight, head, q_heads,
                                     is_v, col);
      if (active && (head < q_heads || write_kv)) {
        S* dst;
        if (head < q_heads) {
          dst = q_out + (t * q_heads + head) * kHeadDim;
        } else if (!is_v) {
          dst = k_cache + slot * kv_row_elems + static_cast<int64_t>(head - q_heads) * kHeadDim;
        } else {
          dst = v_cache + slot * kv_row_elems + static_cast<int64_t>(head - qk_heads) * kHeadDim;
        }
        rotate_store_lane<T, N, kHeadDim>(x1, x2, dst, s_cos, s_sin, is_v, col);
      }
    }
    __syncthreads();  // s_cos / s_sin are rewritten for the next token
  }
}

// Stages of qkv_rope_ring_kernel's shared-memory ring: the current token and two ahead.
constexpr int kRingStages = 3;

// The ring form of qkv_rope_kernel for tokens that fit one round (units <= blockDim.x): a grid of
// resident blocks walks the tokens with a stride of gridDim.x; each thread copies its two packs
// of the tokens kRingStages - 1 ahead into a shared-memory ring with cp.async, so the loads hold
// no registers while in flight and each SM keeps ~2 tokens per block of loads outstanding through
// the rotation and the stores. A thread reads back only what it copied itself, so the ring needs
// no barrier; cos / sin are double-buffered: one barrier per token. Slot and position of the
// next token are loaded one token ahead. The math and the stores are qkv_rope_kernel's.
template <typename T, int kHeadDim, bool kQkNorm>
__global__ void __launch_bounds__(kMaxThreads)
    qkv_rope_ring_kernel(const __grid_constant__ QkvRopeArgs a) {
  cuda::touch_params(a);
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  using S = typename T::Storage;
  constexpr int N = cuda::kVec16<T>;
  constexpr int kHalf = kHeadDim / 2;
  constexpr int G = kHalf / N;  // lanes per head
  static_assert(kHalf % N == 0 && G >= 1 && G <= 32 && (G & (G - 1)) == 0,
                "a head is a power-of-two group of lanes inside one warp");
  using P = cuda::Pack<S, N>;
  static_assert(sizeof(P) == 16, "the ring holds 16-byte packs");
  extern __shared__ __align__(16) unsigned char ring_bytes[];
  P* ring = reinterpret_cast<P*>(ring_bytes);  // [kRingStages][2][blockDim.x]
  __shared__ float s_cos[2][kHalf];
  __shared__ float s_sin[2][kHalf];
  __shared__ float s_q_weight[kQkNorm ? kHeadDim : 1];
  __shared__ float s_k_weight[kQkNorm ? kHeadDim : 1];

  const S* qkv = static_cast<const S*>(a.qkv);
  S* q_out = static_cast<S*>(a.q_out);
  S* k_cache = static_cast<S*>(a.k_cache);
  S* v_cache = static_cast<S*>(a.v_cache);
  const int tid = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  const int q_heads = a.num_heads;
  const int qk_heads = a.num_heads + a.num_kv_heads;
  const int units = (qk_heads + a.num_kv_heads) * G;  // <= threads (the launcher checks)
  const int64_t row_elems = static_cast<int64_t>(qk_heads + a.num_kv_heads) * kHeadDim;
  const int64_t kv_row_elems = static_cast<int64_t>(a.num_kv_heads) * kHeadDim;
  const bool active = tid < units;
  const int head = tid / G;
  const int col = (tid % G) * N;
  const bool is_v = head >= qk_heads;
  const int64_t head_offset = static_cast<int64_t>(head) * kHeadDim + col;
  const int64_t stride = gridDim.x;

  // Visible to all after the first barrier below.
  if constexpr (kQkNorm) load_qk_norm_weights<kHeadDim>(a, s_q_weight, s_k_weight, tid, threads);

  // Token t's two packs into ring stage `stage`; one commit group per token, empty past the end.
  auto issue = [&](int64_t t, int stage) {
    if (active && t < a.num_tokens) {
      const S* src = qkv + t * row_elems + head_offset;
      cuda::cp_async_16(&ring[(stage * 2) * threads + tid], src, true);
      cuda::cp_async_16(&ring[(stage * 2 + 1) * threads + tid], src + kHalf, true);
    }
    cuda::cp_async_commit();
  };
  int64_t t = blockIdx.x;
#pragma unroll
  for (int s = 0; s < kRingStages - 1; ++s) issue(t + s * stride, s);
  int64_t cur_slot = t < a.num_tokens ? a.slot_mapping[t] : -1;
  int32_t cur_pos = t < a.num_tokens ? a.positions[t] : 0;
  for (int i = 0; t < a.num_tokens; t += stride, ++i) {
    const int stage = i % kRingStages;
    // The stage read one token ago (by this thread only) takes the token kRingStages - 1 ahead.
    issue(t + (kRingStages - 1) * stride, (i + kRingStages - 1) % kRingStages);
    const int64_t tn = t + stride;
    const int64_t next_slot = tn < a.num_tokens ? a.slot_mapping[tn] : -1;
    const int32_t next_pos = tn < a.num_tokens ? a.positions[tn] : 0;

    // This token's cos / sin into buffer i & 1, last read two tokens ago (a barrier between).
    const int buf = i & 1;
    const float position = static_cast<float>(cur_pos);
    for (int j = tid; j < kHalf; j += threads) {
      float sn, cs;
      cuda::rope_cos_sin(position, a.inv_freq[j], cs, sn);
      s_cos[buf][j] = cs;
      s_sin[buf][j] = sn;
    }
    cuda::cp_async_wait<kRingStages - 1>();  // this token's group has landed
    __syncthreads();

    float x1[N], x2[N];
    if (active) {
      const P p1 = ring[(stage * 2) * threads + tid];
      const P p2 = ring[(stage * 2 + 1) * threads + tid];
#pragma unroll
      for (int j = 0; j < N; ++j) {
        x1[j] = T::to_f32(p1.v[j]);
        x2[j] = T::to_f32(p2.v[j]);
      }
    } else {
#pragma unroll
      for (int j = 0; j < N; ++j) x1[j] = x2[j] = 0.0f;
    }
    if constexpr (kQkNorm)
      qk_norm_lane<N, G, kHeadDim>(x1, x2, a.norm_eps, s_q_weight, s_k_weight, head, q_heads, is_v,
                                   col);
    const bool write_kv = cur_slot >= 0 && cur_slot < a.num_slots;
    if (active && (head < q_heads || write_kv)) {
      S* dst;
      if (head < q_heads) {
        dst = q_out + (t * q_heads + head) * kHeadDim;
      } else if (!is_v) {
        dst = k_cache + cur_slot * kv_row_elems + static_cast<int64_t>(head - q_heads) * kHeadDim;
      } else {
        dst = v_cache + cur_slot * kv_row_elems + static_cast<int64_t>(head - qk_heads) * kHeadDim;
      }
      rotate_store_lane<T, N, kHeadDim>(x1, x2, dst, s_cos[buf], s_sin[buf], is_v, col);
    }
    cur_slot = next_slot;
    cur_pos = next_pos;
  }
  cuda::cp_async_wait_all();  // no copy outlives the block
}

// Any even head_dim and any alignment: one warp per (token, head), lanes striding over the pairs.
template <typename T, bool kQkNorm>
__global__ void __launch_bounds__(kGenericThreads)
    qkv_rope_generic_kernel(const __grid_constant__ QkvRopeArgs a) {
  cuda::touch_params(a);
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  using S = typename T::Storage;
  const S* qkv = static_cast<const S*>(a.qkv);
  S* q_out = static_cast<S*>(a.q_out);
  S* k_cache = static_cast<S*>(a.k_cache);
  S* v_cache = static_cast<S*>(a.v_cache);
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int d = a.head_dim;
  const int half = d / 2;
  const int q_heads = a.num_heads;
  const int qk_heads = a.num_heads + a.num_kv_heads;
  const int heads = qk_heads + a.num_kv_heads;
  const int64_t kv_row_elems = static_cast<int64_t>(a.num_kv_heads) * d;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  const int64_t units = a.num_tokens * heads;

  for (int64_t w = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; w < units;
       w += warps) {
    // Everything below is uniform across the warp, so the warp sum sees all 32 lanes.
    const int64_t t = w / heads;
    const int head = static_cast<int>(w % heads);
    const int64_t slot = a.slot_mapping[t];
    const bool write_kv = slot >= 0 && slot < a.num_slots;
    if (head >= q_heads && !write_kv) continue;
    const bool is_v = head >= qk_heads;
    const S* src = qkv + (t * heads + head) * d;
    S* dst;
    if (head < q_heads) {
      dst = q_out + (t * q_heads + head) * d;
    } else if (!is_v) {
      dst = k_cache + slot * kv_row_elems + static_cast<int64_t>(head - q_heads) * d;
    } else {
      dst = v_cache + slot * kv_row_elems + static_cast<int64_t>(head - qk_heads) * d;
    }
    float inv_rms = 1.0f;
    const void* norm_weight = head < q_heads ? a.q_norm_weight : a.k_norm_weight;
    if (kQkNorm && !is_v) {
      float sum_sq = 0.0f;
      for (int i = lane; i < d; i += 32) {
        const float x = T::to_f32(src[i]);
        sum_sq += x * x;
      }
      sum_sq = cuda::warp_sum(sum_sq);
      inv_rms = 1.0f / sqrtf(sum_sq / static_cast<float>(d) + a.norm_eps);
    }
    const float position = static_cast<float>(a.positions[t]);
    for (int i = lane; i < half; i += 32) {
      float x1 = T::to_f32(src[i]);
      float x2 = T::to_f32(src[i + half]);
      if (!is_v) {
        if (kQkNorm) {
          float w1[1], w2[1];
          cuda::load_weight_f32<1>(norm_weight, a.norm_weight_dtype, i, w1);
          cuda::load_weight_f32<1>(norm_weight, a.norm_weight_dtype, i + half, w2);
          x1 = (x1 * inv_rms) * w1[0];
          x2 = (x2 * inv_rms) * w2[0];
        }
        float s, c;
        cuda::rope_cos_sin(position, a.inv_freq[i], c, s);
        float o1, o2;
        cuda::rope_rotate(x1, x2, c, s, o1, o2);
        x1 = o1;
        x2 = o2;
      }
      dst[i] = T::from_f32(x1);
      dst[i + half] = T::from_f32(x2);
    }
  }
}

template <typename T, int kHeadDim, bool kQkNorm>
void launch_ring(const QkvRopeArgs& a, int threads, cudaStream_t stream) {
  auto* kernel = qkv_rope_ring_kernel<T, kHeadDim, kQkNorm>;
  const int smem = kRingStages * 2 * threads * 16;
  int device = 0;
  ROOFLINE_CUDA_CHECK(cudaGetDevice(&device));
  // Above 48 KiB a kernel must opt in to its dynamic shared memory, once per device.
  constexpr int kMaxDevices = 64;
  static std::once_flag configured[kMaxDevices];
  ROOFLINE_CHECK(device < kMaxDevices);
  std::call_once(configured[device], [kernel] {
    ROOFLINE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             kRingStages * 2 * kMaxThreads * 16));
  });
  int64_t grid = a.num_tokens;
  if (grid > cuda::device_sm_count()) {
    // As many blocks as stay resident at once: the grid walks the tokens. Measured once per
    // (device, block size) and cached, so a launch inside CUDA-graph capture makes no query.
    static std::mutex mu;
    static std::map<std::pair<int, int>, int> per_sm_cache;
    int per_sm = 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = per_sm_cache.find({device, threads});
      if (it == per_sm_cache.end()) {
        ROOFLINE_CUDA_CHECK(
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
        it = per_sm_cache.emplace(std::make_pair(device, threads), per_sm).first;
      }
      per_sm = it->second;
    }
    grid = std::min<int64_t>(grid,
                             static_cast<int64_t>(std::max(per_sm, 1)) * cuda::device_sm_count());
  }
  cuda::launch_pdl(kernel, dim3(static_cast<unsigned>(grid)), dim3(threads), smem, stream, a);
}

template <typename T, int kHeadDim>
void launch_vector(const QkvRopeArgs& a, bool qk_norm, bool ring, cudaStream_t stream) {
  constexpr int kLanesPerHead = kHeadDim / 2 / cuda::kVec16<T>;
  const int64_t units = static_cast<int64_t>(a.num_heads + 2 * a.num_kv_heads) * kLanesPerHead;
  const int threads =
      static_cast<int>(std::min<int64_t>(cuda::round_up_to_warp(units), kMaxThreads));
  if (ring && units <= kMaxThreads) {
    if (qk_norm) {
      launch_ring<T, kHeadDim, true>(a, threads, stream);
    } else {
      launch_ring<T, kHeadDim, false>(a, threads, stream);
    }
    return;
  }
  const int grid = static_cast<int>(std::min<int64_t>(a.num_tokens, INT_MAX));
  if (qk_norm) {
    cuda::launch_pdl(qkv_rope_kernel<T, kHeadDim, true>, dim3(grid), dim3(threads), 0, stream, a);
  } else {
    cuda::launch_pdl(qkv_rope_kernel<T, kHeadDim, false>, dim3(grid), dim3(threads), 0, stream, a);
  }
}

template <typename T>
void launch_generic(const QkvRopeArgs& a, bool qk_norm, cudaStream_t stream) {
  constexpr int kWarpsPerBlock = kGenericThreads / 32;
  const int64_t units = a.num_tokens * (a.num_heads + 2 * a.num_kv_heads);
  const int64_t wave = static_cast<int64_t>(cuda::device_sm_count()) *
                       (cuda::device_max_threads_per_sm() / kGenericThreads);
  const int grid = static_cast<int>(std::min(cuda::ceil_div(units, kWarpsPerBlock), wave));
  if (qk_norm) {
    cuda::launch_pdl(qkv_rope_generic_kernel<T, true>, dim3(grid), dim3(kGenericThreads), 0, stream,
                     a);
  } else {
    cuda::launch_pdl(qkv_rope_generic_kernel<T, false>, dim3(grid), dim3(kGenericThreads), 0,
                     stream, a);
  }
}

}  // namespace

void qkv_rope_cuda_variant(const QkvRopeParams& p, int variant, CudaStream stream) {
  ROOFLINE_CHECK(variant >= 0 && variant < kQkvRopeNumVariants);
  const bool ring = kQkvRopeVariants[variant].ring;
  ROOFLINE_CHECK(p.num_tokens >= 0 && p.num_heads > 0 && p.num_kv_heads > 0);
  ROOFLINE_CHECK(p.head_dim > 0 && p.head_dim % 2 == 0);
  ROOFLINE_CHECK(p.num_heads + 2 * p.num_kv_heads <= INT_MAX / p.head_dim);
  ROOFLINE_CHECK(p.block_size > 0 && p.num_blocks >= 0);
  ROOFLINE_CHECK((p.q_norm_weight == nullptr) == (p.k_norm_weight == nullptr));
  ROOFLINE_CHECK_MSG(p.kv_dtype == p.dtype, "the CUDA KV cache has the activation dtype");
  const bool qk_norm = p.q_norm_weight != nullptr;
  if (qk_norm) ROOFLINE_CHECK(is_float_dtype(p.norm_weight_dtype));
  if (p.num_tokens == 0) return;
  ROOFLINE_CHECK(p.qkv != nullptr && p.q_out != nullptr && p.positions != nullptr &&
                 p.slot_mapping != nullptr && p.inv_freq != nullptr);
  ROOFLINE_CHECK(p.k_cache != nullptr && p.v_cache != nullptr);

  const QkvRopeArgs a{p.qkv,
                      p.q_out,
                      p.positions,
                      p.slot_mapping,
                      p.k_cache,
                      p.v_cache,
                      p.inv_freq,
                      p.q_norm_weight,
                      p.k_norm_weight,
                      p.norm_weight_dtype,
                      p.norm_eps,
                      p.num_tokens,
                      static_cast<int>(p.num_heads),
                      static_cast<int>(p.num_kv_heads),
                      static_cast<int>(p.head_dim),
                      p.num_blocks * p.block_size};
  const bool aligned = cuda::is_aligned(p.qkv, 16) && cuda::is_aligned(p.q_out, 16) &&
                       cuda::is_aligned(p.k_cache, 16) && cuda::is_aligned(p.v_cache, 16);
  // The one dispatch point: activation dtype, head_dim (the vector kernel's lanes per head),
  // and the optional norm.
  cuda::dispatch_activation(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    switch (aligned ? p.head_dim : 0) {
      case 32:
        launch_vector<T, 32>(a, qk_norm, ring, stream);
        break;
      case 64:
        launch_vector<T, 64>(a, qk_norm, ring, stream);
        break;
      case 128:
        launch_vector<T, 128>(a, qk_norm, ring, stream);
        break;
      case 256:
        launch_vector<T, 256>(a, qk_norm, ring, stream);
        break;
      default:
        launch_generic<T>(a, qk_norm, stream);
        break;
    }
  });
  ROOFLINE_CUDA_LAUNCH_CHECK(stream);
}

void qkv_rope_cuda(const QkvRopeParams& p, CudaStream stream) {
  qkv_rope_cuda_variant(p, kQkvRopeDefaultVariant, stream);
}

}  // namespace roofline
