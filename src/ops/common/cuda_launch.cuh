// Kernel launches with Hopper's programmatic dependent launch (PDL): a kernel launched with
// launch_pdl may start while the kernel before it in the stream is still running; it must call
// pdl_wait() before it reads anything earlier work wrote (the wait returns once the preceding
// grid has completed and its writes are visible), and it calls pdl_launch_dependents() once it is
// past that wait, so the next PDL kernel's blocks can be scheduled while this one runs. What
// overlaps is launch latency and the work before the wait (e.g. reading host-uploaded metadata,
// prefetching weights). On by default; ROOFLINE_PDL=0 launches without the attribute (the
// kernels' waits are then no-ops). Captured into CUDA graphs as programmatic edges. Include only
// from .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <utility>

#include "core/check.h"
#include "core/cuda_check.h"

namespace roofline::cuda {

// Waits for the grids this one depends on (no-op when launched without PDL).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Lets the next PDL kernel in the stream launch (once every block of this grid has called it or
// exited).
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Reads one word of every 64-byte line of a kernel's parameter block, so that the SM's constant
// caches hold all of it before the PDL wait rather than miss on its first use after the wait. Call
// it just before pdl_wait(). `params` must be a __grid_constant__ kernel parameter (its address is
// then the parameter space's, not a local copy). A kernel's parameters live in a buffer of their
// own for each launch, and an instruction that reads a line of it not yet cached stalls its warp
// for an L2 round trip; after the wait that stall lies on the launch's chain. The skinny GEMM first
// read its summaries' and cluster merge's line after the wait (scripts/gpu/param_lines.py lists
// such lines from the SASS); touching it took the H100's qwen3-0.6b bs 1 step -1.2 % and
// qwen2.5-0.5b's -0.5 % (bench/results/2026-12-06-param-lines.md). Thread (0, 0, 0) stores the
// words' XOR to shared memory: a volatile store, which keeps the loads, and keeps them before the
// wait (the compiler moves a parameter load that nothing consumes before the wait past it). Its
// warp waits for them there, while the kernel before still runs; where that kernel is done
// already, the same miss would have stalled the code after the wait.
template <typename T>
__device__ __forceinline__ void touch_params(const T& params) {
  static_assert(sizeof(T) % 4 == 0 && alignof(T) >= 4, "a parameter block of whole words");
  constexpr int kWords = static_cast<int>(sizeof(T) / 4);
  const auto* words = reinterpret_cast<const uint32_t*>(&params);
  // Word 16i of every line start in the block, and its last word: every 64-byte line the block
  // overlaps holds one of them, wherever the block starts.
  uint32_t sum = words[kWords - 1];
#pragma unroll
  for (int i = 0; i < kWords; i += 16) sum ^= words[i];
  __shared__ volatile uint32_t sink;
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) sink = sum;
}

// touch_params for a kernel whose parameters are scalars and pointers rather than one struct:
// pass them all. Each is loaded before the wait (its low word joins the same volatile store), so
// the lines that hold them are cached there and the values sit in registers after it.
template <typename T>
__device__ __forceinline__ uint32_t param_low_word(const T& v) {
  if constexpr (std::is_pointer_v<T>) {
    return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(v));
  } else {
    static_assert(std::is_integral_v<T>, "touch_values takes integers and pointers");
    return static_cast<uint32_t>(v);
  }
}
template <typename... Ts>
__device__ __forceinline__ void touch_values(const Ts&... values) {
  const uint32_t sum = (0u ^ ... ^ param_low_word(values));
  __shared__ volatile uint32_t sink;
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) sink = sum;
}

// PDL unless ROOFLINE_PDL=0 (read once). Measured on the H200 (bench/results/
// 2026-11-30-decode-step-pdl.md): the decode step with and without it, every test with it on.
inline bool pdl_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("ROOFLINE_PDL");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

// kernel<<<grid, block, smem, stream>>>(args...) with the programmatic-serialization attribute,
// in thread-block clusters of `cluster_x` blocks along x when cluster_x > 1 (grid.x a multiple of
// it; sm_90).
template <typename... KernelArgs, typename... Args>
void launch_pdl_clustered(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem,
                          cudaStream_t stream, unsigned cluster_x, Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[2];
  unsigned count = 0;
  if (pdl_enabled()) {
    attribute[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  if (cluster_x > 1) {
    attribute[count].id = cudaLaunchAttributeClusterDimension;
    attribute[count].val.clusterDim.x = cluster_x;
    attribute[count].val.clusterDim.y = 1;
    attribute[count].val.clusterDim.z = 1;
    ++count;
  }
  config.attrs = attribute;
  config.numAttrs = count;
  ROOFLINE_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

template <typename... KernelArgs, typename... Args>
void launch_pdl(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem,
                cudaStream_t stream, Args&&... args) {
  launch_pdl_clustered(kernel, grid, block, smem, stream, 1u, std::forward<Args>(args)...);
}

// How many thread-block clusters of `size` blocks (2..kMaxSize) of kKernel — kThreads threads and
// kSmem bytes of dynamic shared memory a block — the current device runs at once, asked once per
// device and kernel (cudaOccupancyMaxActiveClusters); 0 before sm_90, or when the environment
// variable `off_env` is "0" (the A/B switch of a kernel's clustered path). Clusters are placed
// whole within a GPC, so fewer of them fit than their blocks alone would.
template <auto kKernel, int kThreads, int kSmem, int kMaxSize>
int64_t max_active_clusters(int64_t size, const char* off_env) {
  constexpr int kMaxDevices = 64;
  static int64_t clusters[kMaxDevices][kMaxSize + 1] = {};
  static std::once_flag once[kMaxDevices];
  int device = 0;
  ROOFLINE_CUDA_CHECK(cudaGetDevice(&device));
  ROOFLINE_CHECK(device >= 0 && device < kMaxDevices);
  ROOFLINE_CHECK(size >= 2 && size <= kMaxSize);
  std::call_once(once[device], [device, off_env] {
    const char* env = std::getenv(off_env);
    if (env != nullptr && std::strcmp(env, "0") == 0) return;
    int major = 0;
    ROOFLINE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    if (major < 9) return;
    for (int s = 2; s <= kMaxSize; ++s) {
      cudaLaunchConfig_t config = {};
      config.gridDim = dim3(static_cast<unsigned>(s));
      config.blockDim = dim3(kThreads);
      config.dynamicSmemBytes = kSmem;
      cudaLaunchAttribute attribute;
      attribute.id = cudaLaunchAttributeClusterDimension;
      attribute.val.clusterDim.x = static_cast<unsigned>(s);
      attribute.val.clusterDim.y = 1;
      attribute.val.clusterDim.z = 1;
      config.attrs = &attribute;
      config.numAttrs = 1;
      int n = 0;
      if (cudaOccupancyMaxActiveClusters(&n, kKernel, &config) == cudaSuccess)
        clusters[device][s] = n;
      cudaGetLastError();  // a refusal is an answer here, not an error for the next launch
    }
  });
  return clusters[device][size];
}

}  // namespace roofline::cuda
