// rms_norm_cuda and rms_norm_residual_cuda: y = (x * rsqrt(mean(x^2) + eps)) * weight per row,
// the fused form first forming the new residual stream s = residual_in + x.
//
// Algorithm: a group of threads (whole warps) per row, rows_per_block groups per block, grid-stride
// over row groups (a persistent grid in some variants; rms_norm_launch.h lists the variants and
// the predicted ranking). Each thread loads its packs of the row
// (16-byte accesses: 8 bf16 or 4 f32) into registers, every load issued before any store since the
// outputs may alias the inputs; the sum of squares is reduced with warp shuffles and one shared
// round per group; the thread then scales the values it still holds and stores them. Each element
// is read once and written once. Rows too long for the registers of one block (rms_norm_launch.h)
// take a two-pass variant that re-reads the row. An odd hidden (not a multiple of the pack width)
// or a misaligned pointer takes the same kernels with packs of one element.
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

#include "ops/common/cuda_launch.cuh"
#include "ops/common/cuda_vector.cuh"
#include "ops/rms_norm/rms_norm.h"
#include "ops/rms_norm/rms_norm_cuda_variant.h"
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

// Sum of v over the group of `group_threads` threads (whole warps, aligned) that holds this thread,
// returned to every thread of the group. Every thread of the block calls it (it has barriers);
// smem holds 32 floats and may be reused as soon as this returns.
__device__ __forceinline__ float group_sum(float v, float* smem, int group_threads) {
  v = cuda::warp_sum(v);
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  const int warps_per_group = group_threads >> 5;
  const int first = warp / warps_per_group * warps_per_group;
  float total = 0.0f;
  for (int w = 0; w < warps_per_group; ++w) total += smem[first + w];
  __syncthreads();
  return total;
}

// kRows rows per block, one per group of blockDim.x / kRows threads. T: activation type; N:
// elements per pack (divides hidden); kItems: packs per thread held in registers
// (group threads * kItems * N >= hidden), 0 for the two-pass variant; kResidual: the fused form.
template <typename T, int N, int kItems, int kRows, bool kResidual>
__global__ void __launch_bounds__(kRmsNormMaxThreads)
    rms_norm_kernel(const __grid_constant__ RmsNormArgs a) {
  using S = typename T::Storage;
  static_assert(kRows == 1 || kRows == 2 || kRows == 4, "1, 2 or 4 rows per block");
  __shared__ float smem[32];
  const S* x = static_cast<const S*>(a.x);
  const S* residual_in = static_cast<const S*>(a.residual_in);
  S* residual_out = static_cast<S*>(a.residual_out);
  S* out = static_cast<S*>(a.out);
  const int row_packs = static_cast<int>(a.hidden / N);
  const int threads = static_cast<int>(blockDim.x) / kRows;  // per row
  const int group = static_cast<int>(threadIdx.x) / threads;
  const int tid = static_cast<int>(threadIdx.x) % threads;
  // At decode (a few rows, one block each) the weight's trip from memory (the step streams
  // gigabytes of weights between two uses of this one, so it is not in L2) would follow the x
  // loads and the reduction: a second memory latency in series. Its lines go into L1 before the
  // wait for the kernel before instead (no kernel writes weights). Not for large batches: there
  // every block would repeat the prefetches of a weight that stays cached (measured on the H200:
  // 8192 rows lost 15 points of the copy ceiling).
  if (kItems > 0 && a.num_rows <= kRmsNormPrefetchRows) {
    const int64_t line_elems = 128 / (a.weight_dtype == DType::kF32 ? 4 : 2);
    for (int p = tid; p < row_packs; p += threads) {
      const int64_t i = static_cast<int64_t>(p) * N;
      if (i % line_elems < N) cuda::prefetch_weight_l1(a.weight, a.weight_dtype, i);
    }
  }
  cuda::touch_params(a);
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();

  // The loop bound is uniform over the block, so every thread reaches every barrier; a group past
  // the last row computes on nothing (packs = 0) and stores nothing.
  for (int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows; row0 < a.num_rows;
       row0 += static_cast<int64_t>(gridDim.x) * kRows) {
    const int64_t row = row0 + group;
    const int packs = row < a.num_rows ? row_packs : 0;
    const int64_t base = row * a.hidden;
    float sum_sq = 0.0f;
    if constexpr (kItems > 0) {
      // Held as storage (bf16 bits), not f32: exact (x is in T, and the fused form's s is rounded
      // to T anyway) and half the registers for bf16, so 8 packs per thread stay cheap.
      using P = cuda::Pack<S, N>;
      P v[kItems];
      P r[kResidual ? kItems : 1];
      // Every load of the row before any store: residual_out and out may alias the inputs, so the
      // compiler could not hoist a later load above an earlier store by itself.
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int p = tid + k * threads;
        if (p < packs) {
          v[k] = *reinterpret_cast<const P*>(x + base + static_cast<int64_t>(p) * N);
          if constexpr (kResidual)
            r[k] = *reinterpret_cast<const P*>(residual_in + base + static_cast<int64_t>(p) * N);
        } else {
#pragma unroll
          for (int i = 0; i < N; ++i) v[k].v[i] = T::from_f32(0.0f);
        }
      }
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int p = tid + k * threads;
        if constexpr (kResidual) {
          if (p < packs) {
            // The rounding point: the stored residual, and the value normalised below.
#pragma unroll
            for (int i = 0; i < N; ++i)
              v[k].v[i] = T::from_f32(T::to_f32(r[k].v[i]) + T::to_f32(v[k].v[i]));
            *reinterpret_cast<P*>(residual_out + base + static_cast<int64_t>(p) * N) = v[k];
          }
        }
#pragma unroll
        for (int i = 0; i < N; ++i) {
          const float f = T::to_f32(v[k].v[i]);
          sum_sq += f * f;
        }
      }
      const float total = group_sum(sum_sq, smem, threads);
      const float inv_rms = 1.0f / sqrtf(total / static_cast<float>(a.hidden) + a.eps);
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int p = tid + k * threads;
        if (p < packs) {
          float w[N];
          cuda::load_weight_f32<N>(a.weight, a.weight_dtype, static_cast<int64_t>(p) * N, w);
          float o[N];
#pragma unroll
          for (int i = 0; i < N; ++i) o[i] = (T::to_f32(v[k].v[i]) * inv_rms) * w[i];
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
      const float total = group_sum(sum_sq, smem, threads);
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

template <typename T, int N, int kItems, int kRows, bool kResidual>
void launch_rms_norm_kernel(const RmsNormArgs& a, int block, bool persistent, cudaStream_t stream) {
  const auto kernel = rms_norm_kernel<T, N, kItems, kRows, kResidual>;
  int64_t grid = cuda::ceil_div(a.num_rows, kRows);
  if (persistent) {
    int blocks_per_sm = 0;
    ROOFLINE_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel, block, 0));
    grid = std::min<int64_t>(grid, int64_t{cuda::device_sm_count()} * std::max(blocks_per_sm, 1));
  }
  cuda::launch_pdl(kernel, dim3(static_cast<unsigned>(std::min<int64_t>(grid, INT_MAX))),
                   dim3(block), 0, stream, a);
}

template <typename T, int N, int kRows, bool kResidual>
void launch_rms_norm_items(const RmsNormArgs& a, RmsNormLaunchShape shape, bool persistent,
                           cudaStream_t stream) {
  const int block = shape.threads * kRows;
  switch (shape.items) {
    case 1:
      launch_rms_norm_kernel<T, N, 1, kRows, kResidual>(a, block, persistent, stream);
      break;
    case 2:
      launch_rms_norm_kernel<T, N, 2, kRows, kResidual>(a, block, persistent, stream);
      break;
    case 4:
      if constexpr (N > 1) {
        launch_rms_norm_kernel<T, N, 4, kRows, kResidual>(a, block, persistent, stream);
      } else {
        ROOFLINE_CHECK_MSG(false, "the one-element path holds at most 2 packs per thread");
      }
      break;
    case 8:
      if constexpr (N == 8) {
        launch_rms_norm_kernel<T, N, 8, kRows, kResidual>(a, block, persistent, stream);
      } else {
        ROOFLINE_CHECK_MSG(false, "8 packs per thread only for 16-byte packs of 8 elements");
      }
      break;
    default:
      launch_rms_norm_kernel<T, N, 0, kRows, kResidual>(a, block, persistent, stream);
      break;
  }
}

template <typename T, int N, bool kResidual>
void launch_rms_norm_rows(const RmsNormArgs& a, const RmsNormVariant& v, cudaStream_t stream) {
  const RmsNormLaunchShape shape = rms_norm_variant_shape(v, a.hidden, N);
  ROOFLINE_CHECK(shape.threads * v.rows_per_block <= kRmsNormMaxThreads);
  // The one-element path (odd shapes, misaligned pointers) is a fallback: one row per block only,
  // which also keeps its instantiations few and free of spills.
  if constexpr (N == 1) {
    launch_rms_norm_items<T, N, 1, kResidual>(a, shape, v.persistent, stream);
  } else {
    switch (v.rows_per_block) {
      case 1:
        launch_rms_norm_items<T, N, 1, kResidual>(a, shape, v.persistent, stream);
        break;
      case 2:
        launch_rms_norm_items<T, N, 2, kResidual>(a, shape, v.persistent, stream);
        break;
      case 4:
        launch_rms_norm_items<T, N, 4, kResidual>(a, shape, v.persistent, stream);
        break;
      default:
        ROOFLINE_CHECK_MSG(false, "rms_norm variants hold 1, 2 or 4 rows per block");
    }
  }
}

// The one dispatch point: activation dtype, pack width (16 bytes when hidden and every pointer
// allow it, else one element), rows per block, packs per thread.
template <bool kResidual>
void launch_rms_norm(const RmsNormArgs& a, DType dtype, int variant, cudaStream_t stream) {
  ROOFLINE_CHECK(a.num_rows >= 0 && a.hidden > 0 && a.hidden <= INT_MAX);
  ROOFLINE_CHECK_MSG(is_float_dtype(a.weight_dtype), "the norm weight is f32, f16 or bf16");
  ROOFLINE_CHECK(variant >= 0 && variant < kRmsNormNumVariants);
  if (a.num_rows == 0) return;
  ROOFLINE_CHECK(a.x != nullptr && a.weight != nullptr && a.out != nullptr);
  if (kResidual) ROOFLINE_CHECK(a.residual_in != nullptr && a.residual_out != nullptr);
  const RmsNormVariant& v = kRmsNormVariants[variant];
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
      launch_rms_norm_rows<T, kVec, kResidual>(a, v, stream);
    } else {
      launch_rms_norm_rows<T, 1, kResidual>(a, v, stream);
    }
  });
  ROOFLINE_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace

void rms_norm_cuda_variant(const RmsNormParams& p, int variant, CudaStream stream) {
  const RmsNormArgs a{p.x,   nullptr,    nullptr,  p.weight, p.weight_dtype,
                      p.out, p.num_rows, p.hidden, p.eps};
  launch_rms_norm<false>(a, p.dtype, variant, stream);
}

void rms_norm_residual_cuda_variant(const RmsNormResidualParams& p, int variant,
                                    CudaStream stream) {
  const RmsNormArgs a{p.x,   p.residual_in, p.residual_out, p.weight, p.weight_dtype,
                      p.out, p.num_rows,    p.hidden,       p.eps};
  launch_rms_norm<true>(a, p.dtype, variant, stream);
}

void rms_norm_cuda(const RmsNormParams& p, CudaStream stream) {
  rms_norm_cuda_variant(p, kRmsNormDefaultVariant, stream);
}

void rms_norm_residual_cuda(const RmsNormResidualParams& p, CudaStream stream) {
  rms_norm_residual_cuda_variant(p, kRmsNormResidualDefaultVariant, stream);
}

}  // namespace roofline
