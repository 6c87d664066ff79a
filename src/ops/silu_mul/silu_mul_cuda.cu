// silu_mul_cuda: out[t][i] = silu(gate[t][i]) * up[t][i], silu(g) = g / (1 + exp(-g)), reading
// the merged [num_tokens, 2 * intermediate] gate|up GEMM output.
//
// Algorithm (16-byte accesses: 8 bf16 or 4 f32 per pack): two layouts, chosen at run time with
// the math (silu_mul_cuda_variant.h lists the variants with their measurements). rows:
// threadIdx.x / blockIdx.x walk the packs of a row, blockIdx.y the tokens, 2 tokens per thread.
// flat: the packs of all tokens as one range, 1D grid-stride, 2 packs per thread spaced blockDim
// apart. Both issue every load of a thread (gate and up of each pack) before the first use. An
// intermediate size that is not a multiple of the pack width, or a misaligned pointer, takes the
// same kernel with packs of one element.
//
// Numerics: f32 math in the CPU twin's order ((g / (1 + exp(-g))) * u), the result rounded once to
// the activation dtype. Accurate variants: IEEE division and the accurate expf; for very negative
// g, expf(-g) overflows to inf and the quotient is -0, the right limit. Fast variants (bf16 only):
// __expf and __fdividef, within a few f32 ulp before the bf16 rounding.
//
// Bound: memory. Reads 2·T·I elements, writes T·I: 8192 x 14336 bf16 = 705 MB, 165 us at
// 4.28 TB/s.
#include <algorithm>
#include <type_traits>

#include "ops/common/cuda_launch.cuh"
#include "ops/common/cuda_vector.cuh"
#include "ops/silu_mul/silu_mul.h"
#include "ops/silu_mul/silu_mul_cuda_variant.h"

namespace roofline {

namespace {

// silu(g) * u in the CPU twin's order; kFast: hardware exp2 and reciprocal (bf16 outputs only,
// see SiluMulVariant::fast_math). For g < -87, __expf(-g) is inf and __fdividef gives 0.
template <bool kFast>
__device__ __forceinline__ float silu_mul_one(float g, float u) {
  if constexpr (kFast) {
    return __fdividef(g, 1.0f + __expf(-g)) * u;
  } else {
    return g / (1.0f + expf(-g)) * u;
  }
}

// rows layout: kRowsPerThread tokens per thread, kThreads per block (launch bounds).
template <typename T, int N, int kRowsPerThread, int kThreads, bool kFast>
__global__ void __launch_bounds__(kThreads)
    silu_mul_kernel(const typename T::Storage* gate_up, typename T::Storage* out,
                    int64_t num_tokens, int64_t intermediate) {
  cuda::touch_values(gate_up, out, num_tokens, intermediate);
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  const int64_t packs = intermediate / N;
  const int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= packs) return;
  const int64_t col = p * N;
  for (int64_t t0 = static_cast<int64_t>(blockIdx.y) * kRowsPerThread; t0 < num_tokens;
       t0 += static_cast<int64_t>(gridDim.y) * kRowsPerThread) {
    float gate[kRowsPerThread][N], up[kRowsPerThread][N];
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      if (t0 + r < num_tokens) {
        const typename T::Storage* row = gate_up + (t0 + r) * 2 * intermediate;
        cuda::load_f32<T, N>(row + col, gate[r]);
        cuda::load_f32<T, N>(row + intermediate + col, up[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      if (t0 + r < num_tokens) {
        float o[N];
#pragma unroll
        for (int i = 0; i < N; ++i) o[i] = silu_mul_one<kFast>(gate[r][i], up[r][i]);
        cuda::store_f32<T, N>(out + (t0 + r) * intermediate + col, o);
      }
    }
  }
}

// flat layout: kPacks packs per thread spaced blockDim apart, kThreads per block (launch bounds).
// total_packs = num_tokens * row_packs < 2^31, so pack indices and the division stay in 32 bits.
template <typename T, int N, int kPacks, int kThreads, bool kFast>
__global__ void __launch_bounds__(kThreads)
    silu_mul_flat_kernel(const typename T::Storage* gate_up, typename T::Storage* out,
                         int total_packs, int row_packs) {
  cuda::touch_values(gate_up, out, total_packs, row_packs);
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads * kPacks;
  for (int64_t q0 = static_cast<int64_t>(blockIdx.x) * kThreads * kPacks + threadIdx.x;
       q0 < total_packs; q0 += stride) {
    float gate[kPacks][N], up[kPacks][N];
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int64_t q = q0 + k * kThreads;
      if (q < total_packs) {
        const unsigned t = static_cast<unsigned>(q) / static_cast<unsigned>(row_packs);
        const unsigned c = static_cast<unsigned>(q) - t * static_cast<unsigned>(row_packs);
        const typename T::Storage* src =
            gate_up + static_cast<int64_t>(t) * 2 * row_packs * N + static_cast<int64_t>(c) * N;
        cuda::load_f32<T, N>(src, gate[k]);
        cuda::load_f32<T, N>(src + static_cast<int64_t>(row_packs) * N, up[k]);
      }
    }
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int64_t q = q0 + k * kThreads;
      if (q < total_packs) {
        float o[N];
#pragma unroll
        for (int i = 0; i < N; ++i) o[i] = silu_mul_one<kFast>(gate[k][i], up[k][i]);
        cuda::store_f32<T, N>(out + q * N, o);
      }
    }
  }
}

template <typename T, int N, int kRowsPerThread, int kThreads, bool kFast>
void launch_rows(const SiluMulParams& p, cudaStream_t stream) {
  const cuda::RowGrid g =
      cuda::row_grid(p.intermediate / N, p.num_tokens, kThreads, kRowsPerThread);
  cuda::launch_pdl(silu_mul_kernel<T, N, kRowsPerThread, kThreads, kFast>, g.grid, g.block, 0,
                   stream, static_cast<const typename T::Storage*>(p.gate_up),
                   static_cast<typename T::Storage*>(p.out), p.num_tokens, p.intermediate);
}

template <typename T, int N, int kPacks, int kThreads, bool kFast>
void launch_flat(const SiluMulParams& p, const SiluMulVariant& v, int64_t total_packs,
                 cudaStream_t stream) {
  const int64_t blocks = silu_mul_flat_blocks(v, total_packs);
  cuda::launch_pdl(silu_mul_flat_kernel<T, N, kPacks, kThreads, kFast>,
                   dim3(static_cast<unsigned>(std::min<int64_t>(blocks, 0x7fffffff))),
                   dim3(kThreads), 0, stream, static_cast<const typename T::Storage*>(p.gate_up),
                   static_cast<typename T::Storage*>(p.out), static_cast<int>(total_packs),
                   static_cast<int>(p.intermediate / N));
}

// The variant's kernel for pack width N (every variant has 2 packs per thread, 256 threads).
template <typename T, int N, bool kFast>
void launch_silu_mul(const SiluMulParams& p, const SiluMulVariant& v, cudaStream_t stream) {
  ROOFLINE_CHECK_MSG(v.packs_per_thread == 2 && v.threads == 256,
                     "no silu_mul kernel for this variant");
  const int64_t total_packs = p.num_tokens * (p.intermediate / N);
  if (silu_mul_runs_flat(v, total_packs)) {
    launch_flat<T, N, 2, 256, kFast>(p, v, total_packs, stream);
  } else {
    launch_rows<T, N, 2, 256, kFast>(p, stream);
  }
}

template <typename T, int N>
void launch_silu_mul(const SiluMulParams& p, const SiluMulVariant& v, cudaStream_t stream) {
  // f32 activations always take the accurate path (see SiluMulVariant::fast_math).
  if (v.fast_math && std::is_same_v<T, cuda::Bf16>) {
    launch_silu_mul<T, N, true>(p, v, stream);
  } else {
    launch_silu_mul<T, N, false>(p, v, stream);
  }
}

}  // namespace

void silu_mul_cuda_variant(const SiluMulParams& p, int variant, CudaStream stream) {
  ROOFLINE_CHECK(p.num_tokens >= 0 && p.intermediate > 0);
  ROOFLINE_CHECK(variant >= 0 && variant < kSiluMulNumVariants);
  if (p.num_tokens == 0) return;
  ROOFLINE_CHECK(p.gate_up != nullptr && p.out != nullptr);
  const SiluMulVariant& v = kSiluMulVariants[variant];
  // The one dispatch point: activation dtype, pack width, variant.
  cuda::dispatch_activation(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = cuda::kVec16<T>;
    if (p.intermediate % kVec == 0 && cuda::is_aligned(p.gate_up, 16) &&
        cuda::is_aligned(p.out, 16)) {
      launch_silu_mul<T, kVec>(p, v, stream);
    } else {
      launch_silu_mul<T, 1>(p, v, stream);
    }
  });
  ROOFLINE_CUDA_LAUNCH_CHECK(stream);
}

void silu_mul_cuda(const SiluMulParams& p, CudaStream stream) {
  silu_mul_cuda_variant(p, kSiluMulDefaultVariant, stream);
}

}  // namespace roofline
