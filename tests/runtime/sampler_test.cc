// The host sampling chain (runtime/sampler.h): every stage against a naive reference written here
// over dense rows in double, on fresh random rows each run (ROOFLINE_TEST_SEED replays one); the
// whole chain against sample_cpu where they overlap; Sampler as the batched twin (sample_rows_cpu)
// over its edit list, its draws inside the set the stages keep, its errors and reproducibility.
#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

using testing::make_rng;
using testing::random_vector;
using testing::seed_note;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Ids ranked by (logit desc, id asc), NaN dropped.
std::vector<int32_t> naive_rank(const std::vector<float>& logits) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isnan(logits[i])) ids.push_back(static_cast<int32_t>(i));
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  return ids;
}

std::vector<double> naive_softmax(const std::vector<float>& logits,
                                  const std::vector<int32_t>& ids) {
  double best = -std::numeric_limits<double>::infinity();
  for (int32_t id : ids) best = std::max(best, static_cast<double>(logits[id]));
  std::vector<double> p;
  double sum = 0;
  for (int32_t id : ids) {
    p.push_back(std::exp(logits[id] - best));
    sum += p.back();
  }
  for (double& x : p) x /= sum;
  return p;
}

Candidates candidates_of(const std::vector<float>& logits, const std::vector<int32_t>& ids) {
  Candidates c;
  c.ids = ids;
  for (int32_t id : ids) c.logits.push_back(logits[id]);
  return c;
}

std::vector<float> random_row(std::mt19937_64& rng, int64_t vocab, float spread) {
  std::vector<float> row = random_vector(vocab, rng, -spread, spread);
  // Some exact ties, so the tie rule is exercised.
  for (int64_t i = 3; i < vocab; i += 17) row[i] = row[i - 3];
  return row;
}

TEST(SamplerPenalties, MatchReference) {
  auto rng = make_rng(1);
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t vocab = 37 + trial;
    std::vector<float> logits = random_row(rng, vocab, 4.0f);
    std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab - 1));
    std::vector<int32_t> prompt(5 + trial % 7), generated(trial % 11);
    for (int32_t& t : prompt) t = tok(rng);
    for (int32_t& t : generated) t = tok(rng);
    SamplerSettings s;
    s.repetition_penalty = 0.5f + static_cast<float>(trial % 5) * 0.4f;
    s.frequency_penalty = static_cast<float>(trial % 3) * 0.3f - 0.2f;
    s.presence_penalty = static_cast<float>(trial % 4) * 0.25f - 0.5f;

    // Reference: HF's repetition processor over the distinct ids of prompt + generated, then the
    // OpenAI formula over the generated counts.
    std::vector<double> want(logits.begin(), logits.end());
    std::set<int32_t> seen(prompt.begin(), prompt.end());
    seen.insert(generated.begin(), generated.end());
    for (int32_t id : seen)
      want[id] = want[id] > 0 ? want[id] / s.repetition_penalty : want[id] * s.repetition_penalty;
    std::map<int32_t, int> counts;
    for (int32_t id : generated) ++counts[id];
    for (auto [id, n] : counts) want[id] -= s.frequency_penalty * n + s.presence_penalty;

    std::unordered_set<int32_t> seen_set(seen.begin(), seen.end());
    std::unordered_map<int32_t, int32_t> count_map(counts.begin(), counts.end());
    std::vector<float> got = logits;
    apply_penalties(got.data(), vocab, s, seen_set, count_map);
    for (int64_t i = 0; i < vocab; ++i)
      EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i])))
          << "trial " << trial << " id " << i << "; " << seed_note();
  }
}

TEST(SamplerPenalties, OffIsIdentity) {
  auto rng = make_rng(2);
  std::vector<float> logits = random_row(rng, 50, 3.0f);
  std::vector<float> got = logits;
  apply_penalties(got.data(), 50, SamplerSettings{}, {1, 2, 3}, {{4, 2}});
  EXPECT_EQ(got, logits);
}

TEST(SamplerTemperature, Divides) {
  std::vector<float> logits = {1.0f, -2.0f, 0.5f, kNaN};
  apply_temperature(logits.data(), 4, 0.5f);
  EXPECT_FLOAT_EQ(logits[0], 2.0f);
  EXPECT_FLOAT_EQ(logits[1], -4.0f);
  EXPECT_FLOAT_EQ(logits[2], 1.0f);
  EXPECT_TRUE(std::isnan(logits[3]));
}

TEST(SamplerTopK, RankAndCutMatchReference) {
  auto rng = make_rng(3);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t vocab = 1 + trial * 7;
    std::vector<float> logits = random_row(rng, vocab, 2.0f);
    if (vocab > 5) logits[2] = kNaN;
    const std::vector<int32_t> ranked = naive_rank(logits);
    for (int32_t k : {0, 1, 2, 5, 1000}) {
      Candidates c = rank_candidates(logits.data(), vocab, k);
      apply_top_k(c, k);
      std::vector<int32_t> want = ranked;
      if (k > 0 && want.size() > static_cast<size_t>(k)) want.resize(static_cast<size_t>(k));
      EXPECT_EQ(c.ids, want) << "vocab " << vocab << " k " << k << "; " << seed_note();
      for (size_t r = 0; r < c.ids.size(); ++r) EXPECT_EQ(c.logits[r], logits[c.ids[r]]);
    }
  }
}

TEST(SamplerTopP, MatchesHfReference) {
  auto rng = make_rng(4);
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t vocab = 2 + trial * 3;
    std::vector<float> logits = random_row(rng, vocab, 1.0f + static_cast<float>(trial % 6));
    const std::vector<int32_t> ranked = naive_rank(logits);
    for (float top_p : {0.05f, 0.3f, 0.5f, 0.9f, 0.999f, 1.0f}) {
      // HF: sort ascending, remove the tail whose cumulative probability is <= 1 - top_p, keep
      // >= 1.
      const std::vector<double> p = naive_softmax(logits, ranked);
      size_t keep = p.size();
      if (top_p < 1.0f) {
        double cum = 0;
        for (size_t i = p.size(); i-- > 1;) {
          cum += p[i];
          if (cum <= 1.0 - static_cast<double>(top_p))
            --keep;
          else
            break;
        }
      }
      Candidates c = candidates_of(logits, ranked);
      apply_top_p(c, top_p);
      EXPECT_EQ(c.ids.size(), keep)
          << "vocab " << vocab << " top_p " << top_p << "; " << seed_note();
    }
  }
}

TEST(SamplerMinP, MatchesReference) {
  auto rng = make_rng(5);
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t vocab = 2 + trial * 5;
    std::vector<float> logits = random_row(rng, vocab, 0.5f + static_cast<float>(trial % 5));
    const std::vector<int32_t> ranked = naive_rank(logits);
    const std::vector<double> p = naive_softmax(logits, ranked);
    for (float min_p : {0.0f, 0.01f, 0.1f, 0.5f, 0.9f, 1.0f}) {
      std::vector<int32_t> want;
      for (size_t r = 0; r < ranked.size(); ++r)
        if (r == 0 || p[r] >= static_cast<double>(min_p) * p[0] * (1 - 1e-12))
          want.push_back(ranked[r]);
      Candidates c = candidates_of(logits, ranked);
      apply_min_p(c, min_p);
      EXPECT_EQ(c.ids, want) << "vocab " << vocab << " min_p " << min_p << "; " << seed_note();
    }
  }
}

TEST(SamplerDraw, InverseCdfMatchesReference) {
  auto rng = make_rng(6);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t vocab = 1 + trial * 4;
    std::vector<float> logits = random_row(rng, vocab, 3.0f);
    const std::vector<int32_t> ranked = naive_rank(logits);
    const std::vector<double> p = naive_softmax(logits, ranked);
    const Candidates c = candidates_of(logits, ranked);
    for (int i = 0; i < 50; ++i) {
      const double u = uni(rng);
      int32_t want = ranked.back();
      bool near_boundary = false;
      double cum = 0;
      for (size_t r = 0; r < p.size(); ++r) {
        cum += p[r];
        // Draws within rounding of a boundary are skipped: the two sums may round differently.
        near_boundary = near_boundary || std::fabs(cum - u) < 1e-9;
        if (u < cum) {
          want = ranked[r];
          break;
        }
      }
      if (!near_boundary) {
        EXPECT_EQ(draw_candidate(c, u), want) << "u " << u << "; " << seed_note();
      }
    }
  }
  EXPECT_EQ(draw_candidate(Candidates{}, 0.5), -1);
  Candidates inf = candidates_of({1.0f, kInf, 2.0f}, {1, 2, 0});
  EXPECT_EQ(draw_candidate(inf, 0.99), 1);
}

// Without penalties and min-p the chain is sample_cpu's: the same token for the same uniform.
TEST(SamplerChain, AgreesWithSampleCpu) {
  auto rng = make_rng(7);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  for (int trial = 0; trial < 100; ++trial) {
    const int64_t vocab = 3 + trial * 11;
    std::vector<float> logits = random_row(rng, vocab, 4.0f);
    SamplingConfig cfg{0.3f + static_cast<float>(trial % 7) * 0.3f, trial % 4 == 0 ? 0 : trial % 13,
                       trial % 3 == 0 ? 1.0f : 0.2f + static_cast<float>(trial % 8) * 0.1f};
    for (int i = 0; i < 10; ++i) {
      const double u = uni(rng);
      std::vector<float> scaled = logits;
      apply_temperature(scaled.data(), vocab, cfg.temperature);
      Candidates c = rank_candidates(scaled.data(), vocab, cfg.top_k);
      apply_top_k(c, cfg.top_k);
      apply_top_p(c, cfg.top_p);
      EXPECT_EQ(draw_candidate(c, u), sample_cpu(logits.data(), vocab, cfg, u))
          << "trial " << trial << "; " << seed_note();
    }
  }
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferent) {
  auto rng = make_rng(8);
  const int64_t vocab = 64;
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < 40; ++i) rows.push_back(random_row(rng, vocab, 1.0f));
  SamplerSettings s;
  s.temperature = 1.0f;
  s.top_p = 0.95f;
  s.min_p = 0.01f;
  s.repetition_penalty = 1.2f;
  s.frequency_penalty = 0.3f;
  s.presence_penalty = 0.2f;
  auto run = [&](uint64_t seed) {
    Sampler sampler(s, seed);
    sampler.set_prompt({1, 2, 3});
    std::vector<int32_t> out;
    for (const auto& row : rows) out.push_back(sampler.sample(row.data(), vocab));
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, GreedyRepetitionPenaltyAvoidsRepeats) {
  // Token 0 is best by a little; once generated, a strong penalty hands the next pick to token 1.
  const std::vector<float> row = {2.0f, 1.9f, 0.0f, -1.0f};
  SamplerSettings s;
  s.repetition_penalty = 2.0f;
  Sampler sampler(s, 0);
  EXPECT_EQ(sampler.sample(row.data(), 4), 0);
  EXPECT_EQ(sampler.sample(row.data(), 4), 1);
  // The prompt counts too.
  Sampler prompted(s, 0);
  prompted.set_prompt({0, 1});
  EXPECT_EQ(prompted.sample(row.data(), 4), 0);  // 1.0 vs 0.95: still token 0
  SamplerSettings f;
  f.frequency_penalty = 0.06f;
  Sampler freq(f, 0);
  EXPECT_EQ(freq.sample(row.data(), 4), 0);
  EXPECT_EQ(freq.sample(row.data(), 4), 0);  // 1.94 vs 1.9
  EXPECT_EQ(freq.sample(row.data(), 4), 1);  // 1.88 vs 1.9
}

TEST(Sampler, AllNaNIsMinusOne) {
  const std::vector<float> row = {kNaN, kNaN};
  Sampler greedy(SamplerSettings{}, 1);
  EXPECT_EQ(greedy.sample(row.data(), 2), -1);
  SamplerSettings s;
  s.temperature = 1.0f;
  Sampler random(s, 1);
  EXPECT_EQ(random.sample(row.data(), 2), -1);
}

}  // namespace
}  // namespace roofline

namespace roofline {
namespace {

TEST(SamplerLogitBias, AddsToTheNamedTokensBeforeEverythingElse) {
  std::vector<float> row = {1.0f, 5.0f, 2.0f, 0.5f};
  apply_logit_bias(row.data(), 4,
                   {{0, 10.0f}, {3, -1.0f}, {3, -1.0f}, {9, 100.0f}});  // 9: outside, ignored
  EXPECT_EQ(row, (std::vector<float>{11.0f, 5.0f, 2.0f, -1.5f}));
  // Greedy follows the bias: without it token 1 wins, with a ban on 1 token 2 does.
  SamplerSettings s;
  s.logit_bias = {{1, -100.0f}};
  Sampler banned(s, 7);
  const std::vector<float> logits = {1.0f, 5.0f, 2.0f, 0.5f};
  EXPECT_EQ(banned.sample(logits.data(), 4), 2);
  Sampler plain(SamplerSettings{}, 7);
  EXPECT_EQ(plain.sample(logits.data(), 4), 1);
}

}  // namespace
}  // namespace roofline

namespace roofline {
namespace {

// Sampler is sample_rows_cpu over one row whose edit list it keeps: the same tokens as a direct
// call built from the same prompt, history, bias and step index.
TEST(Sampler, IsTheBatchedTwinOverItsEditList) {
  auto rng = make_rng(9);
  const int64_t vocab = 97;
  SamplerSettings s;
  s.temperature = 0.9f;
  s.top_k = 30;
  s.top_p = 0.9f;
  s.min_p = 0.01f;
  s.repetition_penalty = 1.4f;
  s.frequency_penalty = 0.3f;
  s.presence_penalty = 0.2f;
  s.logit_bias = {{5, 2.0f}, {6, -100.0f}, {5, 0.5f}};
  const std::vector<int32_t> prompt = {1, 2, 3, 2, 5};
  Sampler sampler(s, 1234);
  sampler.set_prompt(prompt);
  std::map<int32_t, int32_t> generated;
  for (int step = 0; step < 30; ++step) {
    const std::vector<float> row = random_row(rng, vocab, 3.0f);
    // The edit list by hand: every prompt, biased or generated token once.
    std::map<int32_t, TokenEdit> by_token;
    for (int32_t t : prompt) by_token[t] = TokenEdit{t, 0.0f, 0, 1};
    by_token[5].token = 5;
    by_token[5].bias = 2.5f;
    by_token[6] = TokenEdit{6, -100.0f, 0, 0};
    for (auto [t, n] : generated) {
      by_token[t].token = t;
      by_token[t].generated_count = n;
    }
    std::vector<TokenEdit> edits;
    for (const auto& [t, e] : by_token) edits.push_back(e);
    SamplingRowParams r;
    r.temperature = s.temperature;
    r.top_k = s.top_k;
    r.top_p = s.top_p;
    r.min_p = s.min_p;
    r.repetition_penalty = s.repetition_penalty;
    r.frequency_penalty = s.frequency_penalty;
    r.presence_penalty = s.presence_penalty;
    r.seed = 1234;
    r.step = step;
    r.edit_count = static_cast<int32_t>(edits.size());
    int32_t want = -1;
    uint32_t error = 0;
    SampleRowsParams p;
    p.logits = row.data();
    p.rows = &r;
    p.edits = edits.data();
    p.num_edits = static_cast<int64_t>(edits.size());
    p.num_rows = 1;
    p.vocab_size = vocab;
    p.tokens = &want;
    p.errors = &error;
    sample_rows_cpu(p);
    const int32_t got = sampler.sample(row.data(), vocab);
    ASSERT_EQ(got, want) << "step " << step << "; " << seed_note();
    ASSERT_NE(got, 6) << "a -100 bias bans the token";
    ++generated[got];
  }
}

// Every token the twin draws is one the reference stages (double precision) keep: the two agree
// on the kept set except where a cut falls within rounding of a boundary, which random rows do
// not hit. The most likely kept token must also turn up, where its probability makes missing it in
// 300 draws unlikely (< 1e-9): the rows are random per process (seed_note), and a flat row with a
// top token of a few per cent misses it now and then (CI, 2026-12-01).
TEST(SamplerChain, DrawsStayInTheSetTheStagesKeep) {
  auto rng = make_rng(10);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t vocab = 50 + trial * 13;
    const std::vector<float> logits = random_row(rng, vocab, 1.0f + static_cast<float>(trial % 5));
    SamplerSettings s;
    s.temperature = 0.4f + 0.2f * static_cast<float>(trial % 6);
    s.top_k = trial % 3 == 0 ? 0 : 5 + trial;
    s.top_p = trial % 2 ? 0.7f : 1.0f;
    s.min_p = trial % 4 == 1 ? 0.05f : 0.0f;
    std::vector<float> scaled = logits;
    apply_temperature(scaled.data(), vocab, s.temperature);
    Candidates c = rank_candidates(scaled.data(), vocab, s.top_k);
    apply_top_k(c, s.top_k);
    apply_top_p(c, s.top_p);
    apply_min_p(c, s.min_p);
    const std::set<int32_t> kept(c.ids.begin(), c.ids.end());
    std::set<int32_t> drawn;
    for (uint64_t seed = 0; seed < 300; ++seed) {
      Sampler sampler(s, seed * 7919 + static_cast<uint64_t>(trial));
      const int32_t t = sampler.sample(logits.data(), vocab);
      ASSERT_TRUE(kept.count(t)) << "trial " << trial << " drew " << t << "; " << seed_note();
      drawn.insert(t);
    }
    double mass = 0.0;  // sum over the kept tokens of exp(s - s_top): 1 / P(top token)
    for (const float v : c.logits) mass += std::exp(static_cast<double>(v) - c.logits[0]);
    if (std::pow(1.0 - 1.0 / mass, 300.0) < 1e-9) {
      EXPECT_EQ(drawn.count(c.ids[0]), 1u)
          << "trial " << trial << ": the most likely token (p = " << 1.0 / mass
          << ") is drawn at least once in 300; " << seed_note();
    }
  }
}

TEST(Sampler, NonFiniteLogitsAndBadSettingsAreErrors) {
  std::vector<float> row = {0.0f, 1.0f, kInf, 2.0f};
  Sampler greedy(SamplerSettings{}, 1);
  EXPECT_EQ(greedy.sample(row.data(), 4), -1);
  EXPECT_EQ(greedy.last_error(), kSamplingNonFiniteLogits);
  EXPECT_EQ(greedy.last_nonfinite(), 1);
  row[2] = 0.5f;
  EXPECT_EQ(greedy.sample(row.data(), 4), 3);
  EXPECT_EQ(greedy.last_error(), 0u);
  SamplerSettings bad;
  bad.temperature = kInf;
  Sampler hot(bad, 1);
  EXPECT_EQ(hot.sample(row.data(), 4), -1);
  EXPECT_EQ(hot.last_error(), kSamplingBadParams);
}

}  // namespace
}  // namespace roofline
