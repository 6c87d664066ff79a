// Sampler: the host side of token selection for one sequence: its sampling settings and its own
// seeded random stream, so a sequence's draws do not depend on what else is in the batch.
#pragma once

#include <cstdint>

#include "ops/sampling/sampling.h"

namespace roofline {

// xoshiro256** seeded through splitmix64: small state, good statistics, reproducible everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next_u64();
  double next_uniform();  // [0, 1) with 53 random bits

 private:
  uint64_t s_[4];
};

class Sampler {
 public:
  Sampler(const SamplingConfig& config, uint64_t seed) : config_(config), rng_(seed) {}
  // A token id, or -1 when every logit is NaN (the caller reports it as an error).
  int32_t sample(const float* logits, int64_t vocab_size);

 private:
  SamplingConfig config_;
  Rng rng_;
};

}  // namespace roofline
