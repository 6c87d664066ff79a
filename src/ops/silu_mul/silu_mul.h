// silu_mul: the gated-MLP activation, out = silu(gate) * up, reading the merged gate|up GEMM
// output so the MLP needs one activation kernel between its two GEMMs.
//
// Element types: the CPU backend takes f32 (dtype kF32); the CUDA backend takes bf16 or f32, with
// f32 math and one rounding of the result to dtype. In bf16 the CUDA kernel computes silu with the
// hardware exp2 and reciprocal (within a few f32 ulp before the rounding, so within one bf16 ulp
// of the CPU twin); in f32 with the accurate expf and IEEE division.
#pragma once

#include <cstdint>

#include "core/cuda_stream.h"
#include "core/dtype.h"

namespace roofline {

struct SiluMulParams {
  const void* gate_up = nullptr;  // [num_tokens, 2 * intermediate] in dtype: gate | up
  void* out = nullptr;            // [num_tokens, intermediate] in dtype
  int64_t num_tokens = 0;
  int64_t intermediate = 0;
  DType dtype = DType::kF32;  // of gate_up and out
};

// CPU backend: dtype == kF32.
void silu_mul_cpu(const SiluMulParams& p);
// CUDA backend: dtype kBF16 or kF32, every pointer on the device. Asynchronous on `stream`.
void silu_mul_cuda(const SiluMulParams& p, CudaStream stream);

}  // namespace roofline
