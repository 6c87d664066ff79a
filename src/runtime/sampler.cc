// Rng, the sampling chain's stages and Sampler.
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
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

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

void Sampler::set_prompt(const std::vector<int32_t>& prompt) {
  if (settings_.repetition_penalty != 1.0f) seen_.insert(prompt.begin(), prompt.end());
}

bool Sampler::has_penalties() const {
  return settings_.repetition_penalty != 1.0f || settings_.frequency_penalty != 0.0f ||
         settings_.presence_penalty != 0.0f;
}

void apply_logit_bias(float* logits, int64_t vocab_size,
                      const std::vector<std::pair<int32_t, float>>& bias) {
  for (const auto& [token, b] : bias)
    if (token >= 0 && token < vocab_size) logits[token] += b;
}

int32_t Sampler::sample(const float* logits, int64_t vocab_size) {
  const float* row = logits;
  const bool greedy = !(settings_.temperature > 0.0f);
  if (has_penalties() || !greedy || !settings_.logit_bias.empty()) {
    scratch_.assign(logits, logits + vocab_size);
    apply_logit_bias(scratch_.data(), vocab_size, settings_.logit_bias);
    apply_penalties(scratch_.data(), vocab_size, settings_, seen_, generated_counts_);
    row = scratch_.data();
  }
  int32_t token;
  if (greedy) {
    token = argmax_cpu(row, vocab_size);
  } else {
    apply_temperature(scratch_.data(), vocab_size, settings_.temperature);
    Candidates c = rank_candidates(row, vocab_size, settings_.top_k);
    apply_top_k(c, settings_.top_k);
    apply_top_p(c, settings_.top_p);
    apply_min_p(c, settings_.min_p);
    token = draw_candidate(c, rng_.next_uniform());
  }
  if (token >= 0) {
    if (settings_.repetition_penalty != 1.0f) seen_.insert(token);
    if (settings_.frequency_penalty != 0.0f || settings_.presence_penalty != 0.0f)
      ++generated_counts_[token];
  }
  return token;
}

}  // namespace roofline
