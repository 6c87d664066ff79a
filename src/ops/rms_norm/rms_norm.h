// rms_norm: y = x / sqrt(mean(x^2) + eps) * weight, per row; and its fused form with the residual
// add that precedes every norm inside a decoder (one pass instead of two).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace roofline {

struct RmsNormParams {
  const float* x = nullptr;       // [num_rows, hidden]
  const void* weight = nullptr;   // [hidden] in weight_dtype
  DType weight_dtype = DType::kF32;
  float* out = nullptr;           // [num_rows, hidden]; may alias x
  int64_t num_rows = 0;
  int64_t hidden = 0;
  float eps = 1e-6f;
};

void rms_norm_cpu(const RmsNormParams& p);

struct RmsNormResidualParams {
  const float* x = nullptr;            // [num_rows, hidden] branch output to add
  const float* residual_in = nullptr;  // [num_rows, hidden] residual stream before the add
  float* residual_out = nullptr;       // [num_rows, hidden] residual_in + x; may alias residual_in
  const void* weight = nullptr;        // [hidden] in weight_dtype
  DType weight_dtype = DType::kF32;
  float* out = nullptr;                // [num_rows, hidden] rms_norm(residual_in + x) * weight
  int64_t num_rows = 0;
  int64_t hidden = 0;
  float eps = 1e-6f;
};

void rms_norm_residual_cpu(const RmsNormResidualParams& p);

}  // namespace roofline
