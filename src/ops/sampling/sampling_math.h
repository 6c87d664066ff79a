// The arithmetic of the batched sampling chain (sampling.h, SampleRowsParams) that the CPU twin
// and the CUDA kernels must perform bit for bit alike: the logit edits (bias and penalties), the
// rank key, the integer token weights, the Philox random stream and the integer thresholds of
// top-p and the draw. Everything here is plain IEEE f32 / integer arithmetic written so that no
// compiler may reorder or contract it differently on the host and on the device:
// - every multiply-add that matters is an explicit fma (std::fma on the host, the fma instruction
//   on the device, both correctly rounded); the other products are never followed by an add the
//   device compiler could contract (the device side uses __fmul_rn / __fadd_rn where one is);
// - sums of probabilities are sums of 64-bit integers, which are associative, so a parallel
//   reduction in any order gives the CPU's sequential sum exactly.
// That is what makes "same seed, same logits -> same token" hold between the CPU twin and the GPU,
// and what lets a test demand identical tokens rather than "nearly always the same".
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace roofline::sampling {

// Token ids take the low kIdBits of a 50-bit rank key, so the vocabulary is at most 2^18 = 262144
// (every released LLM vocabulary fits: Gemma's 256000 is the largest).
constexpr int kIdBits = 18;
constexpr int64_t kMaxVocab = int64_t{1} << kIdBits;
constexpr uint64_t kIdMask = (uint64_t{1} << kIdBits) - 1;
constexpr int kKeyBits = 32 + kIdBits;
// A token's weight is floor(2^45 * exp(s - s_max)): the best token weighs 2^45 and a whole
// vocabulary sums below 2^18 * 2^45 = 2^63, so every sum fits an unsigned 64-bit integer.
// Weights below 2^-45 of the best one become 0 (never drawn): at most 2^18 * 2^-45 = 7e-9 of the
// best token's probability is lost that way, in the worst case of a vocabulary-wide flat tail.
constexpr int kWeightFracBits = 45;

ROOFLINE_HD uint32_t float_bits(float v) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(v);
#else
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
#endif
}
ROOFLINE_HD float bits_float(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float v;
  std::memcpy(&v, &b, 4);
  return v;
#endif
}

// Neither NaN nor +-inf.
ROOFLINE_HD bool is_finite(float v) { return (float_bits(v) & 0x7f800000u) != 0x7f800000u; }

// Correctly rounded f32 operations the device compiler may not contract into an fma.
ROOFLINE_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
ROOFLINE_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
ROOFLINE_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
ROOFLINE_HD float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// One entry of a row's sparse edit list: a token whose logit the chain changes before anything
// else. The host keeps one entry per distinct token (sampling.h explains the list).
struct TokenEdit {
  int32_t token = 0;            // [0, vocab); at most once per row
  float bias = 0.0f;            // added first (OpenAI logit_bias; duplicates merged by the host)
  int32_t generated_count = 0;  // >= 0: times generated so far (frequency / presence penalties)
  int32_t in_prompt = 0;        // 1: in the prompt (repetition penalty also applies); 0 or 1
};

// The edited logit: bias, then HF's repetition penalty over prompt and generated tokens, then
// OpenAI's frequency and presence penalties over generated ones (runtime/sampler.h's order).
ROOFLINE_HD float apply_edit(float raw, const TokenEdit& e, float repetition, float frequency,
                             float presence) {
  float x = add_rn(raw, e.bias);
  if (e.in_prompt != 0 || e.generated_count > 0) {
    x = x > 0.0f ? div_rn(x, repetition) : mul_rn(x, repetition);
  }
  if (e.generated_count > 0) {
    x = x - add_rn(mul_rn(frequency, static_cast<float>(e.generated_count)), presence);
  }
  return x;
}

// The scaled logit s = x / T with -0 made +0, so that equal values have equal keys.
ROOFLINE_HD float scaled_logit(float x, float temperature) {
  const float s = div_rn(x, temperature);
  return s == 0.0f ? 0.0f : s;
}

// Rank key: larger key = ranked first. The high 32 bits order s as an unsigned integer (NaN is
// never ranked: NaN rows are errors); the low kIdBits hold (kIdMask - id) so that equal values
// rank the lower id first. Every token of a row has a distinct key.
ROOFLINE_HD uint32_t order_key(float s) {
  const uint32_t b = float_bits(s);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
ROOFLINE_HD float key_value(uint32_t key) {
  return bits_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}
ROOFLINE_HD uint64_t rank_key(float s, int32_t id) {
  return (static_cast<uint64_t>(order_key(s)) << kIdBits) | (kIdMask - static_cast<uint64_t>(id));
}
ROOFLINE_HD int32_t rank_key_id(uint64_t key) {
  return static_cast<int32_t>(kIdMask - (key & kIdMask));
}
ROOFLINE_HD float rank_key_value(uint64_t key) {
  return key_value(static_cast<uint32_t>(key >> kIdBits));
}

// exp(d) for d <= 0, the same bits on every machine: Cody-Waite reduction d = n ln2 + r with
// |r| <= ln2 / 2 (ln2 split in two so n * ln2_hi is exact), a degree-7 Taylor polynomial in
// Horner form with fma (relative error below 2^-22 over the range), and 2^n applied exactly.
// Below -80 the result is 0: such a weight is below 2^-45 anyway, and 2^n stays a normal float.
// exp(0) is exactly 1.
ROOFLINE_HD float exp_nonpositive(float d) {
  if (!(d > -80.0f)) return 0.0f;  // also -inf
  const float n = rintf(mul_rn(d, 1.44269504088896341f));
  float r = fma_rn(n, -0.693145751953125f, d);
  r = fma_rn(n, -1.428606765330187045e-06f, r);
  float p = 1.0f / 5040.0f;
  p = fma_rn(p, r, 1.0f / 720.0f);
  p = fma_rn(p, r, 1.0f / 120.0f);
  p = fma_rn(p, r, 1.0f / 24.0f);
  p = fma_rn(p, r, 1.0f / 6.0f);
  p = fma_rn(p, r, 0.5f);
  p = fma_rn(p, r, 1.0f);
  p = fma_rn(p, r, 1.0f);
  const int32_t e = static_cast<int32_t>(n) + 127;  // n in [-116, 0]: a normal exponent
  return mul_rn(p, bits_float(static_cast<uint32_t>(e) << 23));
}

// The relative probability exp(s - s_max) of a token (s_max finite), and its integer weight.
ROOFLINE_HD float relative_prob(float s, float s_max) { return exp_nonpositive(s - s_max); }
ROOFLINE_HD uint64_t weight_of(float rel) {
  return static_cast<uint64_t>(mul_rn(rel, 35184372088832.0f));  // rel * 2^45, truncated
}

// ceil(top_p * total) exactly, for top_p in (0, 1): top_p = m * 2^-shift with an integer m.
// Top-p keeps rank r while the weight ranked before r is below this: "mass before < top_p".
ROOFLINE_HD uint64_t top_p_threshold(float top_p, uint64_t total) {
  const uint32_t b = float_bits(top_p);
  const uint32_t exponent = (b >> 23) & 0xffu;
  const uint64_t m = exponent == 0 ? (b & 0x7fffffu) : ((b & 0x7fffffu) | 0x800000u);
  const int shift = exponent == 0 ? 149 : 150 - static_cast<int>(exponent);
  const unsigned __int128 product = static_cast<unsigned __int128>(m) * total;
  if (shift >= 127) return product != 0 ? 1 : 0;
  const unsigned __int128 one = 1;
  return static_cast<uint64_t>((product + (one << shift) - 1) >> shift);
}

// Philox4x32-10 (Salmon et al., SC'11): 128 random bits from a 64-bit key and a 128-bit counter,
// a pure function, so a sequence's draw at step t is the same whatever else is in the batch.
struct Philox4 {
  uint32_t v[4];
};
ROOFLINE_HD void mulhilo32(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}
ROOFLINE_HD Philox4 philox4x32_10(uint64_t key, uint64_t counter_lo, uint64_t counter_hi) {
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo32(0xD2511F53u, c0, &hi0, &lo0);
    mulhilo32(0xCD9E8D57u, c2, &hi1, &lo1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// The random bits of a row's draw: keyed by the request's seed, counted by the sequence's step
// index (tokens it has generated before this one).
ROOFLINE_HD Philox4 draw_bits(uint64_t seed, int64_t step) {
  return philox4x32_10(seed, static_cast<uint64_t>(step), 0);
}

// floor(R * total / 2^128) for the 128 random bits R: an integer uniform on [0, total) whose
// deviation from uniform is below total / 2^128 < 2^-65.
ROOFLINE_HD uint64_t uniform_below(const Philox4& r, uint64_t total) {
  const uint64_t hi = (static_cast<uint64_t>(r.v[0]) << 32) | r.v[1];
  const uint64_t lo = (static_cast<uint64_t>(r.v[2]) << 32) | r.v[3];
  const unsigned __int128 a = static_cast<unsigned __int128>(hi) * total;
  const unsigned __int128 b = static_cast<unsigned __int128>(lo) * total;
  return static_cast<uint64_t>((a + (b >> 64)) >> 64);
}
// The same bits as a double in [0, 1) (53 bits), for callers that want a plain uniform.
ROOFLINE_HD double uniform_double(const Philox4& r) {
  const uint64_t hi = (static_cast<uint64_t>(r.v[0]) << 32) | r.v[1];
  return static_cast<double>(hi >> 11) * 0x1.0p-53;
}

}  // namespace roofline::sampling
