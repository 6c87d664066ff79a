// Device helpers shared by the memory-bound CUDA kernels of src/ops (elementwise ops, norms, RoPE,
// argmax): element types as raw storage with f32 conversion, packs of N elements moved as one
// 16-byte (or narrower) access, warp and block sums, the activation-dtype dispatch, and the
// device queries the launchers size their grids with. Include only from .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/check.h"
#include "core/cuda_check.h"
#include "core/dtype.h"

namespace roofline::cuda {

// Element types as their storage plus conversions to and from f32. bf16 and f16 are raw bits so
// packs of them are trivially copyable; conversions round to nearest even, as the CPU twins do.
struct F32 {
  using Storage = float;
  __device__ __forceinline__ static float to_f32(float v) { return v; }
  __device__ __forceinline__ static float from_f32(float v) { return v; }
};
struct Bf16 {
  using Storage = uint16_t;
  __device__ __forceinline__ static float to_f32(uint16_t b) {
    return __uint_as_float(static_cast<uint32_t>(b) << 16);
  }
  __device__ __forceinline__ static uint16_t from_f32(float v) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
};
struct F16 {
  using Storage = uint16_t;
  __device__ __forceinline__ static float to_f32(uint16_t b) {
    return __half2float(__ushort_as_half(b));
  }
  __device__ __forceinline__ static uint16_t from_f32(float v) {
    return __half_as_ushort(__float2half_rn(v));
  }
};

// N elements of storage S moved as one access: 16-byte aligned packs of 16 bytes or more compile
// to 128-bit loads and stores (two for 32 bytes); narrower packs are aligned to their size.
template <typename S, int N>
struct alignas(N * sizeof(S) < 16 ? N * sizeof(S) : 16) Pack {
  static_assert(N == 1 || N == 2 || N == 4 || N == 8, "packs of 1, 2, 4 or 8 elements");
  S v[N];
};

// The widest pack of 16 bytes: 8 bf16 / f16 or 4 f32.
template <typename T>
inline constexpr int kVec16 = static_cast<int>(16 / sizeof(typename T::Storage));

template <typename T, int N>
__device__ __forceinline__ void load_f32(const typename T::Storage* p, float (&out)[N]) {
  using P = Pack<typename T::Storage, N>;
  const P pk = *reinterpret_cast<const P*>(p);
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = T::to_f32(pk.v[i]);
}

template <typename T, int N>
__device__ __forceinline__ void store_f32(typename T::Storage* p, const float (&in)[N]) {
  using P = Pack<typename T::Storage, N>;
  P pk;
#pragma unroll
  for (int i = 0; i < N; ++i) pk.v[i] = T::from_f32(in[i]);
  *reinterpret_cast<P*>(p) = pk;
}

// Asks for the 128-byte line holding element i of a weight buffer (dtype known at run time) to
// be brought into L1, with no register to receive it.
__device__ __forceinline__ void prefetch_weight_l1(const void* w, DType dtype, int64_t i) {
  const int64_t bytes = dtype == DType::kBF16 || dtype == DType::kF16 ? 2 : 4;
  asm volatile("prefetch.global.L1 [%0];\n" ::"l"(static_cast<const char*>(w) + i * bytes));
}

// N weights starting at element i of a buffer whose dtype is known only at run time (the weight
// of a norm is small and cached, so a uniform branch costs nothing next to the activations).
template <int N>
__device__ __forceinline__ void load_weight_f32(const void* w, DType dtype, int64_t i,
                                                float (&out)[N]) {
  switch (dtype) {
    case DType::kBF16:
      load_f32<Bf16, N>(static_cast<const uint16_t*>(w) + i, out);
      break;
    case DType::kF16:
      load_f32<F16, N>(static_cast<const uint16_t*>(w) + i, out);
      break;
    default:
      load_f32<F32, N>(static_cast<const float*>(w) + i, out);
      break;
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum of v over the block, returned to every thread. blockDim.x must be a multiple of 32; smem
// holds 32 floats and may be reused as soon as this returns (it ends with a barrier).
__device__ __forceinline__ float block_sum(float v, float* smem) {
  v = warp_sum(v);
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  const int num_warps = static_cast<int>(blockDim.x) >> 5;
  const float total = warp_sum(lane < num_warps ? smem[lane] : 0.0f);
  __syncthreads();
  return total;
}

inline bool is_aligned(const void* p, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline int64_t round_up_to_warp(int64_t n) { return ceil_div(n, 32) * 32; }

// Multiprocessor count, L2 bytes and resident-thread limit of the current device (read, never
// assumed).
inline int device_sm_count() {
  int device = 0, value = 0;
  ROOFLINE_CUDA_CHECK(cudaGetDevice(&device));
  ROOFLINE_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, device));
  return value;
}
inline int device_l2_bytes() {
  int device = 0, value = 0;
  ROOFLINE_CUDA_CHECK(cudaGetDevice(&device));
  ROOFLINE_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrL2CacheSize, device));
  return value;
}
inline int device_max_threads_per_sm() {
  int device = 0, value = 0;
  ROOFLINE_CUDA_CHECK(cudaGetDevice(&device));
  ROOFLINE_CUDA_CHECK(
      cudaDeviceGetAttribute(&value, cudaDevAttrMaxThreadsPerMultiProcessor, device));
  return value;
}

// Launch shape of the row-wise elementwise kernels (silu_mul, embedding, gather_rows): threadIdx.x
// and blockIdx.x walk the packs of a row, blockIdx.y the rows, rows_per_block at a time, with a
// grid-stride loop over rows beyond the 65535 a grid can hold in y. Blocks are a whole number of
// warps, up to max_threads, fewer when the row is short.
struct RowGrid {
  dim3 grid;
  dim3 block;
};
inline RowGrid row_grid(int64_t packs_per_row, int64_t rows, int max_threads, int rows_per_block) {
  const int threads =
      static_cast<int>(std::min<int64_t>(max_threads, round_up_to_warp(packs_per_row)));
  const int64_t grid_x = ceil_div(packs_per_row, threads);
  const int64_t grid_y = std::min<int64_t>(ceil_div(rows, rows_per_block), 65535);
  ROOFLINE_CHECK(grid_x <= 0x7fffffff);
  return {dim3(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y)),
          dim3(static_cast<unsigned>(threads))};
}

// Calls f(Bf16{}) or f(F32{}) for an activation dtype: the one place each launcher turns the
// run-time dtype into a kernel template argument.
template <typename F>
void dispatch_activation(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kBF16:
      f(Bf16{});
      return;
    case DType::kF32:
      f(F32{});
      return;
    default:
      ROOFLINE_CHECK_MSG(false, "CUDA activations are bf16 or f32");
  }
}

}  // namespace roofline::cuda
