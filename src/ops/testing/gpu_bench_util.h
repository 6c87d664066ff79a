// GPU benchmark harness (CUDA builds only), per shared/docs/STYLE.md: CUDA events around the
// region, warm-up first, inputs rotated so L2 (60 MB on the H200) does not serve them, median of
// many runs, and every figure printed beside its ceiling.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include "core/cuda_check.h"

namespace roofline::bench {

// Measured on the H200 (shared/docs/HARDWARE.md, 2026-11-30): device-to-device copy and bf16 GEMM.
constexpr double kCopyCeilingBytesPerSecond = 4.28e12;
constexpr double kBf16GemmCeilingFlops = 783e12;

// Median milliseconds of `run(i)` over `iters` timed runs after `warmup` untimed ones; `i` counts
// up so the caller can rotate through input copies.
inline double median_ms(const std::function<void(int)>& run, int warmup = 5, int iters = 50,
                        cudaStream_t stream = nullptr) {
  for (int i = 0; i < warmup; ++i) run(i);
  cudaEvent_t start, stop;
  ROOFLINE_CUDA_CHECK(cudaEventCreate(&start));
  ROOFLINE_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> ms(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    ROOFLINE_CUDA_CHECK(cudaEventRecord(start, stream));
    run(warmup + i);
    ROOFLINE_CUDA_CHECK(cudaEventRecord(stop, stream));
    ROOFLINE_CUDA_CHECK(cudaEventSynchronize(stop));
    ROOFLINE_CUDA_CHECK(cudaEventElapsedTime(&ms[static_cast<size_t>(i)], start, stop));
  }
  ROOFLINE_CUDA_CHECK(cudaEventDestroy(start));
  ROOFLINE_CUDA_CHECK(cudaEventDestroy(stop));
  std::nth_element(ms.begin(), ms.begin() + iters / 2, ms.end());
  return ms[static_cast<size_t>(iters / 2)];
}

// SMs of the current device.
inline int sm_count() {
  int device = 0, sms = 0;
  ROOFLINE_CUDA_CHECK(cudaGetDevice(&device));
  ROOFLINE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

// How many copies of a working set of `bytes` to rotate through so each run misses L2.
inline int rotation_count(size_t bytes) {
  const size_t l2_times_four = 240ull << 20;
  return static_cast<int>(
      std::max<size_t>(1, std::min<size_t>(16, l2_times_four / std::max<size_t>(bytes, 1) + 1)));
}

// "name: 0.123 ms, 3.71 TB/s = 87% of 4.28 TB/s copy ceiling"
inline void print_bandwidth(const char* name, double ms, double bytes) {
  const double bps = bytes / (ms * 1e-3);
  std::printf("%-48s %9.4f ms  %7.3f TB/s = %5.1f%% of %.2f TB/s copy ceiling\n", name, ms,
              bps / 1e12, 100.0 * bps / kCopyCeilingBytesPerSecond,
              kCopyCeilingBytesPerSecond / 1e12);
}

inline void print_flops(const char* name, double ms, double flops) {
  const double fps = flops / (ms * 1e-3);
  std::printf("%-48s %9.4f ms  %7.1f TFLOP/s = %5.1f%% of %.0f TFLOP/s bf16 GEMM ceiling\n", name,
              ms, fps / 1e12, 100.0 * fps / kBf16GemmCeilingFlops, kBf16GemmCeilingFlops / 1e12);
}

}  // namespace roofline::bench
