// The CUDA half of calibration.h: device-to-device copy bandwidth and the bf16 GEMM peak of
// matmul_cuda (cuBLASLt at this size), each the best of several timed runs after a warm-up; and
// the dependent-kernel handover, the median of several replays of a CUDA graph that chains
// kHandoverSteps PDL kernels (bench/results/2026-12-02-boundary-cost/boundary.cu's chain: each of
// one block an SM reads the value every block of the kernel before wrote, then writes its own —
// the all-to-all dependency a decode GEMM has on the kernel before it, with no other work). A
// replay over its kernels is what one handover costs: the grid's completion, its writes made
// visible, the next grid released, one L2 round trip. With ROOFLINE_PDL=0 the chain launches
// without PDL, as the engine's kernels then do.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/cuda_check.h"
#include "ops/common/cuda_launch.cuh"
#include "ops/matmul/matmul.h"
#include "runtime/calibration.h"

namespace roofline {

namespace {

constexpr size_t kCopyBytes = size_t{1} << 30;
constexpr int64_t kGemmN = 8192;
constexpr int kRepeats = 5;
// The handover chain: long enough that the graph launch before its first kernel (a few µs) is
// under 1 % of it; boundary.cu's length and replay count, whose two runs agreed within 0.01 µs.
constexpr int kHandoverSteps = 512;
constexpr int kHandoverReplays = 20;
// Threads a block of the chain: eight warps read the previous step's values (one an SM) in one
// pass on any GPU up to 256 SMs.
constexpr int kHandoverThreads = 256;

// One step of the handover chain: waits for the kernel before (PDL), releases the next one, then
// sums the `blocks` values x the kernel before wrote and writes this block's into y. x, y:
// [blocks].
__global__ void handover_step_kernel(const float* x, float* y, int blocks) {
  __shared__ float warp_sums[kHandoverThreads / 32];
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  float s = 0.0f;
  for (int i = static_cast<int>(threadIdx.x); i < blocks; i += static_cast<int>(blockDim.x))
    s += x[i];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.0f;
    for (int w = 0; w < kHandoverThreads / 32; ++w) t += warp_sums[w];
    // Bounded however long the chain, for fewer than 1000 blocks (the sum shrinks by 1e-3).
    y[blockIdx.x] = t * 1e-3f + static_cast<float>(blockIdx.x);
  }
}

// Frees what it owns on every path out of the calibration.
struct DeviceBuffers {
  std::vector<void*> ptrs;
  ~DeviceBuffers() {
    for (void* p : ptrs) cudaFree(p);
  }
  StatusOr<void*> alloc(size_t bytes, const char* what) {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
      cudaGetLastError();
      return resource_exhausted(std::string("calibration: no room on the GPU for the ") + what +
                                " (" + std::to_string(bytes >> 20) +
                                " MiB); free the GPU and retry");
    }
    ptrs.push_back(p);
    return p;
  }
};

// Best milliseconds of `run` over kRepeats event-timed runs on `stream`, after one warm-up.
template <typename F>
float best_ms(cudaStream_t stream, F&& run) {
  cudaEvent_t start, stop;
  ROOFLINE_CUDA_CHECK(cudaEventCreate(&start));
  ROOFLINE_CUDA_CHECK(cudaEventCreate(&stop));
  run();
  float best = 1e30f;
  for (int i = 0; i < kRepeats; ++i) {
    ROOFLINE_CUDA_CHECK(cudaEventRecord(start, stream));
    run();
    ROOFLINE_CUDA_CHECK(cudaEventRecord(stop, stream));
    ROOFLINE_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    ROOFLINE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    best = std::min(best, ms);
  }
  ROOFLINE_CUDA_CHECK(cudaEventDestroy(start));
  ROOFLINE_CUDA_CHECK(cudaEventDestroy(stop));
  return best;
}

// Nanoseconds a dependent-kernel handover takes on the current device (the file comment says how
// it is measured); `buf` holds the chain's two buffers.
StatusOr<double> measure_handover_ns(cudaStream_t stream, DeviceBuffers& buf) {
  int device = 0, sms = 0;
  ROOFLINE_CUDA_CHECK(cudaGetDevice(&device));
  ROOFLINE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const size_t bytes = static_cast<size_t>(sms) * sizeof(float);
  ROOFLINE_ASSIGN_OR_RETURN(void* a, buf.alloc(bytes, "handover chain"));
  ROOFLINE_ASSIGN_OR_RETURN(void* b, buf.alloc(bytes, "handover chain"));
  auto* x = static_cast<float*>(a);
  auto* y = static_cast<float*>(b);
  ROOFLINE_CUDA_CHECK(cudaMemsetAsync(x, 0, bytes, stream));
  ROOFLINE_CUDA_CHECK(cudaMemsetAsync(y, 0, bytes, stream));
  ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph = nullptr;
  ROOFLINE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int step = 0; step < kHandoverSteps; ++step) {
    // Each step reads what the one before wrote: x and y swap every step.
    const float* in = step % 2 == 0 ? x : y;
    float* out = step % 2 == 0 ? y : x;
    cuda::launch_pdl(handover_step_kernel, dim3(static_cast<unsigned>(sms)), dim3(kHandoverThreads),
                     0, stream, in, out, sms);
    ROOFLINE_CUDA_LAUNCH_CHECK(stream);
  }
  ROOFLINE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  ROOFLINE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  ROOFLINE_CUDA_CHECK(cudaGraphDestroy(graph));
  cudaEvent_t start, stop;
  ROOFLINE_CUDA_CHECK(cudaEventCreate(&start));
  ROOFLINE_CUDA_CHECK(cudaEventCreate(&stop));
  // Warm-up: the graph's first replays upload it and bring the clocks up.
  for (int i = 0; i < 3; ++i) ROOFLINE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  std::vector<float> ms(kHandoverReplays);
  for (float& m : ms) {
    ROOFLINE_CUDA_CHECK(cudaEventRecord(start, stream));
    ROOFLINE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    ROOFLINE_CUDA_CHECK(cudaEventRecord(stop, stream));
    ROOFLINE_CUDA_CHECK(cudaEventSynchronize(stop));
    ROOFLINE_CUDA_CHECK(cudaEventElapsedTime(&m, start, stop));
  }
  ROOFLINE_CUDA_CHECK(cudaEventDestroy(start));
  ROOFLINE_CUDA_CHECK(cudaEventDestroy(stop));
  ROOFLINE_CUDA_CHECK(cudaGraphExecDestroy(exec));
  std::nth_element(ms.begin(), ms.begin() + kHandoverReplays / 2, ms.end());
  return static_cast<double>(ms[kHandoverReplays / 2]) * 1e6 / kHandoverSteps;
}

}  // namespace

StatusOr<std::string> cuda_device_name(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return unimplemented("no CUDA device on this machine");
  }
  if (device < 0 || device >= count)
    return invalid_argument("cuda:" + std::to_string(device) +
                            " does not exist: this machine has " + std::to_string(count) +
                            " CUDA device(s)");
  cudaDeviceProp prop{};
  ROOFLINE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return std::string(prop.name);
}

StatusOr<CalibratedCeilings> calibrate_cuda_ceilings(int device) {
  ROOFLINE_ASSIGN_OR_RETURN(std::string name, cuda_device_name(device));
  ROOFLINE_CUDA_CHECK(cudaSetDevice(device));
  CalibratedCeilings c;
  c.device = name;
  DeviceBuffers buf;
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // Copy: bytes read + bytes written per copy.
  {
    ROOFLINE_ASSIGN_OR_RETURN(void* src, buf.alloc(kCopyBytes, "copy source"));
    ROOFLINE_ASSIGN_OR_RETURN(void* dst, buf.alloc(kCopyBytes, "copy destination"));
    ROOFLINE_CUDA_CHECK(cudaMemsetAsync(src, 1, kCopyBytes, stream));
    const float ms = best_ms(stream, [&] {
      ROOFLINE_CUDA_CHECK(cudaMemcpyAsync(dst, src, kCopyBytes, cudaMemcpyDeviceToDevice, stream));
    });
    c.ceilings.bytes_per_s = 2.0 * static_cast<double>(kCopyBytes) / (ms * 1e-3);
  }
  // GEMM: y = x · Wᵀ, all 8192², bf16 (the values are small non-zero constants).
  {
    const size_t bytes = static_cast<size_t>(kGemmN * kGemmN) * 2;
    ROOFLINE_ASSIGN_OR_RETURN(void* x, buf.alloc(bytes, "GEMM input"));
    ROOFLINE_ASSIGN_OR_RETURN(void* w, buf.alloc(bytes, "GEMM weights"));
    ROOFLINE_ASSIGN_OR_RETURN(void* y, buf.alloc(bytes, "GEMM output"));
    ROOFLINE_CUDA_CHECK(cudaMemsetAsync(x, 0x3c, bytes, stream));
    ROOFLINE_CUDA_CHECK(cudaMemsetAsync(w, 0x3c, bytes, stream));
    auto ctx = MatmulCudaContext::create();
    MatmulParams p;
    p.x = x;
    p.w = w;
    p.w_dtype = DType::kBF16;
    p.y = y;
    p.dtype = DType::kBF16;
    p.m = p.n = p.k = kGemmN;
    p.y_row_stride = kGemmN;
    const float ms = best_ms(stream, [&] { matmul_cuda(p, *ctx, stream); });
    c.ceilings.flops_per_s = 2.0 * static_cast<double>(kGemmN) * kGemmN * kGemmN / (ms * 1e-3);
  }
  // Handover: calibrate_ceilings checks the figure is plausible and marks it calibrated.
  ROOFLINE_ASSIGN_OR_RETURN(c.ceilings.handover_ns, measure_handover_ns(stream, buf));
  ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
  return c;
}

}  // namespace roofline
