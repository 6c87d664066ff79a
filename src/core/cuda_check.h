// CUDA error checks: ROOFLINE_CUDA_CHECK for runtime calls and ROOFLINE_CUDA_LAUNCH_CHECK after
// every kernel launch. Both abort with expression, file and line: a failing CUDA call inside the
// engine is a broken invariant (out-of-memory on the step path cannot happen by design: all
// memory is planned and allocated at start-up, where allocation failures become Statuses).
// ROOFLINE_DEBUG_SYNC=1 makes every launch check synchronise, except while a stream is capturing
// a CUDA graph (synchronising would invalidate the capture).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace roofline {

[[noreturn]] void cuda_check_failed(cudaError_t err, const char* expr, const char* file, int line);
bool cuda_debug_sync_enabled();
void cuda_launch_check(cudaStream_t stream, const char* file, int line);

}  // namespace roofline

#define ROOFLINE_CUDA_CHECK(expr)                                              \
  do {                                                                         \
    cudaError_t roofline_err_ = (expr);                                        \
    if (roofline_err_ != cudaSuccess)                                          \
      ::roofline::cuda_check_failed(roofline_err_, #expr, __FILE__, __LINE__); \
  } while (0)

#define ROOFLINE_CUDA_LAUNCH_CHECK(stream) \
  ::roofline::cuda_launch_check((stream), __FILE__, __LINE__)
