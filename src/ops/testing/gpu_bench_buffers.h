// Device buffers for the GPU benchmarks (CUDA builds only; no GoogleTest, which the benchmark
// executables do not link): an owning allocation, filled with finite pseudo-random bf16 values so
// the kernels run on realistic data, and the GPU-present check.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "core/cuda_check.h"
#include "core/dtype.h"

namespace roofline::bench {

// Waits for every fill and upload issued so far. cudaMemset and a cudaMemcpy from pageable memory
// run on the legacy stream and may return before they land, and the benchmarks launch on
// non-blocking streams, which are not ordered after it: call this between setting buffers up and
// the first launch.
inline void settle() { ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize()); }

inline bool gpu_present() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}

// bf16 values in [-1, 1) from a 64-bit LCG: fast enough to fill gigabytes of weights or cache.
inline std::vector<uint16_t> random_bf16(int64_t n, uint64_t seed) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  uint64_t state = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (auto& x : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const float f = static_cast<float>(state >> 40) * (2.0f / 16777216.0f) - 1.0f;
    x = f32_to_bf16_bits(f);
  }
  return v;
}

// A raw device allocation with a public pointer, for benchmarks that keep many copies alive.
struct DeviceMemory {
  void* ptr = nullptr;
  explicit DeviceMemory(size_t bytes) {
    ROOFLINE_CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(bytes, 1)));
  }
  ~DeviceMemory() { cudaFree(ptr); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  template <typename T>
  static std::unique_ptr<DeviceMemory> from_host(const std::vector<T>& v) {
    auto m = std::make_unique<DeviceMemory>(v.size() * sizeof(T));
    ROOFLINE_CUDA_CHECK(cudaMemcpy(m->ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    settle();
    return m;
  }
};

class GpuArray {
 public:
  GpuArray() = default;
  explicit GpuArray(size_t bytes) : bytes_(bytes) { ROOFLINE_CUDA_CHECK(cudaMalloc(&ptr_, bytes)); }
  ~GpuArray() {
    if (ptr_) cudaFree(ptr_);
  }
  GpuArray(GpuArray&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
  GpuArray& operator=(GpuArray&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  GpuArray(const GpuArray&) = delete;
  GpuArray& operator=(const GpuArray&) = delete;

  template <typename T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

  // bf16 values uniform in [lo, hi]: a 1 Mi-element random tile repeated over the buffer.
  void fill_bf16(float lo, float hi, uint32_t seed) {
    const size_t n = bytes_ / 2;
    const size_t tile = std::min<size_t>(n, size_t{1} << 20);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<uint16_t> host(tile);
    for (auto& v : host) v = f32_to_bf16_bits(dist(rng));
    for (size_t done = 0; done < n; done += tile) {
      const size_t count = std::min(tile, n - done);
      ROOFLINE_CUDA_CHECK(cudaMemcpy(static_cast<uint16_t*>(ptr_) + done, host.data(), count * 2,
                                     cudaMemcpyHostToDevice));
    }
    settle();
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace roofline::bench
