// Run-time selection of a CUDA rms_norm kernel variant (rms_norm_launch.h lists them), for the
// benchmark that times every variant in one binary and the test that checks every variant.
// rms_norm_cuda / rms_norm_residual_cuda use kRmsNormVariants[kRmsNormDefaultVariant].
#pragma once

#include "ops/rms_norm/rms_norm.h"
#include "ops/rms_norm/rms_norm_launch.h"

namespace roofline {

// As rms_norm_cuda, with kernel variant kRmsNormVariants[variant] (0 <= variant <
// kRmsNormNumVariants).
void rms_norm_cuda_variant(const RmsNormParams& p, int variant, CudaStream stream);
// As rms_norm_residual_cuda, with kernel variant kRmsNormVariants[variant].
void rms_norm_residual_cuda_variant(const RmsNormResidualParams& p, int variant, CudaStream stream);

}  // namespace roofline
