// rms_norm_cuda and rms_norm_residual_cuda: y = (x * rsqrt(mean(x^2) + eps)) * weight per row,
// the fused form first forming the new residual stream s = residual_in + x.
//
// Algorithm: one block per row (grid-stride over rows). Each thread loads its packs of the row
// (16-byte accesses: 8 bf16 or 4 f32) into registers, every load issued before any store since the
// outputs may alias the inputs; the sum of squares is reduced with warp shuffles and one shared
// round; the thread then scales the values it still holds and stores them. Each element is read
// once and written once. Rows too long for the registers of one block (rms_norm_launch.h) take a
// two-pass variant that re-reads the row. An odd hidden (not a multiple of the pack width) or
// a misaligned pointer takes the same kernels with packs of one element.
//
// Numerics: f32 math. Fused form, rounding point: s is rounded to the activation dtype first
// (residual_out = bf16(residual_in + x), the value the next layer adds to), and out is the norm of
// that rounded s, so the fused op equals add_cuda followed by rms_norm_cuda. inv_rms is
// 1 / sqrtf(sum / hidden + eps) with IEEE division and square root, as the CPU twin; out is
// rounded once to the activation dtype.
//
// Bound: memory. rms_norm moves 2·T·H activation elements, the fused form 4·T·H (x and
// residual_in read, residual_out and out written), plus the weight once (later rows hit L2):
// 8192 x 4096 bf16 fused = 268 MB, 63 us at 4.28 TB/s.
#include <algorithm>
#include <climits>

#include "ops/common/cuda_vector.cuh"
#include "ops/rms_norm/rms_norm.h"
#include "ops/rms_norm/rms_norm_launch.h"

namespace roofline {

namespace {

struct RmsNormArgs {
  const void* x;            // [num_rows, hidden]
  const void* residual_in;  // [num_rows, hidden]; fused form only
  void* residual_out;       // [num_rows, hidden]; fused form only
  const void* weight;       // [hidden] in weight_dtype
  DType weight_dtype;
  void* out;  // [num_rows, hidden]
  int64_t num_rows;
  int64_t hidden;
  float eps;
};

// One row per block. T: activation type; N: elements per pack (divides hidden); kItems: packs per
// thread held in registers (threads * kItems * N >= hidden), 0 for the two-pass variant;
// kResidual: the fused form.
template <typename T, int N, int kItems, bool kResidual>
__global__ void __launch_bounds__(kRmsNormMaxThreads) rms_norm_kernel(const RmsNormArgs a) {
  using S = typename T::Storage;
  __shared__ float smem[32];
  const S* x = static_cast<const S*>(a.x);
  const S* residual_in = static_cast<const S*>(a.residual_in);
  S* residual_out = static_cast<S*>(a.residual_out);
  S* out = static_cast<S*>(a.out);
  const int packs = static_cast<int>(a.hidden / N);
  const int tid = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);

  for (int64_t row = blockIdx.x; row < a.num_rows; row += gridDim.x) {
    const int64_t base = row * a.hidden;
    float sum_sq = 0.0f;
    if constexpr (kItems > 0) {
      float v[kItems][N];
      float r[kResidual ? kItems : 1][N];
      // Every load of the row before any store: residual_out and out may alias the inputs, so the
      // compiler could not hoist a later load above an earlier store by itself.
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int p = tid + k * threads;
        if (p < packs) {
          cuda::load_f32<T, N>(x + base + static_cast<int64_t>(p) * N, v[k]);
          if constexpr (kResidual)
            cuda::load_f32<T, N>(residual_in + base + static_cast<int64_t>(p) * N, r[k]);
        } else {
#pragma unroll
          for (int i = 0; i < N; ++i) v[k][i] = 0.0f;
        }
      }
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int p = tid + k * threads;
        if constexpr (kResidual) {
          if (p < packs) {
            // The rounding point: the stored residual, and the value normalised below.
#pragma unroll
            for (int i = 0; i < N; ++i) v[k][i] = T::to_f32(T::from_f32(r[k][i] + v[k][i]));
            cuda::store_f32<T, N>(residual_out + base + static_cast<int64_t>(p) * N, v[k]);
          }
        }
#pragma unroll
        for (int i = 0; i < N; ++i) sum_sq += v[k][i] * v[k][i];
      }
      const float total = cuda::block_sum(sum_sq, smem);
      const float inv_rms = 1.0f / sqrtf(total / static_cast<float>(a.hidden) + a.eps);
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int p = tid + k * threads;
        if (p < packs) {
          float w[N];
          cuda::load_weight_f32<N>(a.weight, a.weight_dtype, static_cast<int64_t>(p) * N, w);
          float o[N];
#pragma unroll
          for (int i = 0; i < N; ++i) o[i] = (v[k][i] * inv_rms) * w[i];
          cuda::store_f32<T, N>(out + base + static_cast<int64_t>(p) * N, o);
        }
      }
    } else {
      // Two passes: sum (writing the rounded residual), then re-read and scale. A thread re-reads
      // only the elements it wrote itself, so its own stores are visible to it.
      for (int p = tid; p < packs; p += threads) {
        float v[N];
        cuda::load_f32<T, N>(x + base + static_cast<int64_t>(p) * N, v);
        if constexpr (kResidual) {
          float r[N];
          cuda::load_f32<T, N>(residual_in + base + static_cast<int64_t>(p) * N, r);
#pragma unroll
          for (int i = 0; i < N; ++i) v[i] = T::to_f32(T::from_f32(r[i] + v[i]));
          cuda::store_f32<T, N>(residual_out + base + static_cast<int64_t>(p) * N, v);
        }
#pragma unroll
        for (int i = 0; i < N; ++i) sum_sq += v[i] * v[i];
      }
      const float total = cuda::block_sum(sum_sq, smem);
      const float inv_rms = 1.0f / sqrtf(total / static_cast<float>(a.hidden) + a.eps);
      const S* normalised = kResidual ? residual_out : x;
      for (int p = tid; p < packs; p += threads) {
        float v[N], w[N], o[N];
        cuda::load_f32<T, N>(normalised + base + static_cast<int64_t>(p) * N, v);
        cuda::load_weight_f32<N>(a.weight, a.weight_dtype, static_cast<int64_t>(p) * N, w);
#pragma unroll
        for (int i = 0; i < N; ++i) o[i] = (v[i] * inv_rms) * w[i];
        cuda::store_f32<T, N>(out + base + static_cast<int64_t>(p) * N, o);
      }
    }
  }
}

template <typename T, int N, bool kResidual>
void launch_rms_norm_items(const RmsNormArgs& a, RmsNormLaunchShape shape, cudaStream_t stream) {
  const int grid = static_cast<int>(std::min<int64_t>(a.num_rows, INT_MAX));
  switch (shape.items) {
    case 1:
      rms_norm_kernel<T, N, 1, kResidual><<<grid, shape.threads, 0, stream>>>(a);
      break;
    case 2:
      rms_norm_kernel<T, N, 2, kResidual><<<grid, shape.threads, 0, stream>>>(a);
      break;
    case 4:
      rms_norm_kernel<T, N, 4, kResidual><<<grid, shape.threads, 0, stream>>>(a);
      break;
    default:
      rms_norm_kernel<T, N, 0, kResidual><<<grid, shape.threads, 0, stream>>>(a);
      break;
  }
}

// The one dispatch point: activation dtype, pack width (16 bytes when hidden and every pointer
// allow it, else one element), packs per thread.
template <bool kResidual>
void launch_rms_norm(const RmsNormArgs& a, DType dtype, cudaStream_t stream) {
  ROOFLINE_CHECK(a.num_rows >= 0 && a.hidden > 0 && a.hidden <= INT_MAX);
  ROOFLINE_CHECK_MSG(is_float_dtype(a.weight_dtype), "the norm weight is f32, f16 or bf16");
  if (a.num_rows == 0) return;
  ROOFLINE_CHECK(a.x != nullptr && a.weight != nullptr && a.out != nullptr);
  if (kResidual) ROOFLINE_CHECK(a.residual_in != nullptr && a.residual_out != nullptr);
  cuda::dispatch_activation(dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = cuda::kVec16<T>;
    bool vector_ok = a.hidden % kVec == 0 && cuda::is_aligned(a.x, 16) &&
                     cuda::is_aligned(a.weight, 16) && cuda::is_aligned(a.out, 16);
    if (kResidual) {
      vector_ok =
          vector_ok && cuda::is_aligned(a.residual_in, 16) && cuda::is_aligned(a.residual_out, 16);
    }
    if (vector_ok) {
      launch_rms_norm_items<T, kVec, kResidual>(a, rms_norm_launch_shape(a.hidden, kVec), stream);
    } else {
      launch_rms_norm_items<T, 1, kResidual>(a, rms_norm_launch_shape(a.hidden, 1), stream);
    }
  });
  ROOFLINE_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace

void rms_norm_cuda(const RmsNormParams& p, CudaStream stream) {
  const RmsNormArgs a{p.x,   nullptr,    nullptr,  p.weight, p.weight_dtype,
                      p.out, p.num_rows, p.hidden, p.eps};
  launch_rms_norm<false>(a, p.dtype, stream);
}

void rms_norm_residual_cuda(const RmsNormResidualParams& p, CudaStream stream) {
  const RmsNormArgs a{p.x,   p.residual_in, p.residual_out, p.weight, p.weight_dtype,
                      p.out, p.num_rows,    p.hidden,       p.eps};
  launch_rms_norm<true>(a, p.dtype, stream);
}

}  // namespace roofline
