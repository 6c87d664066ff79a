// rms_norm: y = x / sqrt(mean(x^2) + eps) * weight, per row; and its fused form with the residual
// add that precedes every norm inside a decoder (one pass instead of two).
//
// Element types: activations (x, residual, out) are in dtype: f32 on the CPU backend, bf16 (or
// f32) on the CUDA backend, with f32 math. The weight is f32, f16 or bf16 (weight_dtype).
// Rounding point of the fused form in bf16: residual_out = bf16(residual_in + x) is the value the
// next layer sees, and out is the norm of exactly that rounded sum, so a fused step equals an
// unfused add followed by rms_norm bit for bit in what it reads.
#pragma once

#include <cstdint>

#include "core/cuda_stream.h"
#include "core/dtype.h"

namespace roofline {

struct RmsNormParams {
  const void* x = nullptr;       // [num_rows, hidden] in dtype
  const void* weight = nullptr;  // [hidden] in weight_dtype
  DType weight_dtype = DType::kF32;
  void* out = nullptr;  // [num_rows, hidden] in dtype; may alias x
  int64_t num_rows = 0;
  int64_t hidden = 0;
  float eps = 1e-6f;
  DType dtype = DType::kF32;  // of x and out
};

// CPU backend: dtype == kF32.
void rms_norm_cpu(const RmsNormParams& p);
// CUDA backend: dtype kBF16 or kF32, hidden <= 65536 (bf16; 32768 f32), every pointer on the
// device. Asynchronous on `stream`.
void rms_norm_cuda(const RmsNormParams& p, CudaStream stream);

struct RmsNormResidualParams {
  const void* x = nullptr;            // [num_rows, hidden] in dtype: branch output to add
  const void* residual_in = nullptr;  // [num_rows, hidden] in dtype: residual stream before the add
  void* residual_out = nullptr;       // [num_rows, hidden] in dtype: residual_in + x; may alias
                                      // residual_in
  const void* weight = nullptr;       // [hidden] in weight_dtype
  DType weight_dtype = DType::kF32;
  void* out = nullptr;  // [num_rows, hidden] in dtype: rms_norm(residual_out) * weight;
                        // may alias x
  int64_t num_rows = 0;
  int64_t hidden = 0;
  float eps = 1e-6f;
  DType dtype = DType::kF32;  // of x, residual_in, residual_out and out
};

// CPU backend: dtype == kF32.
void rms_norm_residual_cpu(const RmsNormResidualParams& p);
// CUDA backend: as rms_norm_cuda; residual_out is rounded to dtype before it is normalised.
void rms_norm_residual_cuda(const RmsNormResidualParams& p, CudaStream stream);

}  // namespace roofline
