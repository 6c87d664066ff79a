// matmul: y = x · Wᵀ with W in nn.Linear layout [n, k], fp32 accumulation; matmul_bias adds a
// bias row (the GEMM-epilogue form). The output row stride lets several weights write adjacent
// column ranges of one buffer (q|k|v, gate|up) without concatenating the weights on the host.
//
// Element types: the CPU backend takes f32 activations (x, y) and f32/f16/bf16 weights and bias;
// the CUDA backend takes bf16 for all of them, with fp32 accumulation (cuBLASLt).
#pragma once

#include <cstdint>
#include <memory>

#include "core/cuda_stream.h"
#include "core/dtype.h"

namespace roofline {

struct MatmulParams {
  const void* x = nullptr;      // [m, k] in dtype, row stride k
  const void* w = nullptr;      // [n, k] in w_dtype
  DType w_dtype = DType::kF32;
  const void* bias = nullptr;   // [n] in bias_dtype; read only by matmul_bias_*
  DType bias_dtype = DType::kF32;
  void* y = nullptr;            // [m, n] in dtype, row stride y_row_stride (>= n)
  DType dtype = DType::kF32;    // of x and y
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t y_row_stride = 0;
};

// CPU backend: dtype == kF32.
void matmul_cpu(const MatmulParams& p);
void matmul_bias_cpu(const MatmulParams& p);

// The cuBLASLt state of the CUDA backend: a handle, a workspace allocated once at creation, and
// the algorithm chosen per (m bucket, n, k, row stride, alignments, epilogue), cached so that after
// warm-up a call allocates nothing and queries no heuristic (CUDA-graph capture safe). Not
// thread-safe, and its one workspace serves one stream at a time: one context per executor stream.
class MatmulCudaContext {
 public:
  static constexpr int64_t kWorkspaceBytes = int64_t{32} << 20;  // cuBLASLt split-K scratch

  // Aborts when no CUDA device or cuBLASLt is usable (a broken invariant of a CUDA backend).
  static std::unique_ptr<MatmulCudaContext> create();
  ~MatmulCudaContext();
  MatmulCudaContext(const MatmulCudaContext&) = delete;
  MatmulCudaContext& operator=(const MatmulCudaContext&) = delete;

  // Distinct (m, n, k, …) problems seen so far, and heuristic queries made for them (for tests:
  // one query per m bucket unless the bucket's algorithm rejects the exact m).
  int64_t num_cached_problems() const;
  int64_t num_heuristic_queries() const;

  struct Impl;  // cuBLASLt types live in matmul_cuda.cu only

 private:
  MatmulCudaContext();
  std::unique_ptr<Impl> impl_;
  friend void matmul_cuda(const MatmulParams&, MatmulCudaContext&, CudaStream);
  friend void matmul_bias_cuda(const MatmulParams&, MatmulCudaContext&, CudaStream);
};

// The m bucket whose cached algorithm serves a GEMM with m rows: the next power of two >= m. A pure
// host function, tested on the CPU.
constexpr int64_t matmul_cuda_m_bucket(int64_t m) {
  int64_t bucket = 1;
  while (bucket < m) bucket *= 2;
  return bucket;
}

// CUDA backend: dtype == w_dtype (== bias_dtype for matmul_bias_cuda) == kBF16; every pointer on
// the device. matmul_bias_cuda also needs n, k and y_row_stride multiples of 8 and x, w, bias and y
// 16-byte aligned (true of every real model's projections): otherwise cuBLASLt's bias epilogue
// rounds twice, and the call aborts. Asynchronous on `stream`; launches nothing when m == 0.
void matmul_cuda(const MatmulParams& p, MatmulCudaContext& ctx, CudaStream stream);
void matmul_bias_cuda(const MatmulParams& p, MatmulCudaContext& ctx, CudaStream stream);

}  // namespace roofline
