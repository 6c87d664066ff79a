// silu_mul: the gated-MLP activation, out = silu(gate) * up, reading the merged gate|up GEMM
// output so the MLP needs one activation kernel between its two GEMMs.
#pragma once

#include <cstdint>

namespace roofline {

struct SiluMulParams {
  const float* gate_up = nullptr;  // [num_tokens, 2 * intermediate]: gate | up
  float* out = nullptr;            // [num_tokens, intermediate]
  int64_t num_tokens = 0;
  int64_t intermediate = 0;
};

void silu_mul_cpu(const SiluMulParams& p);

}  // namespace roofline
