// RoPE frequency tables, computed in f32 as transformers does: inv_freq[i] = 1 / theta^(2i/d),
// then the scaling rule of the model's rope type (linear: / factor; llama3: low frequencies
// / factor, high kept, a smooth blend between).
#pragma once

#include <cstdint>
#include <vector>

#include "io/model_config.h"

namespace roofline {

std::vector<float> rope_inv_freq(double theta, int64_t head_dim, const RopeScaling& scaling);

}  // namespace roofline
