// libFuzzer target: parse_model_config on arbitrary bytes as a config.json. It must return a
// Status for any input, never crash, throw, or run into undefined behaviour (UBSan watches float
// conversions too). An accepted config is re-checked against the guarantees later code relies on:
// it passes validate_model_config, every float the RoPE and RMSNorm code reads is finite and
// positive, the llama3 ramp's divisor is positive, and the byte sizes the loader and the KV-cache
// planner compute from it fit in 64 bits.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "io/model_config.h"

namespace {

// a * b, aborting the run as a finding when it would overflow int64.
int64_t mul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) std::abort();
  return out;
}

int64_t add(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) std::abort();
  return out;
}

bool positive_finite(float v) { return std::isfinite(v) && v > 0.0f; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = roofline::parse_model_config(text, "fuzz-input");
  if (!config.ok()) {
    if (config.status().message().empty()) std::abort();  // an error must say what to fix
    return 0;
  }
  const roofline::ModelConfig& c = *config;
  if (!roofline::validate_model_config(c, "fuzz-input").ok()) std::abort();
  if (!positive_finite(c.rms_norm_eps) || !std::isfinite(c.rope_theta) || !(c.rope_theta > 0.0))
    std::abort();
  const roofline::RopeScaling& s = c.rope_scaling;
  if (!positive_finite(s.factor) || !positive_finite(s.low_freq_factor) ||
      !positive_finite(s.high_freq_factor) || s.original_max_position < 1)
    std::abort();
  if (s.type == roofline::RopeScaling::Type::kLlama3 &&
      !(s.high_freq_factor - s.low_freq_factor > 0.0f))
    std::abort();
  // Weights of one layer and of the model, at 4 bytes an element (the widest dtype), and the KV
  // cache of one sequence at full context.
  const int64_t q = mul(c.num_heads, c.head_dim);
  const int64_t kv = mul(c.num_kv_heads, c.head_dim);
  int64_t layer = mul(c.hidden_size, add(add(q, mul(2, kv)), q));
  layer = add(layer, mul(3, mul(c.hidden_size, c.intermediate_size)));
  const int64_t embed = mul(c.vocab_size, c.hidden_size);
  mul(4, add(mul(c.num_layers, layer), mul(2, embed)));
  mul(4, mul(mul(2, c.num_layers), mul(kv, c.max_position_embeddings)));
  return 0;
}
