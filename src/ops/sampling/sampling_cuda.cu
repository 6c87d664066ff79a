// argmax_cuda: greedy decoding of a batch, out[r] = argmax over row r of [num_rows, vocab_size]
// logits (f32 or bf16), with argmax_cpu's conventions: the lowest index wins ties, NaN is never
// chosen, -1 for a row that is all NaN.
//
// Algorithm: one block per row (grid-stride over rows). Each thread scans packs of the row
// (16-byte loads: 8 bf16 or 4 f32), four packs in flight per step, keeping its best (value,
// index); then a warp-shuffle reduction and one shared round over the warps. The best of two
// candidates is the larger value, or on equal values the lower index; NaN never compares larger
// or equal, so it is never taken, and the empty candidate (-inf, INT32_MAX) loses to any real
// -inf at a lower index. That order is total, so the reduction order cannot change the answer.
// A vocabulary that is not a multiple of the pack width is scanned in packs of one element when
// the pointer or row length forbids 16-byte loads.
//
// Bound: memory. Reads num_rows · vocab_size logits once (a 128k-vocabulary f32 row is 513 KB).
#include <algorithm>
#include <climits>
#include <cmath>

#include "ops/common/cuda_vector.cuh"
#include "ops/sampling/sampling.h"

namespace roofline {

namespace {

// 512 threads: a single decode row is the common case, so one block must pull a whole row at a
// good rate on its own; 512 threads x 4 packs keep 32 KB in flight.
constexpr int kThreads = 512;
// Packs per thread per step: four 16-byte loads in flight before the first comparison.
constexpr int kUnroll = 4;

// True when (v, i) beats (best, best_i).
__device__ __forceinline__ bool argmax_better(float v, int32_t i, float best, int32_t best_i) {
  return v > best || (v == best && i < best_i);
}

template <typename T, int N>
__global__ void __launch_bounds__(kThreads)
    argmax_kernel(const typename T::Storage* logits, int32_t* out, int64_t num_rows,
                  int64_t vocab_size) {
  using P = cuda::Pack<typename T::Storage, N>;
  __shared__ float s_value[32];
  __shared__ int32_t s_index[32];
  const int tid = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  const int packs = static_cast<int>(vocab_size / N);
  const int tail = static_cast<int>(vocab_size - static_cast<int64_t>(packs) * N);

  for (int64_t row = blockIdx.x; row < num_rows; row += gridDim.x) {
    const typename T::Storage* x = logits + row * vocab_size;
    float best = -INFINITY;
    int32_t best_i = INT32_MAX;
    for (int p0 = tid; p0 < packs; p0 += kUnroll * threads) {
      P raw[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int p = p0 + u * threads;
        if (p < packs) raw[u] = reinterpret_cast<const P*>(x)[p];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int p = p0 + u * threads;
        if (p < packs) {
#pragma unroll
          for (int i = 0; i < N; ++i) {
            const float v = T::to_f32(raw[u].v[i]);
            const int32_t index = p * N + i;
            if (argmax_better(v, index, best, best_i)) {
              best = v;
              best_i = index;
            }
          }
        }
      }
    }
    if (tid < tail) {
      const int32_t index = packs * N + tid;
      const float v = T::to_f32(x[index]);
      if (argmax_better(v, index, best, best_i)) {
        best = v;
        best_i = index;
      }
    }

#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float v = __shfl_xor_sync(0xffffffffu, best, offset);
      const int32_t index = __shfl_xor_sync(0xffffffffu, best_i, offset);
      if (argmax_better(v, index, best, best_i)) {
        best = v;
        best_i = index;
      }
    }
    const int lane = tid & 31;
    const int warp = tid >> 5;
    if (lane == 0) {
      s_value[warp] = best;
      s_index[warp] = best_i;
    }
    __syncthreads();
    if (warp == 0) {
      const int num_warps = threads >> 5;
      best = lane < num_warps ? s_value[lane] : -INFINITY;
      best_i = lane < num_warps ? s_index[lane] : INT32_MAX;
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1) {
        const float v = __shfl_xor_sync(0xffffffffu, best, offset);
        const int32_t index = __shfl_xor_sync(0xffffffffu, best_i, offset);
        if (argmax_better(v, index, best, best_i)) {
          best = v;
          best_i = index;
        }
      }
      if (lane == 0) out[row] = best_i == INT32_MAX ? -1 : best_i;
    }
    __syncthreads();  // s_value / s_index are rewritten for the next row
  }
}

template <typename T, int N>
void launch_argmax(const ArgmaxParams& p, cudaStream_t stream) {
  const int grid = static_cast<int>(std::min<int64_t>(p.num_rows, INT_MAX));
  argmax_kernel<T, N><<<grid, kThreads, 0, stream>>>(
      static_cast<const typename T::Storage*>(p.logits), p.out, p.num_rows, p.vocab_size);
}

}  // namespace

void argmax_cuda(const ArgmaxParams& p, CudaStream stream) {
  ROOFLINE_CHECK(p.num_rows >= 0 && p.vocab_size >= 0 && p.vocab_size < INT32_MAX);
  if (p.num_rows == 0) return;
  ROOFLINE_CHECK(p.out != nullptr && (p.logits != nullptr || p.vocab_size == 0));
  cuda::dispatch_activation(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = cuda::kVec16<T>;
    if (p.vocab_size % kVec == 0 && cuda::is_aligned(p.logits, 16)) {
      launch_argmax<T, kVec>(p, stream);
    } else {
      launch_argmax<T, 1>(p, stream);
    }
  });
  ROOFLINE_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace roofline
