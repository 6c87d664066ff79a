// rope_inv_freq: mirrors transformers' _compute_default_rope_parameters and
// _compute_llama3_parameters, keeping their f32 arithmetic so positions far into the sequence
// rotate by the same angles as the reference.
#include "models/rope.h"

#include <cmath>

namespace roofline {

std::vector<float> rope_inv_freq(double theta, int64_t head_dim, const RopeScaling& s) {
  std::vector<float> inv(static_cast<size_t>(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv[i] = 1.0f / std::pow(static_cast<float>(theta), exponent);
  }
  if (s.type == RopeScaling::Type::kLinear) {
    for (float& f : inv) f /= s.factor;
  } else if (s.type == RopeScaling::Type::kLlama3) {
    const float old_ctx = static_cast<float>(s.original_max_position);
    const float low_wavelen = old_ctx / s.low_freq_factor;
    const float high_wavelen = old_ctx / s.high_freq_factor;
    for (float& f : inv) {
      const float wavelen = 2.0f * static_cast<float>(M_PI) / f;
      float scaled = wavelen > low_wavelen ? f / s.factor : f;
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      if (medium) {
        const float smooth =
            (old_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        scaled = (1.0f - smooth) * scaled / s.factor + smooth * scaled;
      }
      f = scaled;
    }
  }
  return inv;
}

}  // namespace roofline
