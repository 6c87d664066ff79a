// gather_rows_cuda: out[r] = x[index[r]] for rows of any element type (a byte copy).
//
// Algorithm: threadIdx.x / blockIdx.x walk a row in units of the widest access that the row length
// and both pointers allow (16, 8, 4, 2 or 1 bytes), blockIdx.y the output rows, two rows per
// thread so both loads are in flight. An index outside [0, num_in_rows) leaves its row unwritten:
// a kernel cannot abort, and reading outside x would be worse.
//
// Bound: memory. Reads and writes num_out_rows · hidden elements.
#include <algorithm>

#include "ops/common/cuda_launch.cuh"
#include "ops/common/cuda_vector.cuh"
#include "ops/gather_rows/gather_rows.h"

namespace roofline {

namespace {

// 256 threads: whole warps, 8 blocks resident per SM at full occupancy.
constexpr int kThreads = 256;
// Rows per thread: two independent loads in flight.
constexpr int kRowsPerThread = 2;

// U: the access unit (uint4, uint2, uint32_t, uint16_t or uint8_t); row_units: units per row.
template <typename U>
__global__ void __launch_bounds__(kThreads)
    gather_rows_kernel(const U* x, const int32_t* index, U* out, int64_t num_in_rows,
                       int64_t num_out_rows, int64_t row_units) {
  cuda::touch_values(x, index, out, num_in_rows, num_out_rows, row_units);
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= row_units) return;
  for (int64_t r0 = static_cast<int64_t>(blockIdx.y) * kRowsPerThread; r0 < num_out_rows;
       r0 += static_cast<int64_t>(gridDim.y) * kRowsPerThread) {
    U v[kRowsPerThread];
    bool valid[kRowsPerThread];
#pragma unroll
    for (int k = 0; k < kRowsPerThread; ++k) {
      const int64_t r = r0 + k;
      const int64_t src = r < num_out_rows ? index[r] : -1;
      valid[k] = src >= 0 && src < num_in_rows;
      if (valid[k]) v[k] = x[src * row_units + c];
    }
#pragma unroll
    for (int k = 0; k < kRowsPerThread; ++k) {
      if (valid[k]) out[(r0 + k) * row_units + c] = v[k];
    }
  }
}

template <typename U>
void launch_gather_rows(const GatherRowsParams& p, int64_t row_bytes, cudaStream_t stream) {
  const int64_t row_units = row_bytes / static_cast<int64_t>(sizeof(U));
  const cuda::RowGrid g = cuda::row_grid(row_units, p.num_out_rows, kThreads, kRowsPerThread);
  cuda::launch_pdl(gather_rows_kernel<U>, g.grid, g.block, 0, stream, static_cast<const U*>(p.x),
                   p.index, static_cast<U*>(p.out), p.num_in_rows, p.num_out_rows, row_units);
}

}  // namespace

void gather_rows_cuda(const GatherRowsParams& p, CudaStream stream) {
  ROOFLINE_CHECK(p.num_in_rows >= 0 && p.num_out_rows >= 0 && p.hidden > 0);
  ROOFLINE_CHECK(dtype_size_bytes(p.dtype) > 0);
  if (p.num_out_rows == 0) return;
  ROOFLINE_CHECK(p.x != nullptr && p.index != nullptr && p.out != nullptr);
  const int64_t row_bytes = p.hidden * dtype_size_bytes(p.dtype);
  // The widest unit dividing the row and the alignment of both pointers.
  auto fits = [&](int64_t unit) {
    return row_bytes % unit == 0 && cuda::is_aligned(p.x, static_cast<uintptr_t>(unit)) &&
           cuda::is_aligned(p.out, static_cast<uintptr_t>(unit));
  };
  if (fits(16)) {
    launch_gather_rows<uint4>(p, row_bytes, stream);
  } else if (fits(8)) {
    launch_gather_rows<uint2>(p, row_bytes, stream);
  } else if (fits(4)) {
    launch_gather_rows<uint32_t>(p, row_bytes, stream);
  } else if (fits(2)) {
    launch_gather_rows<uint16_t>(p, row_bytes, stream);
  } else {
    launch_gather_rows<uint8_t>(p, row_bytes, stream);
  }
  ROOFLINE_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace roofline
