// Device queries and the CUDA check helpers.
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "core/cuda_check.h"
#include "core/device.h"

namespace roofline {

void cuda_check_failed(cudaError_t err, const char* expr, const char* file, int line) {
  std::fprintf(stderr, "roofline: CUDA error %s (%s) in %s at %s:%d\n", cudaGetErrorName(err),
               cudaGetErrorString(err), expr, file, line);
  std::abort();
}

bool cuda_debug_sync_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("ROOFLINE_DEBUG_SYNC");
    return v && v[0] == '1';
  }();
  return on;
}

void cuda_launch_check(cudaStream_t stream, const char* file, int line) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) cuda_check_failed(err, "kernel launch", file, line);
  if (!cuda_debug_sync_enabled()) return;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  ROOFLINE_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) return;
  err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess)
    cuda_check_failed(err, "kernel execution (ROOFLINE_DEBUG_SYNC)", file, line);
}

bool built_with_cuda() { return true; }

StatusOr<std::vector<DeviceInfo>> list_cuda_devices() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
    cudaGetLastError();  // clear the sticky error so later calls are not confused by it
    return std::vector<DeviceInfo>{};
  }
  if (err != cudaSuccess)
    return internal_error(std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(err));
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    err = cudaGetDeviceProperties(&p, i);
    if (err != cudaSuccess)
      return internal_error("cudaGetDeviceProperties(" + std::to_string(i) +
                            ") failed: " + cudaGetErrorString(err));
    DeviceInfo d;
    d.index = i;
    d.name = p.name;
    d.compute_major = p.major;
    d.compute_minor = p.minor;
    d.sm_count = p.multiProcessorCount;
    d.total_memory_bytes = static_cast<int64_t>(p.totalGlobalMem);
    d.l2_bytes = p.l2CacheSize;
    d.shared_memory_per_block_optin_bytes = static_cast<int64_t>(p.sharedMemPerBlockOptin);
    int value = 0;
    if (cudaDeviceGetAttribute(&value, cudaDevAttrMemoryClockRate, i) == cudaSuccess)
      d.memory_clock_khz = value;
    if (cudaDeviceGetAttribute(&value, cudaDevAttrGlobalMemoryBusWidth, i) == cudaSuccess)
      d.memory_bus_width_bits = value;
    out.push_back(d);
  }
  return out;
}

}  // namespace roofline
