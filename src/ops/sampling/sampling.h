// sampling: turns one row of logits into a token id: greedy argmax, or a draw from the
// temperature-scaled distribution restricted by top-k and top-p (nucleus), given a uniform number
// in [0, 1) from the caller's seeded generator. The draw is an inverse-CDF lookup over the kept
// tokens in descending-probability order, so a fixed uniform always yields the same token.
#pragma once

#include <cstdint>

namespace roofline {

struct SamplingConfig {
  float temperature = 0.0f;  // 0: greedy
  int32_t top_k = 0;         // 0: all tokens
  float top_p = 1.0f;        // (0, 1]
};

// Index of the largest logit; the lowest index wins ties. NaN logits are never chosen; -1 when
// every logit is NaN (or vocab_size is 0), as sample_cpu.
int32_t argmax_cpu(const float* logits, int64_t vocab_size);

int32_t sample_cpu(const float* logits, int64_t vocab_size, const SamplingConfig& config,
                   double uniform);

}  // namespace roofline
