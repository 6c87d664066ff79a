// Helpers for the GPU op tests and benchmarks (CUDA builds only): device buffers, bf16 host
// conversions, and the skip-when-no-GPU guard. GPU tests compare each <op>_cuda with its CPU twin
// run on the same (bf16-rounded) inputs.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/cuda_check.h"
#include "core/dtype.h"

namespace roofline::testing {

// True when a CUDA device is present; tests call ROOFLINE_SKIP_WITHOUT_GPU() first.
inline bool gpu_available() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}

#define ROOFLINE_SKIP_WITHOUT_GPU() \
  if (!::roofline::testing::gpu_available()) GTEST_SKIP() << "no CUDA device on this machine"

// A device allocation of `bytes`, freed at scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes) ROOFLINE_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <typename T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

  template <typename T>
  static DeviceBuffer from_host(const std::vector<T>& v) {
    DeviceBuffer b(v.size() * sizeof(T));
    if (!v.empty())
      ROOFLINE_CUDA_CHECK(cudaMemcpy(b.ptr_, v.data(), b.bytes_, cudaMemcpyHostToDevice));
    landed();
    return b;
  }
  template <typename T>
  std::vector<T> to_host() const {
    std::vector<T> v(bytes_ / sizeof(T));
    ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize());
    if (!v.empty()) ROOFLINE_CUDA_CHECK(cudaMemcpy(v.data(), ptr_, bytes_, cudaMemcpyDeviceToHost));
    return v;
  }
  // Fills with 0xFF bytes: NaN in f32, bf16 and f16, so unwritten outputs cannot pass.
  void poison() {
    ROOFLINE_CUDA_CHECK(cudaMemset(ptr_, 0xff, bytes_));
    landed();
  }
  void zero() {
    ROOFLINE_CUDA_CHECK(cudaMemset(ptr_, 0, bytes_));
    landed();
  }

 private:
  // Waits for the fill or upload just issued. cudaMemset and a cudaMemcpy from pageable memory run
  // on the legacy stream and may return before they land; a test that launches next on a
  // non-blocking stream (the graph tests) is not ordered after them. Without this wait the
  // sampling graph test's workspace was zeroed while its first launch ran, under a loaded GPU.
  static void landed() { ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize()); }

  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Rounds f32 values to bf16 bits (what the GPU consumes) ...
inline std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16_bits(v[i]);
  return out;
}
// ... and back, so the CPU twin sees exactly the values the GPU saw.
inline std::vector<float> from_bf16(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_bits_to_f32(v[i]);
  return out;
}
inline std::vector<float> round_to_bf16(const std::vector<float>& v) {
  return from_bf16(to_bf16(v));
}

}  // namespace roofline::testing
