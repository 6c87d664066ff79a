// argmax_cpu and sample_cpu: argmax ties and NaNs; sample_cpu against an independent reference
// written here in double (HF's formulation of top-p: drop the ascending-order tail whose
// cumulative probability is <= 1 - top_p), and the observable effect of each knob, measured by
// sweeping the uniform over a fine grid (the fraction of the grid that draws a token is its
// probability, to within the grid step). Then sample_rows_cpu, the batched chain's twin (further
// down): its arithmetic, each stage on hand-computed rows, ties, errors, reproducibility.
#include "ops/sampling/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>
#include <utility>
#include <vector>

#include "ops/sampling/sampling_test_util.h"
#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

using testing::make_rng;
using testing::random_vector;
using testing::seed_note;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// The reference: rank by (scaled logit desc, id asc); keep k; softmax; HF top-p; inverse CDF.
int32_t reference_sample(const std::vector<float>& logits, const SamplingConfig& cfg, double u) {
  std::vector<std::pair<float, int32_t>> ranked;  // (scaled logit, id)
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isnan(logits[i]))
      ranked.push_back({logits[i] / cfg.temperature, static_cast<int32_t>(i)});
  }
  if (ranked.empty()) return -1;
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (cfg.top_k > 0 && ranked.size() > static_cast<size_t>(cfg.top_k))
    ranked.resize(static_cast<size_t>(cfg.top_k));
  std::vector<double> p;
  double sum = 0.0;
  for (const auto& r : ranked) {
    p.push_back(std::exp(static_cast<double>(r.first) - ranked[0].first));
    sum += p.back();
  }
  for (double& x : p) x /= sum;
  size_t keep = p.size();
  if (cfg.top_p < 1.0f) {
    // HF: ascending cumulative sums; remove where cumsum <= 1 - top_p; keep at least one.
    double cum = 0.0;
    size_t removed = 0;
    for (size_t i = p.size(); i-- > 1;) {
      cum += p[i];
      if (cum <= 1.0 - static_cast<double>(cfg.top_p))
        ++removed;
      else
        break;
    }
    keep = p.size() - removed;
  }
  const double kept_mass =
      std::accumulate(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  double cum = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    cum += p[i] / kept_mass;
    if (u < cum) return ranked[i].second;
  }
  return ranked[keep - 1].second;
}

// Fraction of a uniform grid of kSteps points that draws each token.
constexpr int kSteps = 20000;
std::map<int32_t, double> draw_frequencies(const std::vector<float>& logits,
                                           const SamplingConfig& cfg) {
  std::map<int32_t, double> freq;
  for (int i = 0; i < kSteps; ++i) {
    const double u = (i + 0.5) / kSteps;
    freq[sample_cpu(logits.data(), static_cast<int64_t>(logits.size()), cfg, u)] += 1.0 / kSteps;
  }
  return freq;
}

TEST(ArgmaxTest, LowestIndexWinsTies) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 3.0f};
  EXPECT_EQ(argmax_cpu(logits.data(), 5), 1);
}

TEST(ArgmaxTest, NeverPicksNaN) {
  const std::vector<float> logits = {kNaN, -1.0f, kNaN, 2.0f, kNaN};
  EXPECT_EQ(argmax_cpu(logits.data(), 5), 3);
  const std::vector<float> first_nan = {kNaN, -5.0f};
  EXPECT_EQ(argmax_cpu(first_nan.data(), 2), 1);
}

TEST(ArgmaxTest, AllNaNReturnsMinusOne) {
  const std::vector<float> logits = {kNaN, kNaN, kNaN};
  EXPECT_EQ(argmax_cpu(logits.data(), 3), -1);
  EXPECT_EQ(sample_cpu(logits.data(), 3, {1.0f, 0, 1.0f}, 0.5), -1);
}

TEST(ArgmaxTest, InfinitiesAreOrdinaryValues) {
  const std::vector<float> logits = {-kInf, 0.0f, kInf, kInf};
  EXPECT_EQ(argmax_cpu(logits.data(), 4), 2);
  const std::vector<float> all_minus_inf = {-kInf, -kInf};
  EXPECT_EQ(argmax_cpu(all_minus_inf.data(), 2), 0);
  EXPECT_EQ(sample_cpu(all_minus_inf.data(), 2, {1.0f, 0, 1.0f}, 0.7), 0);
}

TEST(ArgmaxTest, MatchesLinearScanOnRandomRows) {
  auto rng = make_rng(1);
  for (int trial = 0; trial < 20; ++trial) {
    auto logits = random_vector(1 + 37 * trial, rng, -5.0f, 5.0f);
    const auto expected = std::max_element(logits.begin(), logits.end()) - logits.begin();
    EXPECT_EQ(argmax_cpu(logits.data(), static_cast<int64_t>(logits.size())), expected)
        << seed_note();
  }
}

TEST(SampleTest, NonPositiveTemperatureIsGreedy) {
  auto rng = make_rng(2);
  auto logits = random_vector(1000, rng, -5.0f, 5.0f);
  const int32_t greedy = argmax_cpu(logits.data(), 1000);
  for (float t : {0.0f, -1.0f}) {
    for (double u : {0.0, 0.3, 0.999})
      EXPECT_EQ(sample_cpu(logits.data(), 1000, {t, 0, 1.0f}, u), greedy);
  }
}

TEST(SampleTest, TopKOneEqualsArgmax) {
  auto rng = make_rng(3);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  for (int trial = 0; trial < 50; ++trial) {
    auto logits = random_vector(500, rng, -3.0f, 3.0f);
    logits[static_cast<size_t>(trial * 7)] = 3.0f;  // and a tie with a later token now and then
    logits[static_cast<size_t>(trial * 7 + 100)] = 3.0f;
    const float temperature = 0.25f + 0.1f * static_cast<float>(trial);
    EXPECT_EQ(sample_cpu(logits.data(), 500, {temperature, 1, 1.0f}, uni(rng)),
              argmax_cpu(logits.data(), 500))
        << seed_note();
  }
}

class SampleReferenceTest : public ::testing::TestWithParam<std::tuple<float, int32_t, float>> {};

TEST_P(SampleReferenceTest, DrawEqualsReferenceInverseCdf) {
  const auto [temperature, top_k, top_p] = GetParam();
  const SamplingConfig cfg{temperature, top_k, top_p};
  auto rng = make_rng(static_cast<uint64_t>(temperature * 1000) * 1000003 +
                      static_cast<uint64_t>(top_k) * 1009 + static_cast<uint64_t>(top_p * 1000));
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  for (int trial = 0; trial < 20; ++trial) {
    auto logits = random_vector(257, rng, -4.0f, 4.0f);
    logits[3] = kNaN;              // never drawn
    logits[5] = logits[6] = 2.5f;  // a tie, broken by id
    for (int draw = 0; draw < 50; ++draw) {
      const double u = uni(rng);
      ASSERT_EQ(sample_cpu(logits.data(), 257, cfg, u), reference_sample(logits, cfg, u))
          << "u " << u << "; " << seed_note();
    }
    ASSERT_EQ(sample_cpu(logits.data(), 257, cfg, 0.0), reference_sample(logits, cfg, 0.0));
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, SampleReferenceTest,
                         ::testing::Combine(::testing::Values(0.3f, 1.0f, 2.5f),
                                            ::testing::Values(0, 1, 5, 50, 300),
                                            ::testing::Values(0.05f, 0.5f, 0.9f, 1.0f)));

TEST(SampleTest, TopPKeepsSmallestPrefixReachingTopP) {
  // Probabilities ≈ 0.5, 0.3, 0.2 (logits are their logs). Token r is kept while the mass ranked
  // before it is < top_p: top_p 0.49 keeps {0}, 0.51 keeps {0, 1}, 0.79 keeps {0, 1},
  // 0.81 keeps all three.
  const std::vector<float> logits = {std::log(0.3f), std::log(0.5f), std::log(0.2f)};
  auto kept = [&](float top_p) {
    std::vector<int32_t> ids;
    for (const auto& [id, f] : draw_frequencies(logits, {1.0f, 0, top_p})) ids.push_back(id);
    return ids;
  };
  EXPECT_EQ(kept(0.01f), (std::vector<int32_t>{1}));
  EXPECT_EQ(kept(0.49f), (std::vector<int32_t>{1}));
  EXPECT_EQ(kept(0.51f), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(kept(0.79f), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(kept(0.81f), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(kept(1.0f), (std::vector<int32_t>{0, 1, 2}));
  // The kept tokens are renormalised: with {0, 1} kept, token 1 draws 0.5 / 0.8 of the time.
  auto freq = draw_frequencies(logits, {1.0f, 0, 0.6f});
  EXPECT_NEAR(freq[1], 0.625, 2.0 / kSteps);
  EXPECT_NEAR(freq[0], 0.375, 2.0 / kSteps);
}

TEST(SampleTest, TopPBoundaryIsExclusive) {
  // Equal logits give probabilities that are exact binary fractions, so the boundary case
  // "mass before the token == top_p" really happens: that token is dropped (HF drops the tail
  // whose cumulative probability is <= 1 - top_p).
  const std::vector<float> two = {1.0f, 1.0f};
  EXPECT_EQ(draw_frequencies(two, {1.0f, 0, 0.5f}).size(), 1u);
  const std::vector<float> four = {2.0f, 2.0f, 2.0f, 2.0f};
  const auto half = draw_frequencies(four, {1.0f, 0, 0.5f});
  EXPECT_EQ(half.size(), 2u);
  EXPECT_TRUE(half.count(0) && half.count(1));  // ties rank the lower ids first
  EXPECT_EQ(draw_frequencies(four, {1.0f, 0, 0.75f}).size(), 3u);
  EXPECT_EQ(draw_frequencies(four, {1.0f, 0, 0.76f}).size(), 4u);
}

TEST(SampleTest, TemperatureReshapesTheDistribution) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, 0.5f};
  for (float t : {0.5f, 1.0f, 2.0f, 10.0f}) {
    double z = 0.0;
    for (float l : logits) z += std::exp(l / t);
    const auto freq = draw_frequencies(logits, {t, 0, 1.0f});
    for (int32_t id = 0; id < 4; ++id) {
      const double expected = std::exp(logits[static_cast<size_t>(id)] / t) / z;
      const auto it = freq.find(id);
      EXPECT_NEAR(it == freq.end() ? 0.0 : it->second, expected, 2.0 / kSteps)
          << "temperature " << t << " token " << id;
    }
  }
  // Colder is greedier: the top token's share grows as the temperature falls.
  EXPECT_GT(draw_frequencies(logits, {0.5f, 0, 1.0f})[2],
            draw_frequencies(logits, {2.0f, 0, 1.0f})[2]);
}

TEST(SampleTest, TopKRestrictsToTheKBest) {
  const std::vector<float> logits = {0.0f, 4.0f, 1.0f, 4.0f, 3.0f, -1.0f};
  // Ranked: 1, 3 (tie, lower id first), 4, 2, 0, 5.
  std::vector<int32_t> ids;
  for (const auto& [id, f] : draw_frequencies(logits, {1.0f, 3, 1.0f})) ids.push_back(id);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 3, 4}));
  ids.clear();
  for (const auto& [id, f] : draw_frequencies(logits, {1.0f, 1, 1.0f})) ids.push_back(id);
  EXPECT_EQ(ids, (std::vector<int32_t>{1}));
}

TEST(SampleTest, UniformEdgesStayInRange) {
  const std::vector<float> logits = {0.0f, -kInf, 1.0f, -kInf};
  const SamplingConfig cfg{1.0f, 0, 1.0f};
  EXPECT_EQ(sample_cpu(logits.data(), 4, cfg, 0.0), 2);  // the most likely token comes first
  // Just below 1 draws the last token with probability > 0, never a -inf one.
  EXPECT_EQ(sample_cpu(logits.data(), 4, cfg, std::nextafter(1.0, 0.0)), 0);
}

}  // namespace
}  // namespace roofline

// ---------------------------------------------------------------------------------------------
// sample_rows_cpu, the batched chain's CPU twin: its arithmetic (sampling_math.h) against known
// answers, each stage against hand-computed cases, ties, errors per row, and reproducibility
// whatever the batch holds.

namespace roofline {
namespace {

using sampling::TokenEdit;

using RowsResult = testing::SampleRowsResult;

// Runs sample_rows_cpu on rows of f32 logits [rows.size(), vocab]; outputs poisoned first.
RowsResult run_rows(const std::vector<float>& logits, int64_t vocab,
                    const std::vector<SamplingRowParams>& rows,
                    const std::vector<TokenEdit>& edits = {}, int32_t max_top = 0) {
  const size_t n = rows.size();
  RowsResult r = RowsResult::poisoned(n, max_top);
  SampleRowsParams p;
  p.logits = logits.data();
  p.rows = rows.data();
  p.edits = edits.data();
  p.num_edits = static_cast<int64_t>(edits.size());
  p.num_rows = static_cast<int64_t>(n);
  p.vocab_size = vocab;
  r.bind(p, 0, max_top);
  sample_rows_cpu(p);
  return r;
}

SamplingRowParams sampled(float temperature, int32_t top_k = 0, float top_p = 1.0f,
                          float min_p = 0.0f, uint64_t seed = 1, int64_t step = 0) {
  SamplingRowParams r;
  r.temperature = temperature;
  r.top_k = top_k;
  r.top_p = top_p;
  r.min_p = min_p;
  r.seed = seed;
  r.step = step;
  return r;
}

// The set of tokens drawn from one row over `draws` seeds, with their frequencies.
std::map<int32_t, double> seed_frequencies(const std::vector<float>& logits, SamplingRowParams row,
                                           int draws, const std::vector<TokenEdit>& edits = {}) {
  std::vector<SamplingRowParams> rows(static_cast<size_t>(draws), row);
  std::vector<float> all;
  for (int i = 0; i < draws; ++i) {
    rows[static_cast<size_t>(i)].seed = 1000003ull * static_cast<uint64_t>(i) + 17;
    all.insert(all.end(), logits.begin(), logits.end());
  }
  const RowsResult r = run_rows(all, static_cast<int64_t>(logits.size()), rows, edits);
  std::map<int32_t, double> freq;
  for (int32_t t : r.tokens) freq[t] += 1.0 / draws;
  return freq;
}

std::vector<int32_t> ids_of(const std::map<int32_t, double>& freq) {
  std::vector<int32_t> ids;
  for (const auto& [id, f] : freq) ids.push_back(id);
  return ids;
}

TEST(SamplingMath, PhiloxKnownAnswers) {
  // Random123's kat_vectors for philox4x32_10 (counter words c0..c3, key words k0, k1).
  auto run = [](uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1) {
    return sampling::philox4x32_10((static_cast<uint64_t>(k1) << 32) | k0,
                                   (static_cast<uint64_t>(c1) << 32) | c0,
                                   (static_cast<uint64_t>(c3) << 32) | c2);
  };
  const auto zero = run(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(zero.v[0], 0x6627e8d5u);
  EXPECT_EQ(zero.v[1], 0xe169c58du);
  EXPECT_EQ(zero.v[2], 0xbc57ac4cu);
  EXPECT_EQ(zero.v[3], 0x9b00dbd8u);
  const auto ones = run(~0u, ~0u, ~0u, ~0u, ~0u, ~0u);
  EXPECT_EQ(ones.v[0], 0x408f276du);
  EXPECT_EQ(ones.v[1], 0x41c83b0eu);
  EXPECT_EQ(ones.v[2], 0xa20bc7c6u);
  EXPECT_EQ(ones.v[3], 0x6d5451fdu);
  const auto pi = run(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(pi.v[0], 0xd16cfe09u);
  EXPECT_EQ(pi.v[1], 0x94fdccebu);
  EXPECT_EQ(pi.v[2], 0x5001e420u);
  EXPECT_EQ(pi.v[3], 0x24126ea1u);
}

TEST(SamplingMath, ExpIsAccurateAndExactAtZero) {
  EXPECT_EQ(sampling::exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(sampling::exp_nonpositive(-0.0f), 1.0f);
  EXPECT_EQ(sampling::exp_nonpositive(-kInf), 0.0f);
  EXPECT_EQ(sampling::exp_nonpositive(-80.5f), 0.0f);
  EXPECT_EQ(sampling::weight_of(1.0f), uint64_t{1} << 45);
  auto rng = make_rng(31);
  std::uniform_real_distribution<float> d(-79.0f, 0.0f);
  for (int i = 0; i < 200000; ++i) {
    const float x = i < 1000 ? -static_cast<float>(i) * 0.0791f : d(rng);
    const double want = std::exp(static_cast<double>(x));
    ASSERT_NEAR(sampling::exp_nonpositive(x), want, want * 0x1p-21)
        << "x " << x << "; " << seed_note();
  }
}

TEST(SamplingMath, TopPThresholdIsExactCeiling) {
  EXPECT_EQ(sampling::top_p_threshold(0.5f, 10), 5u);
  EXPECT_EQ(sampling::top_p_threshold(0.75f, 8), 6u);
  EXPECT_EQ(sampling::top_p_threshold(0.75f, 9), 7u);  // 6.75
  EXPECT_EQ(sampling::top_p_threshold(0.5f, uint64_t{1} << 62), uint64_t{1} << 61);
  // 0.3f is 0.300000011920928955...: 0.3f * 10 is just above 3.
  EXPECT_EQ(sampling::top_p_threshold(0.3f, 10), 4u);
  EXPECT_EQ(sampling::top_p_threshold(1e-30f, uint64_t{1} << 50), 1u);
  EXPECT_EQ(sampling::top_p_threshold(std::nextafter(1.0f, 0.0f), 1u << 24), (1u << 24) - 1);
}

TEST(SamplingMath, UniformBelowStaysInRangeAndCoversIt) {
  std::vector<int> hits(7, 0);
  for (int64_t step = 0; step < 7000; ++step) {
    const uint64_t u = sampling::uniform_below(sampling::draw_bits(42, step), 7);
    ASSERT_LT(u, 7u);
    ++hits[static_cast<size_t>(u)];
  }
  for (int h : hits) EXPECT_NEAR(h, 1000, 150);  // > 4 sigma
  EXPECT_EQ(sampling::uniform_below(sampling::draw_bits(1, 2), 1), 0u);
}

TEST(SamplingMath, EditsFollowTheSamplerOrder) {
  // bias, then repetition (divide positive, multiply negative), then frequency * count + presence.
  TokenEdit e{3, 1.0f, 2, 0};
  EXPECT_FLOAT_EQ(sampling::apply_edit(2.0f, e, 2.0f, 0.5f, 0.25f), 3.0f / 2.0f - 1.25f);
  e = TokenEdit{3, 0.0f, 0, 1};  // prompt only: repetition, no frequency / presence
  EXPECT_FLOAT_EQ(sampling::apply_edit(-2.0f, e, 2.0f, 0.5f, 0.25f), -4.0f);
  e = TokenEdit{3, -5.0f, 0, 0};  // bias only
  EXPECT_FLOAT_EQ(sampling::apply_edit(2.0f, e, 2.0f, 0.5f, 0.25f), -3.0f);
}

TEST(SampleRowsTest, GreedyIsTheArgmaxOfTheEditedLogitsLowestIdOnTies) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 2.9f};
  EXPECT_EQ(run_rows(logits, 5, {SamplingRowParams{}}).tokens[0], 1);
  // Bias 1 down: 3 wins the tie now.
  EXPECT_EQ(run_rows(logits, 5, {[] {
                       SamplingRowParams r;
                       r.edit_count = 1;
                       return r;
                     }()},
                     {TokenEdit{1, -1.0f, 0, 0}})
                .tokens[0],
            3);
  // Repetition 2 on the generated token 1 and 3: 1.5 each; 4 (2.9) wins.
  SamplingRowParams rep;
  rep.repetition_penalty = 2.0f;
  rep.edit_count = 2;
  EXPECT_EQ(
      run_rows(logits, 5, {rep}, {TokenEdit{1, 0.0f, 1, 0}, TokenEdit{3, 0.0f, 0, 1}}).tokens[0],
      4);
  // Frequency 0.06 per occurrence: 3 - 0.12 = 2.88 < 2.9.
  SamplingRowParams freq;
  freq.frequency_penalty = 0.06f;
  freq.edit_begin = 1;
  freq.edit_count = 2;
  EXPECT_EQ(run_rows(logits, 5, {freq},
                     {TokenEdit{0, 9.0f, 0, 0}, TokenEdit{1, 0.0f, 2, 0}, TokenEdit{3, 0.0f, 2, 0}})
                .tokens[0],
            4);
}

TEST(SampleRowsTest, TopKKeepsTheKBestLowerIdsFirstOnTies) {
  const std::vector<float> logits = {0.0f, 4.0f, 1.0f, 4.0f, 3.0f, -1.0f};
  // Ranked: 1, 3 (tie, lower id first), 4, 2, 0, 5.
  EXPECT_EQ(ids_of(seed_frequencies(logits, sampled(1.0f, 3), 3000)),
            (std::vector<int32_t>{1, 3, 4}));
  EXPECT_EQ(ids_of(seed_frequencies(logits, sampled(1.0f, 2), 3000)), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(ids_of(seed_frequencies(logits, sampled(5.0f, 1), 500)), (std::vector<int32_t>{1}));
  EXPECT_EQ(ids_of(seed_frequencies(logits, sampled(1.0f, 6), 20000)).size(), 6u);
}

TEST(SampleRowsTest, TopPKeepsTheSmallestPrefixReachingTopP) {
  // Probabilities 0.5, 0.3, 0.2 (logits are their logs); rank 1, 0, 2.
  const std::vector<float> logits = {std::log(0.3f), std::log(0.5f), std::log(0.2f)};
  auto kept = [&](float top_p) {
    return ids_of(seed_frequencies(logits, sampled(1.0f, 0, top_p), 4000));
  };
  EXPECT_EQ(kept(0.01f), (std::vector<int32_t>{1}));
  EXPECT_EQ(kept(0.49f), (std::vector<int32_t>{1}));
  EXPECT_EQ(kept(0.51f), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(kept(0.79f), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(kept(0.81f), (std::vector<int32_t>{0, 1, 2}));
  // Renormalised: with {0, 1} kept, token 1 draws 0.5 / 0.8 of the time (5 sigma of 40000).
  const auto f = seed_frequencies(logits, sampled(1.0f, 0, 0.6f), 40000);
  EXPECT_NEAR(f.at(1), 0.625, 5 * std::sqrt(0.625 * 0.375 / 40000));
  // The boundary is exclusive: equal logits have exactly equal weights, and a token whose mass
  // before is exactly top_p is dropped.
  EXPECT_EQ(ids_of(seed_frequencies({1.0f, 1.0f}, sampled(1.0f, 0, 0.5f), 500)),
            (std::vector<int32_t>{0}));
  EXPECT_EQ(ids_of(seed_frequencies({2.0f, 2.0f, 2.0f, 2.0f}, sampled(1.0f, 0, 0.5f), 2000)),
            (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(seed_frequencies({2.0f, 2.0f, 2.0f, 2.0f}, sampled(1.0f, 0, 0.76f), 4000).size(), 4u);
}

TEST(SampleRowsTest, TopPIsOverTheTopKSurvivors) {
  // 0.4, 0.3, 0.2, 0.1: top-k 2 renormalises to 4/7, 3/7; top_p 0.5 then keeps only the first.
  const std::vector<float> logits = {std::log(0.1f), std::log(0.4f), std::log(0.3f),
                                     std::log(0.2f)};
  EXPECT_EQ(ids_of(seed_frequencies(logits, sampled(1.0f, 2, 0.5f), 2000)),
            (std::vector<int32_t>{1}));
  // top_p 0.58 > 4/7: both survivors.
  EXPECT_EQ(ids_of(seed_frequencies(logits, sampled(1.0f, 2, 0.58f), 2000)),
            (std::vector<int32_t>{1, 2}));
}

TEST(SampleRowsTest, MinPDropsTokensBelowAShareOfTheBest) {
  const std::vector<float> logits = {0.0f, std::log(0.5f), std::log(0.09f), std::log(0.11f)};
  EXPECT_EQ(ids_of(seed_frequencies(logits, sampled(1.0f, 0, 1.0f, 0.1f), 4000)),
            (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(ids_of(seed_frequencies(logits, sampled(1.0f, 0, 1.0f, 1.0f), 500)),
            (std::vector<int32_t>{0}));
}

TEST(SampleRowsTest, TemperatureReshapesTheDistribution) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, 0.5f};
  constexpr int kDraws = 40000;
  for (float t : {0.5f, 1.0f, 3.0f}) {
    double z = 0.0;
    for (float l : logits) z += std::exp(l / t);
    const auto f = seed_frequencies(logits, sampled(t), kDraws);
    for (int32_t id = 0; id < 4; ++id) {
      const double p = std::exp(logits[static_cast<size_t>(id)] / t) / z;
      const auto it = f.find(id);
      EXPECT_NEAR(it == f.end() ? 0.0 : it->second, p, 5 * std::sqrt(p * (1 - p) / kDraws) + 1e-9)
          << "temperature " << t << " token " << id;
    }
  }
}

TEST(SampleRowsTest, NonFiniteRowsAreErrorsCountedPerRow) {
  constexpr int64_t kVocab = 6;
  std::vector<float> logits = {1,    2,     3, 4,      5, 6, /**/ 1, kNaN, 3,
                               kInf, -kInf, 0, /**/ 6, 5, 4, 3,      2,    1};
  const RowsResult r =
      run_rows(logits, kVocab, {sampled(1.0f), sampled(0.0f), SamplingRowParams{}});
  EXPECT_EQ(r.tokens[1], -1);
  EXPECT_EQ(r.errors[1], kSamplingNonFiniteLogits);
  EXPECT_EQ(r.nonfinite[1], 3);
  EXPECT_EQ(r.errors[0], 0u);
  EXPECT_EQ(r.errors[2], 0u);
  EXPECT_EQ(r.nonfinite[0], 0);
  EXPECT_EQ(r.tokens[2], 0);
  EXPECT_GE(r.tokens[0], 0);
}

TEST(SampleRowsTest, BadParametersAndEditsAreErrorsOfTheirRowOnly) {
  const std::vector<float> row = {0.5f, 1.0f, -1.0f, 2.0f};
  std::vector<SamplingRowParams> rows;
  auto bad = [&](auto mutate) {
    SamplingRowParams r = sampled(1.0f);
    mutate(r);
    rows.push_back(r);
  };
  bad([](SamplingRowParams& r) { r.temperature = -1.0f; });
  bad([](SamplingRowParams& r) { r.temperature = kNaN; });
  bad([](SamplingRowParams& r) { r.top_k = -1; });
  bad([](SamplingRowParams& r) { r.top_p = 0.0f; });
  bad([](SamplingRowParams& r) { r.top_p = 1.5f; });
  bad([](SamplingRowParams& r) { r.min_p = -0.1f; });
  bad([](SamplingRowParams& r) { r.repetition_penalty = 0.0f; });
  bad([](SamplingRowParams& r) { r.frequency_penalty = kInf; });
  bad([](SamplingRowParams& r) { r.num_top_logprobs = 3; });  // more than max_top_logprobs (0)
  bad([](SamplingRowParams& r) { r.step = -1; });
  const size_t num_bad_params = rows.size();
  const std::vector<TokenEdit> edits = {TokenEdit{1, 0.5f, 0, 0}, TokenEdit{4, 0.5f, 0, 0},
                                        TokenEdit{1, 0.0f, 1, 0}, TokenEdit{2, 0.0f, -1, 0},
                                        TokenEdit{2, 0.0f, 0, 2}, TokenEdit{2, kNaN, 0, 0}};
  bad([](SamplingRowParams& r) {
    r.edit_begin = 1;
    r.edit_count = 1;
  });  // token 4 >= vocab
  bad([](SamplingRowParams& r) {
    r.edit_begin = 0;
    r.edit_count = 3;
  });  // token 1 twice
  bad([](SamplingRowParams& r) {
    r.edit_begin = 3;
    r.edit_count = 1;
  });  // negative count
  bad([](SamplingRowParams& r) {
    r.edit_begin = 4;
    r.edit_count = 1;
  });  // in_prompt 2
  bad([](SamplingRowParams& r) {
    r.edit_begin = 5;
    r.edit_count = 1;
  });  // NaN bias
  bad([](SamplingRowParams& r) {
    r.edit_begin = 5;
    r.edit_count = 2;
  });  // past the array
  bad([](SamplingRowParams& r) {
    r.edit_begin = -1;
    r.edit_count = 1;
  });
  bad([](SamplingRowParams& r) {
    r.edit_begin = 0;
    r.edit_count = -1;
  });
  rows.push_back(sampled(0.0f));  // a good row among them
  std::vector<float> logits;
  for (size_t i = 0; i < rows.size(); ++i) logits.insert(logits.end(), row.begin(), row.end());
  const RowsResult r = run_rows(logits, 4, rows, edits);
  for (size_t i = 0; i + 1 < rows.size(); ++i) {
    EXPECT_EQ(r.tokens[i], -1) << "row " << i;
    EXPECT_EQ(r.errors[i], i < num_bad_params ? kSamplingBadParams : kSamplingBadEdits)
        << "row " << i;
  }
  EXPECT_EQ(r.tokens.back(), 3);
  EXPECT_EQ(r.errors.back(), 0u);
}

TEST(SampleRowsTest, SizeErrorsAbortWithAMessage) {
  const std::vector<float> logits(4, 0.0f);
  EXPECT_DEATH(run_rows(logits, 0, {SamplingRowParams{}}), "vocab_size");
  SampleRowsParams p;
  p.vocab_size = sampling::kMaxVocab + 1;
  EXPECT_DEATH(sample_rows_cpu(p), "vocab_size");
}

TEST(SampleRowsTest, InfiniteScaledMaxTakesTheFirstRanked) {
  // 1e38 / 1e-30 overflows to +inf for both maxima: the lower id is the only candidate.
  const std::vector<float> logits = {1.0f, 1e38f, -3.0f, 1e38f};
  const auto f = seed_frequencies(logits, sampled(1e-30f, 0, 0.9f), 200);
  EXPECT_EQ(ids_of(f), (std::vector<int32_t>{1}));
}

// The same (logits, parameters, seed, step) draw the same token whatever the other rows are and
// wherever the row sits in the batch; the step changes the draw.
TEST(SampleRowsTest, ReproducibleWhateverTheBatch) {
  auto rng = make_rng(41);
  constexpr int64_t kVocab = 3001;
  constexpr int kRows = 9;
  std::vector<float> logits = random_vector(kRows * kVocab, rng, -3.0f, 3.0f);
  std::vector<SamplingRowParams> rows;
  std::vector<TokenEdit> edits;
  for (int i = 0; i < kRows; ++i) {
    SamplingRowParams r = sampled(0.3f + 0.2f * static_cast<float>(i), i % 3 == 0 ? 0 : 5 + 40 * i,
                                  i % 2 ? 0.9f : 1.0f, i % 4 == 1 ? 0.05f : 0.0f, 77 + i, 3 * i);
    r.repetition_penalty = 1.3f;
    r.frequency_penalty = 0.2f;
    r.presence_penalty = 0.1f;
    r.edit_begin = static_cast<int64_t>(edits.size());
    r.edit_count = 1 + i % 3;
    for (int e = 0; e < r.edit_count; ++e)
      edits.push_back(
          TokenEdit{(i * 37 + e * 101) % static_cast<int32_t>(kVocab), 0.5f * e, e, e % 2});
    rows.push_back(r);
  }
  const RowsResult all = run_rows(logits, kVocab, rows, edits);
  // Reversed, with the edits array reversed too.
  std::vector<float> rev_logits;
  std::vector<SamplingRowParams> rev_rows;
  std::vector<TokenEdit> rev_edits(edits.rbegin(), edits.rend());
  for (int i = kRows - 1; i >= 0; --i) {
    rev_logits.insert(rev_logits.end(), logits.begin() + i * kVocab,
                      logits.begin() + (i + 1) * kVocab);
    SamplingRowParams r = rows[static_cast<size_t>(i)];
    r.edit_begin = static_cast<int64_t>(edits.size()) - r.edit_begin - r.edit_count;
    std::reverse(rev_edits.begin() + r.edit_begin, rev_edits.begin() + r.edit_begin + r.edit_count);
    rev_rows.push_back(r);
  }
  const RowsResult rev = run_rows(rev_logits, kVocab, rev_rows, rev_edits);
  int changed = 0;
  for (int i = 0; i < kRows; ++i) {
    ASSERT_EQ(all.errors[static_cast<size_t>(i)], 0u);
    EXPECT_EQ(all.tokens[static_cast<size_t>(i)], rev.tokens[static_cast<size_t>(kRows - 1 - i)])
        << "row " << i << "; " << seed_note();
    // Alone.
    const std::vector<float> one(logits.begin() + i * kVocab, logits.begin() + (i + 1) * kVocab);
    SamplingRowParams r = rows[static_cast<size_t>(i)];
    std::vector<TokenEdit> own(edits.begin() + r.edit_begin,
                               edits.begin() + r.edit_begin + r.edit_count);
    r.edit_begin = 0;
    EXPECT_EQ(run_rows(one, kVocab, {r}, own).tokens[0], all.tokens[static_cast<size_t>(i)]);
    r.step += 1;
    changed += run_rows(one, kVocab, {r}, own).tokens[0] != all.tokens[static_cast<size_t>(i)];
  }
  EXPECT_GT(changed, 0) << "the step index should change some draws";
}

TEST(SampleRowsTest, LogprobsOfTheRawLogitsWithTopAlternatives) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 2.0f};
  double z = 0.0;
  for (float l : logits) z += std::exp(static_cast<double>(l));
  SamplingRowParams r;  // greedy
  r.num_top_logprobs = 3;
  const RowsResult got = run_rows(logits, 5, {r}, {}, 4);
  EXPECT_EQ(got.tokens[0], 1);
  EXPECT_NEAR(got.logprobs[0], 3.0 - std::log(z), 1e-6);
  EXPECT_EQ(got.top_ids, (std::vector<int32_t>{1, 3, 4, -1}));
  EXPECT_NEAR(got.top_logprobs[2], 2.0 - std::log(z), 1e-6);
  EXPECT_EQ(got.top_logprobs[3], -kInf);
  // Without a request the outputs stay as they were.
  SamplingRowParams none;
  EXPECT_TRUE(std::isnan(run_rows(logits, 5, {none}, {}, 4).logprobs[0]));
}

// The twin against a reference written here from the definition (stable sort with a float
// comparator, cuts on dense arrays), on random rows with many ties, over many parameter sets.
TEST(SampleRowsTest, MatchesAReferenceOverManyParameterSets) {
  auto rng = make_rng(43);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t vocab = 1 + (trial * 37) % 900;
    std::vector<float> logits = random_vector(vocab, rng, -4.0f, 4.0f);
    for (int64_t i = 5; i < vocab; i += 7)
      logits[static_cast<size_t>(i)] = logits[static_cast<size_t>(i - 5)];
    SamplingRowParams r =
        sampled(0.2f + 0.15f * static_cast<float>(trial % 11), trial % 5 == 0 ? 0 : trial % 40,
                trial % 3 == 0 ? 1.0f : 0.1f + 0.08f * static_cast<float>(trial % 11),
                trial % 4 == 0 ? 0.02f * static_cast<float>(trial % 9) : 0.0f,
                static_cast<uint64_t>(trial) * 7919, trial);
    const RowsResult got = run_rows(logits, vocab, {r});
    // Reference.
    std::vector<int32_t> ids(static_cast<size_t>(vocab));
    std::iota(ids.begin(), ids.end(), 0);
    std::vector<float> s(static_cast<size_t>(vocab));
    for (int64_t i = 0; i < vocab; ++i)
      s[static_cast<size_t>(i)] = logits[static_cast<size_t>(i)] / r.temperature;
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return s[a] > s[b]; });
    size_t n =
        r.top_k > 0 ? std::min<size_t>(static_cast<size_t>(r.top_k), ids.size()) : ids.size();
    const float s_max = s[static_cast<size_t>(ids[0])];
    std::vector<uint64_t> w(n);
    std::vector<float> rel(n);
    unsigned __int128 total = 0;
    for (size_t i = 0; i < n; ++i) {
      rel[i] = sampling::exp_nonpositive(s[static_cast<size_t>(ids[i])] - s_max);
      w[i] = static_cast<uint64_t>(std::ldexp(static_cast<double>(rel[i]), 45));
      total += w[i];
    }
    if (r.top_p < 1.0f) {
      // "mass before < top_p" in exact rational arithmetic: before * 2^50 < (top_p * 2^50) * total
      // (top_p >= 0.1 here, so top_p * 2^50 is an integer).
      const unsigned __int128 p50 =
          static_cast<unsigned __int128>(std::ldexp(static_cast<double>(r.top_p), 50));
      unsigned __int128 before = 0;
      size_t keep = 0;
      while (keep < n && (keep == 0 || (before << 50) < p50 * total)) before += w[keep++];
      n = keep;
    }
    std::vector<size_t> kept;
    uint64_t kept_total = 0;
    for (size_t i = 0; i < n; ++i)
      if (rel[i] >= r.min_p) {
        kept.push_back(i);
        kept_total += w[i];
      }
    const uint64_t u = sampling::uniform_below(sampling::draw_bits(r.seed, r.step), kept_total);
    uint64_t cum = 0;
    int32_t want = -1;
    for (size_t i : kept) {
      cum += w[i];
      if (cum > u) {
        want = ids[i];
        break;
      }
    }
    ASSERT_EQ(got.tokens[0], want)
        << "trial " << trial << " vocab " << vocab << "; " << seed_note();
  }
}

// The CUDA kernel's split of small batches across vocabulary slices: a host plan.
TEST(SampleRowsSplit, SlicesFillOneWaveOfSmallBatches) {
  constexpr int kSms = 132;
  // No workspace, or rows that fill the GPU alone: one block per row.
  EXPECT_EQ(sample_rows_split(1, 128256, kSms, false).slices, 1);
  EXPECT_EQ(sample_rows_split(1, 128256, kSms, false).slice_tokens, 128256);
  EXPECT_EQ(sample_rows_split(133, 128256, kSms, true).slices, 1);
  EXPECT_EQ(sample_rows_split(256, 128256, kSms, true).slices, 1);
  // At most one block per SM: rows past half the SMs run one block per row.
  EXPECT_EQ(sample_rows_split(132, 128256, kSms, true).slices, 1);
  EXPECT_EQ(sample_rows_split(89, 128256, kSms, true).slices, 1);
  EXPECT_EQ(sample_rows_split(67, 128256, kSms, true).slices, 1);
  EXPECT_EQ(sample_rows_split(66, 128256, kSms, true).slices, 2);
  EXPECT_EQ(sample_rows_split(44, 128256, kSms, true).slices, 3);
  EXPECT_EQ(sample_rows_split(32, 128256, kSms, true).slices, 4);
  // Batch 1: the cap of 16 slices, of 8032 tokens (132 would fill the SMs, but the last block's
  // merge grows with the slices); batch 8 too (128 blocks); batch 17: 7 (119 blocks).
  const SampleSplit one = sample_rows_split(1, 128256, kSms, true);
  EXPECT_EQ(one.slices, kSampleMaxSlices);
  EXPECT_EQ(kSampleMaxSlices, 16);
  EXPECT_EQ(one.slice_tokens, 8032);
  EXPECT_EQ(sample_rows_split(8, 128256, kSms, true).slices, 16);
  EXPECT_EQ(sample_rows_split(17, 128256, kSms, true).slices, 7);
  // Batch 64: 2 slices (128 blocks on 132 SMs); batch 3 at qwen's vocabulary: the cap.
  EXPECT_EQ(sample_rows_split(64, 128256, kSms, true).slices, 2);
  EXPECT_EQ(sample_rows_split(3, 151936, kSms, true).slices, kSampleMaxSlices);
  // Vocabularies too small to be worth a slice.
  EXPECT_EQ(sample_rows_split(1, 1000, kSms, true).slices, 1);
  EXPECT_EQ(sample_rows_split(1, 4095, kSms, true).slices, 1);
  EXPECT_EQ(sample_rows_split(1, 4096, kSms, true).slices, 1);  // 2 slices: not worth a split
  EXPECT_EQ(sample_rows_split(1, 8191, kSms, true).slices, 1);
  EXPECT_EQ(sample_rows_split(1, 8192, kSms, true).slices, 4);
}

TEST(SampleRowsSplit, InvariantsHoldForEveryShape) {
  for (const int sms : {1, 8, 132, 144}) {
    for (const int64_t rows : {1, 2, 3, 7, 16, 64, 100, 132, 133, 300, 65535}) {
      for (const int64_t vocab : {1, 31, 2048, 4096, 4097, 32000, 128256, 151936, 262144}) {
        const SampleSplit s = sample_rows_split(rows, vocab, sms, true);
        const std::string what = std::to_string(rows) + " rows, vocab " + std::to_string(vocab) +
                                 ", " + std::to_string(sms) + " SMs";
        ASSERT_GE(s.slices, 1) << what;
        ASSERT_LE(s.slices, kSampleMaxSlices) << what;
        // Every token in exactly one non-empty slice.
        ASSERT_LT((s.slices - 1) * s.slice_tokens, vocab) << what;
        ASSERT_GE(s.slices * s.slice_tokens, vocab) << what;
        if (s.slices == 1) continue;
        ASSERT_GE(s.slices, 2) << what;
        ASSERT_GE(vocab, kSampleMinSlices * kSampleMinSliceTokens) << what;
        ASSERT_EQ(s.slice_tokens % 32, 0) << what;  // whole words of the edit bitmap
        ASSERT_GE(s.slice_tokens, kSampleMinSliceTokens) << what;
        ASSERT_LE(s.slices * rows, kSampleSplitMaxBlocks) << what;  // within the workspace
        ASSERT_LE(s.slices * rows, int64_t{sms}) << what;           // a block per SM
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Tile summaries (what an LM-head epilogue leaves for sample_rows_tiles_cuda) and the rows the
// tile path finishes.

// Summaries of `rows` rows of f32 logits (row stride `stride`) in `epoch`, tiles of `tile`.
struct TileSummaryHost {
  std::vector<uint64_t> words, nonfinite;
  uint32_t epoch = 1;
  LogitTileSummaries view(int64_t tile) {
    LogitTileSummaries s;
    s.words = words.data();
    s.nonfinite = nonfinite.data();
    s.epoch = &epoch;
    s.tile_tokens = tile;
    return s;
  }
};

TEST(LogitTileSummary, MaxFirstPositionAndNonFiniteCountPerRow) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Tiles of 4 over a vocabulary of 11: the last tile has 3 tokens.
  const std::vector<float> row = {1.0f, 3.0f, 3.0f,  -2.0f,  // max 3 at 1 (tie at 2)
                                  nan,  -inf, -5.0f, -0.0f,  // max -0 (as +0) at 3; 2 bad
                                  inf,  nan,  -inf};         // nothing finite; 3 bad
  TileSummaryHost h;
  h.words.assign(3, 0);
  h.nonfinite.assign(1, 0);
  h.epoch = 7;
  summarize_logit_tiles_cpu(row.data(), DType::kF32, 1, 11, 11, h.view(4));
  for (const uint64_t w : h.words) EXPECT_EQ(logit_tile::epoch_of(w), 7u);
  EXPECT_EQ(logit_tile::key_of(h.words[0]), sampling::order_key(3.0f));
  EXPECT_EQ(logit_tile::index_of(h.words[0]), 1);
  EXPECT_EQ(logit_tile::key_of(h.words[1]), sampling::order_key(0.0f));
  EXPECT_EQ(logit_tile::index_of(h.words[1]), 3);
  EXPECT_EQ(logit_tile::key_of(h.words[2]), 0u);
  EXPECT_EQ(logit_tile::nonfinite_count(h.nonfinite[0], 7), 5u);
  EXPECT_EQ(logit_tile::nonfinite_count(h.nonfinite[0], 8), 0u);  // stale in the next epoch
  // -0 then +0: equal values, the first position is the max's, and its key is +0's.
  const std::vector<float> zeros = {-0.0f, 0.0f, -1.0f};
  summarize_logit_tiles_cpu(zeros.data(), DType::kF32, 1, 3, 3, h.view(3));
  EXPECT_EQ(logit_tile::key_of(h.words[0]), sampling::order_key(0.0f));
  EXPECT_EQ(logit_tile::index_of(h.words[0]), 0);
  EXPECT_EQ(logit_tile::nonfinite_count(h.nonfinite[0], 7), 0u);
}

// What lets a GEMM epilogue write a tile by atomicMax over pieces without zeroing the buffer: the
// largest word of the pieces is the whole tile's, and any word of a newer epoch beats any older.
TEST(LogitTileSummary, TheLargestWordOfThePiecesIsTheTilesAndNewerEpochsWin) {
  auto rng = testing::make_rng(2718);
  const int64_t tile = 128;
  auto values = testing::random_vector(tile, rng, -3.0f, 3.0f);
  values[17] = values[90] = 5.0f;  // equal maxima: the first position must win
  values[40] = std::numeric_limits<float>::quiet_NaN();
  TileSummaryHost h;
  h.words.assign(1, 0);
  h.nonfinite.assign(1, 0);
  h.epoch = 3;
  summarize_logit_tiles_cpu(values.data(), DType::kF32, 1, tile, tile, h.view(tile));
  EXPECT_EQ(logit_tile::index_of(h.words[0]), 17);
  for (const int piece : {1, 16, 37, 128}) {
    uint64_t word = (uint64_t{2} << logit_tile::kEpochShift) | ((uint64_t{1} << 44) - 1);  // stale
    for (int64_t i0 = 0; i0 < tile; i0 += piece) {
      uint64_t best = 0;
      for (int64_t i = i0; i < std::min(tile, i0 + piece); ++i)
        best = std::max(
            best, logit_tile::value_word(3, values[static_cast<size_t>(i)], static_cast<int>(i)));
      word = std::max(word, best);
    }
    EXPECT_EQ(word, h.words[0]) << "pieces of " << piece;
  }
}

// The compact 32-bit words (the skinny GEMM's epilogue reduces them in one warp instruction): for
// every bf16 value and positions across a tile, the word they expand to is value_word's, and they
// order as their words do.
TEST(LogitTileSummary, CompactWordsOfEveryBf16ValueExpandToItsWordInItsOrder) {
  const int positions[] = {0, 1, 15, 16, 127, 4095};
  std::vector<std::pair<uint32_t, uint64_t>> pairs;
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const float v = bf16_bits_to_f32(static_cast<uint16_t>(bits));
    for (const int position : positions) {
      const uint32_t compact = logit_tile::compact_bf16_word(static_cast<uint16_t>(bits), position);
      const uint64_t word = logit_tile::value_word(5, v, position);
      ASSERT_EQ(logit_tile::word_of_compact(5, compact), word)
          << "bf16 bits 0x" << std::hex << bits << std::dec << " at " << position;
      ASSERT_EQ(compact == 0u, !sampling::is_finite(v)) << std::hex << bits;
      pairs.emplace_back(compact, word);
    }
  }
  std::sort(pairs.begin(), pairs.end());
  for (size_t i = 1; i < pairs.size(); ++i)
    ASSERT_LE(pairs[i - 1].second, pairs[i].second) << "compact words out of their words' order";
  EXPECT_EQ(logit_tile::word_of_compact(5, 0u), uint64_t{5} << logit_tile::kEpochShift);
}

TEST(LogitTileSummary, EveryRowDtypeAndStrideAgainstAScan) {
  auto rng = testing::make_rng(314);
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (const int64_t tile : {1, 16, 37, 128}) {
      const int64_t rows = 3, vocab = 1000, stride = 1003;
      const auto values = testing::random_vector(rows * stride, rng, -4.0f, 4.0f);
      // The stored logits, and the values they hold (bf16 widens exactly).
      std::vector<uint8_t> stored(static_cast<size_t>(rows * stride * dtype_size_bytes(dtype)));
      for (int64_t i = 0; i < rows * stride; ++i) {
        if (dtype == DType::kF32)
          reinterpret_cast<float*>(stored.data())[i] = values[static_cast<size_t>(i)];
        else
          reinterpret_cast<uint16_t*>(stored.data())[i] =
              f32_to_bf16_bits(values[static_cast<size_t>(i)]);
      }
      std::vector<float> logits(static_cast<size_t>(rows * stride));
      convert_to_f32(stored.data(), dtype, rows * stride, logits.data());
      const int64_t tiles = logit_tiles(vocab, tile);
      TileSummaryHost h;
      h.words.assign(static_cast<size_t>(rows * tiles), 0);
      h.nonfinite.assign(static_cast<size_t>(rows), 0);
      summarize_logit_tiles_cpu(stored.data(), dtype, rows, vocab, stride, h.view(tile));
      for (int64_t r = 0; r < rows; ++r) {
        EXPECT_EQ(logit_tile::nonfinite_count(h.nonfinite[static_cast<size_t>(r)], 1), 0u);
        for (int64_t t = 0; t < tiles; ++t) {
          const float* begin = logits.data() + r * stride + t * tile;
          const float* end = logits.data() + r * stride + std::min(vocab, (t + 1) * tile);
          const float* best = std::max_element(begin, end);  // the first of equal maxima
          const uint64_t w = h.words[static_cast<size_t>(r * tiles + t)];
          ASSERT_EQ(logit_tile::key_of(w), sampling::order_key(*best == 0.0f ? 0.0f : *best))
              << dtype_name(dtype) << " tile " << tile << " row " << r << " t " << t;
          ASSERT_EQ(logit_tile::index_of(w), best - begin);
        }
      }
    }
  }
}

TEST(LogitTileSummary, ArgumentsOutsideTheLimitsAbortWithAMessage) {
  const std::vector<float> row(8, 0.0f);
  TileSummaryHost h;
  h.words.assign(8, 0);
  h.nonfinite.assign(1, 0);
  EXPECT_DEATH(summarize_logit_tiles_cpu(row.data(), DType::kF32, 1, 8, 8, h.view(0)),
               "tile_tokens");
  EXPECT_DEATH(summarize_logit_tiles_cpu(row.data(), DType::kF32, 1, 8, 8, h.view(5000)),
               "tile_tokens");
  EXPECT_DEATH(summarize_logit_tiles_cpu(row.data(), DType::kF32, 1, 262144, 262144, h.view(8)),
               "16384 tiles");
  EXPECT_DEATH(summarize_logit_tiles_cpu(row.data(), DType::kF32, 1, 8, 7, h.view(4)),
               "row_stride");
  h.epoch = 0;
  EXPECT_DEATH(summarize_logit_tiles_cpu(row.data(), DType::kF32, 1, 8, 8, h.view(4)), "epoch");
  h.epoch = kLogitTileEpochs;
  EXPECT_DEATH(summarize_logit_tiles_cpu(row.data(), DType::kF32, 1, 8, 8, h.view(4)), "epoch");
  EXPECT_NE(logit_tiles_unsupported_reason(LogitTileSummaries{}, 8), nullptr);
  h.epoch = 1;
  EXPECT_EQ(logit_tiles_unsupported_reason(h.view(4), 8), nullptr);
  EXPECT_NE(logit_tiles_unsupported_reason(h.view(4), 0), nullptr);
}

TEST(SampleRowUsesTiles, GreedyOrAFastTopKWithoutLogprobs) {
  SamplingRowParams r;
  r.temperature = 0.0f;
  EXPECT_TRUE(sample_row_uses_tiles(r, 128256));  // greedy, any vocabulary
  EXPECT_TRUE(sample_row_uses_tiles(r, 1));
  r.num_top_logprobs = 0;  // logprobs need the whole row's normaliser
  EXPECT_FALSE(sample_row_uses_tiles(r, 128256));
  r.num_top_logprobs = -1;
  r.temperature = 0.7f;
  r.top_k = 0;  // no top-k: the whole row may be kept
  EXPECT_FALSE(sample_row_uses_tiles(r, 128256));
  r.top_k = 50;
  r.top_p = 0.9f;
  r.min_p = 0.05f;
  EXPECT_TRUE(sample_row_uses_tiles(r, 128256));
  r.top_k = static_cast<int32_t>(kSamplingFastTopK);
  EXPECT_TRUE(sample_row_uses_tiles(r, 128256));
  r.top_k = static_cast<int32_t>(kSamplingFastTopK) + 1;
  EXPECT_FALSE(sample_row_uses_tiles(r, 128256));
  r.top_k = 40;  // k >= vocab means "off"
  EXPECT_FALSE(sample_row_uses_tiles(r, 40));
  EXPECT_TRUE(sample_row_uses_tiles(r, 41));
}

}  // namespace
}  // namespace roofline
