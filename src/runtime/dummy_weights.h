// Dummy weights: deterministic pseudo-random values for a tensor of a real model's shape, so every
// benchmark runs without downloads (`--dummy-weights llama3-8b`). Values come from a hash of
// (tensor seed, element index), so the CPU and the GPU (which fills device memory directly, no host
// copy of 16 GB) produce the same tensor. Scales keep activations in a sane range: norms near 1,
// matrices uniform with the variance of 1/fan_in, embeddings uniform in [-1, 1).
#pragma once

#include <cstdint>
#include <string>

#if defined(__CUDACC__)
#define ROOFLINE_HOST_DEVICE __host__ __device__
#else
#define ROOFLINE_HOST_DEVICE
#endif

namespace roofline {

enum class DummyKind : uint8_t { kNorm, kMatrix, kEmbedding, kBias };

struct DummyTensor {
  uint64_t seed = 0;
  DummyKind kind = DummyKind::kMatrix;
  int64_t fan_in = 1;  // last dimension of a matrix
};

// The tensor's seed and distribution from its name and shape.
DummyTensor dummy_tensor(const std::string& name, int64_t rank, int64_t last_dim);

ROOFLINE_HOST_DEVICE inline float dummy_value(const DummyTensor& t, int64_t i) {
  uint64_t z = t.seed + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;  // [-1, 1)
  switch (t.kind) {
    case DummyKind::kNorm:
      return 1.0f + 0.1f * u;
    case DummyKind::kEmbedding:
      return u;
    case DummyKind::kBias:
      return 0.1f * u;
    case DummyKind::kMatrix:
      break;
  }
  // Uniform [-a, a) has variance a^2/3; a = sqrt(3 / fan_in) gives variance 1/fan_in.
  float a = 1.0f;
  const float v = 3.0f / static_cast<float>(t.fan_in);
#if defined(__CUDA_ARCH__)
  a = sqrtf(v);
#else
  a = __builtin_sqrtf(v);
#endif
  return a * u;
}

}  // namespace roofline
