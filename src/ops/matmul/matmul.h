// matmul: y = x · Wᵀ with W in nn.Linear layout [n, k], fp32 accumulation; matmul_bias adds a
// bias row (the GEMM-epilogue form). The output row stride lets several weights write adjacent
// column ranges of one buffer (q|k|v, gate|up) without concatenating the weights on the host.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace roofline {

struct MatmulParams {
  const float* x = nullptr;     // [m, k], row stride k
  const void* w = nullptr;      // [n, k] in w_dtype
  DType w_dtype = DType::kF32;
  const void* bias = nullptr;   // [n] in bias_dtype; read only by matmul_bias_cpu
  DType bias_dtype = DType::kF32;
  float* y = nullptr;           // [m, n], row stride y_row_stride (>= n)
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t y_row_stride = 0;
};

void matmul_cpu(const MatmulParams& p);
void matmul_bias_cpu(const MatmulParams& p);

}  // namespace roofline
