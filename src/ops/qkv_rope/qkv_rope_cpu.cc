// qkv_rope_cpu: per token, split the fused q|k|v row into heads; optionally RMS-normalise each q
// and k head over head_dim (Qwen3's q_norm/k_norm, applied before RoPE as Hugging Face does);
// rotate q and k with rotate-half RoPE; write rotated q to q_out and k, v into the paged caches.
//
// Numerics follow transformers in fp32: angle = float(position) * inv_freq[i] (one f32 multiply,
// what its inv_freq @ positions matmul with an inner dimension of 1 computes), cos and sin in f32,
// and out = x·cos + rotate_half(x)·sin with each product rounded before the add:
//   out[i]       = x[i]·cos_i − x[i + d/2]·sin_i
//   out[i + d/2] = x[i + d/2]·cos_i + x[i]·sin_i        (i < d/2)
// Memory bound: reads and writes each q|k|v element once; parallel over tokens.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "ops/qkv_rope/qkv_rope.h"

namespace roofline {

namespace {

// x <- (x * rsqrt(mean(x^2) + eps)) * weight over one head, as Qwen3RMSNorm.
void rms_norm_head(float* x, const float* weight, int64_t d, float eps) {
  float sum = 0.0f;
  for (int64_t i = 0; i < d; ++i) sum += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(sum / static_cast<float>(d) + eps);
  for (int64_t i = 0; i < d; ++i) x[i] = (x[i] * scale) * weight[i];
}

// out <- rope(x); x and out must not alias (both halves read the other's input).
void rope_head(const float* x, const float* cos, const float* sin, int64_t d, float* out) {
  const int64_t half = d / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float x1 = x[i];
    const float x2 = x[i + half];
    const float a = x1 * cos[i];
    const float b = x2 * sin[i];
    const float c = x2 * cos[i];
    const float e = x1 * sin[i];
    out[i] = a - b;
    out[i + half] = c + e;
  }
}

}  // namespace

void qkv_rope_cpu(const QkvRopeParams& p) {
  ROOFLINE_CHECK(p.num_tokens >= 0 && p.num_heads > 0 && p.num_kv_heads > 0);
  ROOFLINE_CHECK(p.head_dim > 0 && p.head_dim % 2 == 0);
  ROOFLINE_CHECK(p.block_size > 0 && p.num_blocks >= 0);
  ROOFLINE_CHECK((p.q_norm_weight == nullptr) == (p.k_norm_weight == nullptr));
  ROOFLINE_CHECK_MSG(p.dtype == DType::kF32 && p.kv_dtype == DType::kF32,
                     "the CPU backend computes in f32 and keeps an f32 KV cache");
  if (p.num_tokens == 0) return;
  ROOFLINE_CHECK(p.qkv != nullptr && p.q_out != nullptr && p.positions != nullptr &&
                 p.slot_mapping != nullptr && p.inv_freq != nullptr);
  ROOFLINE_CHECK(p.k_cache != nullptr && p.v_cache != nullptr);

  const auto* qkv = static_cast<const float*>(p.qkv);
  auto* q_out = static_cast<float*>(p.q_out);
  auto* k_cache = static_cast<float*>(p.k_cache);
  auto* v_cache = static_cast<float*>(p.v_cache);
  const int64_t d = p.head_dim;
  const int64_t half = d / 2;
  const int64_t row = (p.num_heads + 2 * p.num_kv_heads) * d;
  const int64_t kv_row = p.num_kv_heads * d;  // one cache slot
  const int64_t num_slots = p.num_blocks * p.block_size;
  const bool qk_norm = p.q_norm_weight != nullptr;
  std::vector<float> q_weight, k_weight;
  if (qk_norm) {
    ROOFLINE_CHECK(is_float_dtype(p.norm_weight_dtype));
    q_weight.resize(static_cast<size_t>(d));
    k_weight.resize(static_cast<size_t>(d));
    convert_to_f32(p.q_norm_weight, p.norm_weight_dtype, d, q_weight.data());
    convert_to_f32(p.k_norm_weight, p.norm_weight_dtype, d, k_weight.data());
  }

  const int64_t min_tokens = std::max<int64_t>(1, 8192 / row);
  ThreadPool::global().parallel_for(p.num_tokens, min_tokens, [&](int64_t begin, int64_t end) {
    // cos/sin for one token, shared by all its heads; a head's normalised input.
    std::vector<float> cos(static_cast<size_t>(half)), sin(static_cast<size_t>(half));
    std::vector<float> head(static_cast<size_t>(d));
    for (int64_t t = begin; t < end; ++t) {
      const float pos = static_cast<float>(p.positions[t]);
      for (int64_t i = 0; i < half; ++i) {
        const float angle = pos * p.inv_freq[i];
        cos[i] = std::cos(angle);
        sin[i] = std::sin(angle);
      }
      const float* q_in = qkv + t * row;
      const float* k_in = q_in + p.num_heads * d;
      const float* v_in = k_in + p.num_kv_heads * d;

      for (int64_t h = 0; h < p.num_heads; ++h) {
        std::copy(q_in + h * d, q_in + (h + 1) * d, head.begin());
        if (qk_norm) rms_norm_head(head.data(), q_weight.data(), d, p.norm_eps);
        rope_head(head.data(), cos.data(), sin.data(), d, q_out + (t * p.num_heads + h) * d);
      }

      const int64_t slot = p.slot_mapping[t];
      if (slot < 0) continue;  // a padding token: nothing to cache
      // The scheduler hands out slots inside the cache it allocated; one outside is our bug.
      ROOFLINE_CHECK_MSG(slot < num_slots, "slot_mapping entry beyond the KV cache");
      float* k_slot = k_cache + slot * kv_row;
      for (int64_t h = 0; h < p.num_kv_heads; ++h) {
        std::copy(k_in + h * d, k_in + (h + 1) * d, head.begin());
        if (qk_norm) rms_norm_head(head.data(), k_weight.data(), d, p.norm_eps);
        rope_head(head.data(), cos.data(), sin.data(), d, k_slot + h * d);
      }
      std::copy(v_in, v_in + kv_row, v_cache + slot * kv_row);
    }
  });
}

}  // namespace roofline
