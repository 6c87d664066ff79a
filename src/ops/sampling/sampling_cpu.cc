// argmax_cpu and sample_cpu: the host-side sampling chain and the oracle for the fused GPU sampler.
//
// sample_cpu applies, in Hugging Face's order: temperature (logits / T in f32), top-k, top-p, then
// draws by inverse CDF. Conventions, all deterministic for a given uniform:
// - Tokens are ranked by scaled logit, descending; equal logits rank the lower token id first.
//   NaN logits are never kept.
// - top-k keeps exactly the first k ranked tokens. (HF also keeps tokens tied with the k-th one;
//   exact k makes top_k = 1 the same as argmax.)
// - top-p, as HF's TopPLogitsWarper: over the softmax of the top-k survivors, token r (in rank
//   order) is kept while the probability mass of the tokens ranked before it is < top_p; the first
//   token is always kept. top_p >= 1 keeps everything.
// - The draw returns the first kept token whose cumulative probability exceeds uniform · (kept
//   mass), so tokens of zero probability are never drawn.
// Probabilities and sums are in double: this is a per-step host computation over one row, and
// double keeps the CPU draw away from rounding ties with the reference.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "ops/sampling/sampling.h"

namespace roofline {

int32_t argmax_cpu(const float* logits, int64_t vocab_size) {
  ROOFLINE_CHECK(vocab_size >= 0 && vocab_size <= INT32_MAX);
  int64_t best = -1;
  for (int64_t i = 0; i < vocab_size; ++i) {
    if (std::isnan(logits[i])) continue;
    if (best < 0 || logits[i] > logits[best]) best = i;  // strict: the lower index keeps a tie
  }
  // -1 when every logit is NaN (the model produced garbage); the caller decides what to do.
  return static_cast<int32_t>(best);
}

void argmax_rows_cpu(const ArgmaxParams& p) {
  ROOFLINE_CHECK(p.num_rows >= 0 && p.vocab_size >= 0 && p.vocab_size < INT32_MAX);
  ROOFLINE_CHECK_MSG(p.dtype == DType::kF32 || p.dtype == DType::kBF16,
                     "argmax reads f32 or bf16 logits");
  if (p.num_rows == 0) return;
  ROOFLINE_CHECK(p.out != nullptr && (p.logits != nullptr || p.vocab_size == 0));
  std::vector<float> row(static_cast<size_t>(p.vocab_size));
  const int64_t row_bytes = p.vocab_size * dtype_size_bytes(p.dtype);
  for (int64_t r = 0; r < p.num_rows; ++r) {
    const void* src = static_cast<const uint8_t*>(p.logits) + r * row_bytes;
    if (p.dtype == DType::kF32) {
      p.out[r] = argmax_cpu(static_cast<const float*>(src), p.vocab_size);
    } else {
      convert_to_f32(src, p.dtype, p.vocab_size, row.data());
      p.out[r] = argmax_cpu(row.data(), p.vocab_size);
    }
  }
}

int32_t sample_cpu(const float* logits, int64_t vocab_size, const SamplingConfig& config,
                   double uniform) {
  if (!(config.temperature > 0.0f)) return argmax_cpu(logits, vocab_size);
  ROOFLINE_CHECK(vocab_size >= 0 && vocab_size <= INT32_MAX);

  std::vector<float> scaled;
  std::vector<int32_t> order;
  scaled.reserve(static_cast<size_t>(vocab_size));
  for (int64_t i = 0; i < vocab_size; ++i) {
    scaled.push_back(logits[i] / config.temperature);
    if (!std::isnan(logits[i])) order.push_back(static_cast<int32_t>(i));
  }
  if (order.empty()) return -1;  // all NaN, as argmax_cpu

  auto ranks_before = [&](int32_t a, int32_t b) {
    const float la = scaled[static_cast<size_t>(a)];
    const float lb = scaled[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  size_t kept = order.size();
  if (config.top_k > 0 && static_cast<size_t>(config.top_k) < kept) {
    kept = static_cast<size_t>(config.top_k);
    // Only the k best need ranking.
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept), order.end(),
                      ranks_before);
  } else {
    std::sort(order.begin(), order.end(), ranks_before);
  }

  // Softmax over the survivors of top-k, max subtracted (order[0] holds the max). An infinite
  // max (all -inf, or a +inf logit) has no softmax: the top-ranked token is the only sensible pick.
  const double max_logit = scaled[static_cast<size_t>(order[0])];
  if (!std::isfinite(max_logit)) return order[0];
  std::vector<double> probs(kept);
  double total = 0.0;
  for (size_t r = 0; r < kept; ++r) {
    probs[r] = std::exp(static_cast<double>(scaled[static_cast<size_t>(order[r])]) - max_logit);
    total += probs[r];
  }
  if (config.top_p < 1.0f) {
    const double top_p = config.top_p;
    double mass_before = 0.0;
    size_t r = 0;
    for (; r < kept; ++r) {
      if (r > 0 && !(mass_before < top_p)) break;
      mass_before += probs[r] / total;
    }
    kept = r;
  }

  double kept_mass = 0.0;
  for (size_t r = 0; r < kept; ++r) kept_mass += probs[r];
  const double target = uniform * kept_mass;
  double cumulative = 0.0;
  size_t last_positive = 0;
  for (size_t r = 0; r < kept; ++r) {
    if (probs[r] <= 0.0) continue;
    cumulative += probs[r];
    last_positive = r;
    if (cumulative > target) return order[r];
  }
  // Only reached through rounding when uniform is within an ulp of 1: the last drawable token.
  return order[last_positive];
}

}  // namespace roofline
