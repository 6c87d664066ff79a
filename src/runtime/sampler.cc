// Rng and Sampler.
#include "runtime/sampler.h"

namespace roofline {

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(uint64_t seed) {
  for (uint64_t& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::next_uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

int32_t Sampler::sample(const float* logits, int64_t vocab_size) {
  if (config_.temperature <= 0.0f) return argmax_cpu(logits, vocab_size);
  return sample_cpu(logits, vocab_size, config_, rng_.next_uniform());
}

}  // namespace roofline
