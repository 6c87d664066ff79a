// argmax_cpu and sample_cpu: the single-row chain of Model::generate's first version; and
// sample_rows_cpu (further down): the batched chain's CPU twin, the oracle of sample_rows_cuda and
// the sampler of the CPU backend (runtime/sampler.h wraps it).
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
#include <functional>
#include <limits>
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

// ---------------------------------------------------------------------------------------------
// sample_rows_cpu: the batched chain's CPU twin (sampling.h). Plain loops over each row: apply the
// edits to a copy, rank by sorting 64-bit rank keys (a partial sort when top-k bounds the ranks
// that matter), then the integer-weight top-p, min-p and draw of sampling_math.h, in rank order.

namespace roofline {

namespace {

using namespace sampling;

// Log-softmax of the raw row: log of the normaliser, in double.
double raw_log_normaliser(const float* raw, int64_t vocab) {
  float mx = raw[0];
  for (int64_t i = 1; i < vocab; ++i) mx = std::max(mx, raw[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(raw[i]) - mx);
  return static_cast<double>(mx) + std::log(sum);
}

void write_logprobs(const SampleRowsParams& p, int64_t row, const float* raw, int32_t token,
                    int32_t num_top) {
  if (num_top < 0 || p.logprobs == nullptr) return;
  const int64_t vocab = p.vocab_size;
  const double log_z = raw_log_normaliser(raw, vocab);
  p.logprobs[row] = static_cast<float>(static_cast<double>(raw[token]) - log_z);
  if (p.top_ids == nullptr || p.max_top_logprobs == 0) return;
  std::vector<uint64_t> keys(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i)
    keys[static_cast<size_t>(i)] =
        rank_key(raw[i] == 0.0f ? 0.0f : raw[i], static_cast<int32_t>(i));
  const int64_t n = std::min<int64_t>(num_top, vocab);
  std::partial_sort(keys.begin(), keys.begin() + n, keys.end(), std::greater<uint64_t>());
  for (int32_t j = 0; j < p.max_top_logprobs; ++j) {
    const int64_t slot = row * p.max_top_logprobs + j;
    if (j < n) {
      const int32_t id = rank_key_id(keys[static_cast<size_t>(j)]);
      p.top_ids[slot] = id;
      p.top_logprobs[slot] = static_cast<float>(static_cast<double>(raw[id]) - log_z);
    } else {
      p.top_ids[slot] = -1;
      p.top_logprobs[slot] = -std::numeric_limits<float>::infinity();
    }
  }
}

// Checks the row's edit range and entries; returns false on any fault.
bool edits_valid(const SampleRowsParams& p, const SamplingRowParams& r) {
  if (r.edit_count < 0 || r.edit_begin < 0 || r.edit_begin > p.num_edits ||
      r.edit_count > p.num_edits - r.edit_begin)
    return false;
  if (r.edit_count > 0 && p.edits == nullptr) return false;
  std::vector<int32_t> tokens;
  tokens.reserve(static_cast<size_t>(r.edit_count));
  for (int32_t j = 0; j < r.edit_count; ++j) {
    const TokenEdit& e = p.edits[r.edit_begin + j];
    if (e.token < 0 || e.token >= p.vocab_size || e.generated_count < 0 ||
        (e.in_prompt != 0 && e.in_prompt != 1) || !is_finite(e.bias))
      return false;
    tokens.push_back(e.token);
  }
  std::sort(tokens.begin(), tokens.end());
  return std::adjacent_find(tokens.begin(), tokens.end()) == tokens.end();
}

// Greedy decoding of one finite row: the argmax of the edited row (the lower id on ties), without
// materialising it — the best unedited logit against each edited value. The engine samples every
// row of every step through here, so it reads the row once and allocates nothing per call.
int32_t greedy_token(const SampleRowsParams& p, const float* raw, const SamplingRowParams& r,
                     uint32_t* error) {
  if (r.edit_count == 0) return argmax_cpu(raw, p.vocab_size);
  thread_local std::vector<uint8_t> edited;  // [vocab] flags, all clear between calls
  if (edited.size() < static_cast<size_t>(p.vocab_size))
    edited.resize(static_cast<size_t>(p.vocab_size), 0);
  const TokenEdit* edits = p.edits + r.edit_begin;
  for (int32_t j = 0; j < r.edit_count; ++j) edited[static_cast<size_t>(edits[j].token)] = 1;
  int64_t best = -1;
  float best_value = 0.0f;
  for (int64_t i = 0; i < p.vocab_size; ++i) {
    if (edited[static_cast<size_t>(i)] != 0) continue;
    if (best < 0 || raw[i] > best_value) {  // strict: the lower index keeps a tie
      best = i;
      best_value = raw[i];
    }
  }
  for (int32_t j = 0; j < r.edit_count; ++j) edited[static_cast<size_t>(edits[j].token)] = 0;
  for (int32_t j = 0; j < r.edit_count; ++j) {
    const TokenEdit& e = edits[j];
    const float v =
        apply_edit(raw[e.token], e, r.repetition_penalty, r.frequency_penalty, r.presence_penalty);
    // Only an overflow to inf followed by inf - inf gets here: parameters far outside sense.
    if (std::isnan(v)) {
      *error |= kSamplingBadEdits;
      return -1;
    }
    if (best < 0 || v > best_value || (v == best_value && e.token < best)) {
      best = e.token;
      best_value = v;
    }
  }
  return static_cast<int32_t>(best);
}

// The chain on one row of f32 logits; returns the token and sets *error.
int32_t sample_row(const SampleRowsParams& p, const float* raw, const SamplingRowParams& r,
                   uint32_t* error, int32_t* nonfinite) {
  const int64_t vocab = p.vocab_size;
  *error = 0;
  if (!sampling_row_params_valid(r, p.max_top_logprobs)) *error |= kSamplingBadParams;
  const bool edits_ok = edits_valid(p, r);
  if (!edits_ok) *error |= kSamplingBadEdits;
  int32_t bad = 0;
  for (int64_t i = 0; i < vocab; ++i) bad += is_finite(raw[i]) ? 0 : 1;
  *nonfinite = bad;
  if (bad > 0) *error |= kSamplingNonFiniteLogits;
  if (*error != 0) return -1;

  if (r.temperature == 0.0f) return greedy_token(p, raw, r, error);

  std::vector<float> x(raw, raw + vocab);
  for (int32_t j = 0; j < r.edit_count; ++j) {
    const TokenEdit& e = p.edits[r.edit_begin + j];
    x[static_cast<size_t>(e.token)] =
        apply_edit(raw[e.token], e, r.repetition_penalty, r.frequency_penalty, r.presence_penalty);
    // Only an overflow to inf followed by inf - inf gets here: parameters far outside sense.
    if (std::isnan(x[static_cast<size_t>(e.token)])) {
      *error |= kSamplingBadEdits;
      return -1;
    }
  }

  std::vector<uint64_t> keys(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i)
    keys[static_cast<size_t>(i)] =
        rank_key(scaled_logit(x[static_cast<size_t>(i)], r.temperature), static_cast<int32_t>(i));
  const int64_t n = r.top_k > 0 && r.top_k < vocab ? r.top_k : vocab;
  if (n < vocab) {
    std::nth_element(keys.begin(), keys.begin() + (n - 1), keys.end(), std::greater<uint64_t>());
    std::sort(keys.begin(), keys.begin() + n, std::greater<uint64_t>());
  } else {
    std::sort(keys.begin(), keys.end(), std::greater<uint64_t>());
  }
  const float s_max = rank_key_value(keys[0]);
  if (!is_finite(s_max)) return rank_key_id(keys[0]);

  std::vector<float> rel(static_cast<size_t>(n));
  std::vector<uint64_t> w(static_cast<size_t>(n));
  uint64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    rel[static_cast<size_t>(i)] =
        relative_prob(rank_key_value(keys[static_cast<size_t>(i)]), s_max);
    w[static_cast<size_t>(i)] = weight_of(rel[static_cast<size_t>(i)]);
    total += w[static_cast<size_t>(i)];
  }
  int64_t kept = n;
  if (r.top_p < 1.0f) {
    const uint64_t threshold = top_p_threshold(r.top_p, total);
    uint64_t cumulative = 0;
    for (int64_t i = 0; i < n; ++i) {
      cumulative += w[static_cast<size_t>(i)];
      if (cumulative >= threshold) {
        kept = i + 1;
        break;
      }
    }
  }
  uint64_t kept_total = 0;
  for (int64_t i = 0; i < kept; ++i)
    if (rel[static_cast<size_t>(i)] >= r.min_p) kept_total += w[static_cast<size_t>(i)];
  const uint64_t u = uniform_below(draw_bits(r.seed, r.step), kept_total);
  uint64_t cumulative = 0;
  for (int64_t i = 0; i < kept; ++i) {
    if (!(rel[static_cast<size_t>(i)] >= r.min_p)) continue;
    cumulative += w[static_cast<size_t>(i)];
    if (cumulative > u) return rank_key_id(keys[static_cast<size_t>(i)]);
  }
  ROOFLINE_CHECK_MSG(false, "the draw ran past the kept tokens");
  return -1;
}

}  // namespace

void sample_rows_cpu(const SampleRowsParams& p) {
  ROOFLINE_CHECK_MSG(p.vocab_size >= 1 && p.vocab_size <= kMaxVocab,
                     "sample_rows: vocab_size must be in [1, 2^18]");
  ROOFLINE_CHECK_MSG(p.dtype == DType::kF32 || p.dtype == DType::kBF16,
                     "sample_rows reads f32 or bf16 logits");
  ROOFLINE_CHECK(p.num_rows >= 0 && p.num_edits >= 0);
  ROOFLINE_CHECK(p.max_top_logprobs >= 0 && p.max_top_logprobs <= kMaxTopLogprobs);
  if (p.num_rows == 0) return;
  ROOFLINE_CHECK(p.logits != nullptr && p.rows != nullptr && p.tokens != nullptr &&
                 p.errors != nullptr);
  ROOFLINE_CHECK((p.top_ids == nullptr) == (p.top_logprobs == nullptr));
  // f32 rows are read in place; bf16 rows are widened into one reused buffer.
  thread_local std::vector<float> widened;
  const int64_t row_bytes = p.vocab_size * dtype_size_bytes(p.dtype);
  for (int64_t r = 0; r < p.num_rows; ++r) {
    const uint8_t* src = static_cast<const uint8_t*>(p.logits) + r * row_bytes;
    const float* row = reinterpret_cast<const float*>(src);
    if (p.dtype != DType::kF32) {
      widened.resize(static_cast<size_t>(p.vocab_size));
      convert_to_f32(src, p.dtype, p.vocab_size, widened.data());
      row = widened.data();
    }
    uint32_t error = 0;
    int32_t nonfinite = 0;
    const int32_t token = sample_row(p, row, p.rows[r], &error, &nonfinite);
    p.tokens[r] = token;
    p.errors[r] = error;
    if (p.nonfinite_counts) p.nonfinite_counts[r] = nonfinite;
    if (error == 0) write_logprobs(p, r, row, token, p.rows[r].num_top_logprobs);
  }
}

}  // namespace roofline
