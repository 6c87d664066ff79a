// silu_mul_cuda: out[t][i] = silu(gate[t][i]) * up[t][i], silu(g) = g / (1 + exp(-g)), reading
// the merged [num_tokens, 2 * intermediate] gate|up GEMM output.
//
// Algorithm (16-byte accesses: 8 bf16 or 4 f32 per pack): two layouts, several variants of each,
// chosen at run time (silu_mul_cuda_variant.h lists them with the predicted ranking). rows:
// threadIdx.x / blockIdx.x walk the packs of a row, blockIdx.y the tokens, 2 or 4 tokens per
// thread. flat: the packs of all tokens as one range, 1D grid-stride, 2 / 4 / 8 packs per thread
// spaced blockDim apart. Both issue every load of a thread (gate and up of each pack) before the
// first use. An intermediate size that is not a multiple of the pack width, or a
// misaligned pointer, takes the same kernel with packs of one element.
//
// Numerics: f32 math with IEEE division and the accurate expf (no fast-math), in the CPU twin's
// order ((g / (1 + exp(-g))) * u); the result is rounded once to the activation dtype. For very
// negative g, expf(-g) overflows to inf and the quotient is -0, the right limit.
//
// Bound: memory. Reads 2·T·I elements, writes T·I: 8192 x 14336 bf16 = 705 MB, 165 us at
// 4.28 TB/s.
#include <algorithm>

#include "ops/common/cuda_vector.cuh"
#include "ops/silu_mul/silu_mul.h"
#include "ops/silu_mul/silu_mul_cuda_variant.h"

namespace roofline {

namespace {

// silu(g) * u in the CPU twin's order.
__device__ __forceinline__ float silu_mul_one(float g, float u) {
  return g / (1.0f + expf(-g)) * u;
}

// rows layout: kRowsPerThread tokens per thread, kThreads per block (launch bounds).
template <typename T, int N, int kRowsPerThread, int kThreads>
__global__ void __launch_bounds__(kThreads)
    silu_mul_kernel(const typename T::Storage* gate_up, typename T::Storage* out,
                    int64_t num_tokens, int64_t intermediate) {
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
        for (int i = 0; i < N; ++i) o[i] = silu_mul_one(gate[r][i], up[r][i]);
        cuda::store_f32<T, N>(out + (t0 + r) * intermediate + col, o);
      }
    }
  }
}

// flat layout: kPacks packs per thread spaced blockDim apart, kThreads per block (launch bounds).
// total_packs = num_tokens * row_packs < 2^31, so pack indices and the division stay in 32 bits.
template <typename T, int N, int kPacks, int kThreads>
__global__ void __launch_bounds__(kThreads)
    silu_mul_flat_kernel(const typename T::Storage* gate_up, typename T::Storage* out,
                         int total_packs, int row_packs) {
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
        for (int i = 0; i < N; ++i) o[i] = silu_mul_one(gate[k][i], up[k][i]);
        cuda::store_f32<T, N>(out + q * N, o);
      }
    }
  }
}

template <typename T, int N, int kRowsPerThread, int kThreads>
void launch_rows(const SiluMulParams& p, cudaStream_t stream) {
  const cuda::RowGrid g =
      cuda::row_grid(p.intermediate / N, p.num_tokens, kThreads, kRowsPerThread);
  silu_mul_kernel<T, N, kRowsPerThread, kThreads><<<g.grid, g.block, 0, stream>>>(
      static_cast<const typename T::Storage*>(p.gate_up), static_cast<typename T::Storage*>(p.out),
      p.num_tokens, p.intermediate);
}

template <typename T, int N, int kPacks, int kThreads>
void launch_flat(const SiluMulParams& p, const SiluMulVariant& v, int64_t total_packs,
                 cudaStream_t stream) {
  const int64_t blocks = silu_mul_flat_blocks(v, total_packs);
  silu_mul_flat_kernel<T, N, kPacks, kThreads>
      <<<static_cast<unsigned>(std::min<int64_t>(blocks, 0x7fffffff)), kThreads, 0, stream>>>(
          static_cast<const typename T::Storage*>(p.gate_up),
          static_cast<typename T::Storage*>(p.out), static_cast<int>(total_packs),
          static_cast<int>(p.intermediate / N));
}

// The variant's kernel for pack width N.
template <typename T, int N>
void launch_silu_mul(const SiluMulParams& p, const SiluMulVariant& v, cudaStream_t stream) {
  const int64_t total_packs = p.num_tokens * (p.intermediate / N);
  if (silu_mul_runs_flat(v, total_packs)) {
    const int key = v.packs_per_thread * 1000 + v.threads;
    switch (key) {
      case 2256:
        launch_flat<T, N, 2, 256>(p, v, total_packs, stream);
        return;
      case 4256:
        launch_flat<T, N, 4, 256>(p, v, total_packs, stream);
        return;
      case 8256:
        launch_flat<T, N, 8, 256>(p, v, total_packs, stream);
        return;
      case 4512:
        launch_flat<T, N, 4, 512>(p, v, total_packs, stream);
        return;
      default:
        ROOFLINE_CHECK_MSG(false, "no flat silu_mul kernel for this variant");
    }
  }
  if (v.packs_per_thread >= 4) {
    launch_rows<T, N, 4, 256>(p, stream);
  } else {
    launch_rows<T, N, 2, 256>(p, stream);
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
