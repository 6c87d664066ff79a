// argmax_cpu and sample_cpu: argmax ties and NaNs; sample_cpu against an independent reference
// written here in double (HF's formulation of top-p: drop the ascending-order tail whose
// cumulative probability is <= 1 - top_p), and the observable effect of each knob, measured by
// sweeping the uniform over a fine grid (the fraction of the grid that draws a token is its
// probability, to within the grid step).
#include "ops/sampling/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

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
