// The sampling chain's reference stages and Sampler (a one-row sample_rows_cpu).
//
// Probabilities and sums are in double over f32 logits, as sample_cpu (ops/sampling): without
// penalties and min-p the chain draws exactly the token sample_cpu draws for the same uniform.
// A candidate list whose best logit is infinite (+inf, or every logit -inf) has no softmax: the
// best candidate is the only sensible pick, and every stage keeps just it.
#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace roofline {

namespace {
// exp(logit - best) of each candidate; false (and nothing filled) when the best is not finite.
bool relative_probs(const Candidates& c, std::vector<double>* p) {
  p->clear();
  if (c.ids.empty() || !std::isfinite(c.logits[0])) return false;
  const double best = c.logits[0];
  for (float l : c.logits) p->push_back(std::exp(static_cast<double>(l) - best));
  return true;
}

void truncate(Candidates& c, size_t n) {
  c.ids.resize(std::min(n, c.ids.size()));
  c.logits.resize(c.ids.size());
}
}  // namespace

void apply_penalties(float* logits, int64_t vocab_size, const SamplerSettings& s,
                     const std::unordered_set<int32_t>& seen,
                     const std::unordered_map<int32_t, int32_t>& generated_counts) {
  if (s.repetition_penalty != 1.0f) {
    for (int32_t id : seen) {
      if (id < 0 || id >= vocab_size) continue;
      float& l = logits[id];
      l = l > 0.0f ? l / s.repetition_penalty : l * s.repetition_penalty;
    }
  }
  if (s.frequency_penalty != 0.0f || s.presence_penalty != 0.0f) {
    for (const auto& [id, count] : generated_counts) {
      if (id < 0 || id >= vocab_size || count <= 0) continue;
      logits[id] -= s.frequency_penalty * static_cast<float>(count) + s.presence_penalty;
    }
  }
}

void apply_temperature(float* logits, int64_t vocab_size, float temperature) {
  ROOFLINE_CHECK(temperature > 0.0f);
  for (int64_t i = 0; i < vocab_size; ++i) logits[i] /= temperature;
}

Candidates rank_candidates(const float* logits, int64_t vocab_size, int32_t limit) {
  ROOFLINE_CHECK(vocab_size >= 0 && vocab_size <= INT32_MAX);
  std::vector<int32_t> order;
  order.reserve(static_cast<size_t>(vocab_size));
  for (int64_t i = 0; i < vocab_size; ++i)
    if (!std::isnan(logits[i])) order.push_back(static_cast<int32_t>(i));
  auto better = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (limit > 0 && static_cast<size_t>(limit) < order.size()) {
    std::partial_sort(order.begin(), order.begin() + limit, order.end(), better);
    order.resize(static_cast<size_t>(limit));
  } else {
    std::sort(order.begin(), order.end(), better);
  }
  Candidates c;
  c.ids = std::move(order);
  c.logits.reserve(c.ids.size());
  for (int32_t id : c.ids) c.logits.push_back(logits[id]);
  return c;
}

void apply_top_k(Candidates& c, int32_t top_k) {
  if (top_k > 0) truncate(c, static_cast<size_t>(top_k));
}

void apply_top_p(Candidates& c, float top_p) {
  if (!(top_p < 1.0f) || c.ids.empty()) return;
  std::vector<double> p;
  if (!relative_probs(c, &p)) return truncate(c, 1);
  double total = 0.0;
  for (double x : p) total += x;
  double mass_before = 0.0;
  size_t r = 0;
  for (; r < p.size(); ++r) {
    if (r > 0 && !(mass_before < static_cast<double>(top_p))) break;
    mass_before += p[r] / total;
  }
  truncate(c, r);
}

void apply_min_p(Candidates& c, float min_p) {
  if (!(min_p > 0.0f) || c.ids.empty()) return;
  std::vector<double> p;
  if (!relative_probs(c, &p)) return truncate(c, 1);
  // p is relative to the best candidate (p[0] = 1), so the cut is min_p itself. Candidates are
  // ranked, so everything after the first one below the cut is below it too.
  size_t r = 1;
  while (r < p.size() && p[r] >= static_cast<double>(min_p)) ++r;
  truncate(c, r);
}

int32_t draw_candidate(const Candidates& c, double uniform) {
  if (c.ids.empty()) return -1;
  std::vector<double> p;
  if (!relative_probs(c, &p)) return c.ids[0];
  double total = 0.0;
  for (double x : p) total += x;
  const double target = uniform * total;
  double cumulative = 0.0;
  size_t last_positive = 0;
  for (size_t r = 0; r < p.size(); ++r) {
    if (p[r] <= 0.0) continue;
    cumulative += p[r];
    last_positive = r;
    if (cumulative > target) return c.ids[r];
  }
  // Only reached through rounding when uniform is within an ulp of 1: the last drawable token.
  return c.ids[last_positive];
}

void apply_logit_bias(float* logits, int64_t vocab_size,
                      const std::vector<std::pair<int32_t, float>>& bias) {
  for (const auto& [token, b] : bias)
    if (token >= 0 && token < vocab_size) logits[token] += b;
}

Sampler::Sampler(const SamplerSettings& settings, uint64_t seed)
    : settings_(settings), seed_(seed) {
  // One entry per biased token; a token named twice gets the sum of its biases (added in list
  // order, so the same floats as adding them one after the other to a zero).
  for (const auto& [token, bias] : settings_.logit_bias) {
    if (token < 0) continue;  // the engine validates ids; out-of-range ones are ignored, as before
    TokenEdit& e = edit_for(token);
    e.bias += bias;
  }
}

TokenEdit& Sampler::edit_for(int32_t token) {
  auto [it, added] = edit_index_.emplace(token, edits_.size());
  if (added) edits_.push_back(TokenEdit{token, 0.0f, 0, 0});
  return edits_[it->second];
}

void Sampler::set_prompt(const std::vector<int32_t>& prompt) {
  if (settings_.repetition_penalty == 1.0f) return;
  for (int32_t id : prompt)
    if (id >= 0) edit_for(id).in_prompt = 1;
}

SamplingRowParams Sampler::next_row(int64_t vocab_size, std::vector<TokenEdit>* edits,
                                    int64_t ahead) const {
  SamplingRowParams row;
  row.temperature = settings_.temperature;
  row.top_k = settings_.top_k;
  row.top_p = settings_.top_p;
  row.min_p = settings_.min_p;
  row.repetition_penalty = settings_.repetition_penalty;
  row.frequency_penalty = settings_.frequency_penalty;
  row.presence_penalty = settings_.presence_penalty;
  row.seed = seed_;
  row.step = step_ + ahead;
  row.edit_begin = static_cast<int64_t>(edits->size());
  // Edits naming tokens past this vocabulary are left out (apply_logit_bias ignores them too).
  for (const TokenEdit& e : edits_)
    if (e.token < vocab_size) edits->push_back(e);
  row.edit_count = static_cast<int32_t>(static_cast<int64_t>(edits->size()) - row.edit_begin);
  return row;
}

void Sampler::accept(int32_t token, uint32_t errors, int32_t nonfinite) {
  last_error_ = errors;
  last_nonfinite_ = nonfinite;
  ++step_;
  if (token >= 0) {
    const bool repetition = settings_.repetition_penalty != 1.0f;
    const bool counted = settings_.frequency_penalty != 0.0f || settings_.presence_penalty != 0.0f;
    if (repetition || counted) ++edit_for(token).generated_count;
  }
}

int32_t Sampler::sample(const float* logits, int64_t vocab_size) {
  std::vector<TokenEdit> edits;
  SamplingRowParams row = next_row(vocab_size, &edits);
  row.edit_begin = 0;
  int32_t token = -1;
  uint32_t errors = 0;
  int32_t nonfinite = 0;
  SampleRowsParams p;
  p.logits = logits;
  p.rows = &row;
  p.edits = edits.data();
  p.num_edits = static_cast<int64_t>(edits.size());
  p.num_rows = 1;
  p.vocab_size = vocab_size;
  p.dtype = DType::kF32;
  p.tokens = &token;
  p.errors = &errors;
  p.nonfinite_counts = &nonfinite;
  sample_rows_cpu(p);
  accept(token, errors, nonfinite);
  return token;
}

}  // namespace roofline
