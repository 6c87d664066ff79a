// add_cuda: out = a + b elementwise over n elements (the residual add when it is not fused into
// a norm).
//
// Algorithm: a grid-stride loop over 16-byte packs (8 bf16 or 4 f32), two packs per thread per
// iteration so four loads are in flight; the grid is one full wave of resident threads (read from
// the device). The n % pack elements after the last pack are done by the first threads. A
// misaligned pointer takes the same kernel with packs of one element.
//
// Numerics: the sum in f32, rounded once to the dtype (equal to the CPU twin's f32 sum rounded).
//
// Bound: memory. Reads 2·n elements, writes n.
#include <algorithm>

#include "ops/add/add.h"
#include "ops/common/cuda_vector.cuh"

namespace roofline {

namespace {

// 256 threads: whole warps, 8 blocks resident per SM at full occupancy.
constexpr int kThreads = 256;
// Packs per thread per iteration: doubles the loads in flight.
constexpr int kUnroll = 2;

template <typename T, int N>
__global__ void __launch_bounds__(kThreads)
    add_kernel(const typename T::Storage* a, const typename T::Storage* b, typename T::Storage* out,
               int64_t n) {
  const int64_t packs = n / N;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p0 = first; p0 < packs; p0 += kUnroll * stride) {
    float x[kUnroll][N], y[kUnroll][N];
    // Loads of both packs before either store: out may alias a or b.
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t p = p0 + u * stride;
      if (p < packs) {
        cuda::load_f32<T, N>(a + p * N, x[u]);
        cuda::load_f32<T, N>(b + p * N, y[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t p = p0 + u * stride;
      if (p < packs) {
        float o[N];
#pragma unroll
        for (int i = 0; i < N; ++i) o[i] = x[u][i] + y[u][i];
        cuda::store_f32<T, N>(out + p * N, o);
      }
    }
  }
  // The tail of fewer than N elements.
  const int64_t tail = n - packs * N;
  if (first < tail) {
    const int64_t i = packs * N + first;
    out[i] = T::from_f32(T::to_f32(a[i]) + T::to_f32(b[i]));
  }
}

template <typename T, int N>
void launch_add(const AddParams& p, cudaStream_t stream) {
  const int64_t packs = std::max<int64_t>(p.n / N, 1);  // >= 1 thread for a tail-only n
  const int64_t wave = static_cast<int64_t>(cuda::device_sm_count()) *
                       (cuda::device_max_threads_per_sm() / kThreads);
  const int64_t grid = std::min(cuda::ceil_div(packs, kThreads), wave);
  add_kernel<T, N><<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(
      static_cast<const typename T::Storage*>(p.a), static_cast<const typename T::Storage*>(p.b),
      static_cast<typename T::Storage*>(p.out), p.n);
}

}  // namespace

void add_cuda(const AddParams& p, CudaStream stream) {
  ROOFLINE_CHECK(p.n >= 0);
  if (p.n == 0) return;
  ROOFLINE_CHECK(p.a != nullptr && p.b != nullptr && p.out != nullptr);
  cuda::dispatch_activation(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = cuda::kVec16<T>;
    if (cuda::is_aligned(p.a, 16) && cuda::is_aligned(p.b, 16) && cuda::is_aligned(p.out, 16)) {
      launch_add<T, kVec>(p, stream);
    } else {
      launch_add<T, 1>(p, stream);
    }
  });
  ROOFLINE_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace roofline
