// The CUDA half of calibration.h: device-to-device copy bandwidth and the bf16 GEMM peak of
// matmul_cuda (cuBLASLt at this size), each the best of several timed runs after a warm-up.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/cuda_check.h"
#include "ops/matmul/matmul.h"
#include "runtime/calibration.h"

namespace roofline {

namespace {

constexpr size_t kCopyBytes = size_t{1} << 30;
constexpr int64_t kGemmN = 8192;
constexpr int kRepeats = 5;

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
  ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
  return c;
}

}  // namespace roofline
