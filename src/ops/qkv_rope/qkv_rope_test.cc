// qkv_rope_cpu against a double-precision norm-then-rotate reference, and the known properties:
// position 0 is the identity, rotation preserves the norm of each (i, i + d/2) pair, k/v land in
// their slots and nothing else in the cache changes, skipped slots (-1) are untouched, and the
// qk-norm stage equals rms_norm applied per head before a plain rotation.
#include "ops/qkv_rope/qkv_rope.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "ops/rms_norm/rms_norm.h"
#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::make_rng;
using testing::poison;
using testing::random_vector;

// f32 cos/sin are within an ulp and a rotation adds two roundings; the optional norm adds ~1e-6.
constexpr double kAtol = 1e-5;
constexpr double kRtol = 1e-5;
constexpr float kEps = 1e-6f;
constexpr float kCacheSentinel = -777.0f;

struct Case {
  int64_t num_tokens;
  int64_t num_heads;
  int64_t num_kv_heads;
  int64_t head_dim;
  int64_t block_size;
  bool qk_norm;
};

std::ostream& operator<<(std::ostream& os, const Case& c) {
  return os << "tokens" << c.num_tokens << "_h" << c.num_heads << "_kv" << c.num_kv_heads << "_d"
            << c.head_dim << "_bs" << c.block_size << (c.qk_norm ? "_qknorm" : "");
}

// Frequencies as transformers computes them (in f32): 1 / theta^(2i/d).
std::vector<float> make_inv_freq(int64_t head_dim, float theta = 10000.0f) {
  std::vector<float> f(static_cast<size_t>(head_dim / 2));
  for (size_t i = 0; i < f.size(); ++i) {
    f[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
  }
  return f;
}

// Normalise (optionally) and rotate one head in double. The angle is rounded to f32 first, as the
// op (and torch) computes it, so large positions compare like for like.
std::vector<double> reference_head(const float* x, const std::vector<float>* norm_weight,
                                   int32_t position, const std::vector<float>& inv_freq,
                                   int64_t d) {
  std::vector<double> v(x, x + d);
  if (norm_weight) {
    double sum = 0.0;
    for (double e : v) sum += e * e;
    const double scale = 1.0 / std::sqrt(sum / static_cast<double>(d) + kEps);
    for (int64_t i = 0; i < d; ++i)
      v[static_cast<size_t>(i)] *= scale * (*norm_weight)[static_cast<size_t>(i)];
  }
  std::vector<double> out(static_cast<size_t>(d));
  const int64_t half = d / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<float>(position) * inv_freq[static_cast<size_t>(i)];
    const double c = std::cos(angle), s = std::sin(angle);
    out[static_cast<size_t>(i)] =
        v[static_cast<size_t>(i)] * c - v[static_cast<size_t>(i + half)] * s;
    out[static_cast<size_t>(i + half)] =
        v[static_cast<size_t>(i + half)] * c + v[static_cast<size_t>(i)] * s;
  }
  return out;
}

struct RopeInputs {
  Case c;
  int64_t num_blocks = 0;
  std::vector<float> qkv, q_out, k_cache, v_cache, inv_freq, q_norm, k_norm;
  std::vector<int32_t> positions;
  std::vector<int64_t> slots;

  QkvRopeParams params() {
    QkvRopeParams p;
    p.qkv = qkv.data();
    p.q_out = q_out.data();
    p.positions = positions.data();
    p.slot_mapping = slots.data();
    p.k_cache = k_cache.data();
    p.v_cache = v_cache.data();
    p.inv_freq = inv_freq.data();
    if (c.qk_norm) {
      p.q_norm_weight = q_norm.data();
      p.k_norm_weight = k_norm.data();
    }
    p.norm_eps = kEps;
    p.num_tokens = c.num_tokens;
    p.num_heads = c.num_heads;
    p.num_kv_heads = c.num_kv_heads;
    p.head_dim = c.head_dim;
    p.block_size = c.block_size;
    p.num_blocks = num_blocks;
    return p;
  }
};

// Random inputs; slots are a shuffled subset of a cache with spare room, every fifth token skipped.
RopeInputs make_inputs(const Case& c, std::mt19937_64& rng) {
  RopeInputs s;
  s.c = c;
  const int64_t d = c.head_dim;
  s.num_blocks = (c.num_tokens + c.block_size - 1) / c.block_size + 2;
  const int64_t num_slots = s.num_blocks * c.block_size;
  s.qkv = random_vector(c.num_tokens * (c.num_heads + 2 * c.num_kv_heads) * d, rng, -2.0f, 2.0f);
  s.q_out.resize(static_cast<size_t>(c.num_tokens * c.num_heads * d));
  poison(s.q_out);
  s.k_cache.assign(static_cast<size_t>(num_slots * c.num_kv_heads * d), kCacheSentinel);
  s.v_cache = s.k_cache;
  s.inv_freq = make_inv_freq(d);
  s.q_norm = random_vector(d, rng, 0.5f, 1.5f);
  s.k_norm = random_vector(d, rng, 0.5f, 1.5f);
  std::uniform_int_distribution<int32_t> pos(0, 5000);
  for (int64_t t = 0; t < c.num_tokens; ++t) s.positions.push_back(pos(rng));
  std::vector<int64_t> all_slots(static_cast<size_t>(num_slots));
  std::iota(all_slots.begin(), all_slots.end(), 0);
  std::shuffle(all_slots.begin(), all_slots.end(), rng);
  for (int64_t t = 0; t < c.num_tokens; ++t) {
    s.slots.push_back(t % 5 == 4 ? -1 : all_slots[static_cast<size_t>(t)]);
  }
  return s;
}

class QkvRopeTest : public ::testing::TestWithParam<Case> {};

TEST_P(QkvRopeTest, MatchesReferenceAndFillsOnlyItsSlots) {
  const Case c = GetParam();
  auto rng = make_rng(static_cast<uint64_t>(c.num_tokens * 1000003 + c.num_heads * 1009 +
                                            c.num_kv_heads * 101 + c.head_dim * 7 + c.block_size) *
                          2 +
                      c.qk_norm);
  RopeInputs s = make_inputs(c, rng);
  qkv_rope_cpu(s.params());

  const int64_t d = c.head_dim;
  const int64_t row = (c.num_heads + 2 * c.num_kv_heads) * d;
  const int64_t kv_row = c.num_kv_heads * d;
  std::vector<double> q_expected;
  std::vector<float> expected_v(s.v_cache.size(), kCacheSentinel);
  std::vector<double> k_expected_d(s.k_cache.size(), kCacheSentinel);
  for (int64_t t = 0; t < c.num_tokens; ++t) {
    const float* x = s.qkv.data() + t * row;
    for (int64_t h = 0; h < c.num_heads; ++h) {
      auto head = reference_head(x + h * d, c.qk_norm ? &s.q_norm : nullptr,
                                 s.positions[static_cast<size_t>(t)], s.inv_freq, d);
      q_expected.insert(q_expected.end(), head.begin(), head.end());
    }
    const int64_t slot = s.slots[static_cast<size_t>(t)];
    if (slot < 0) continue;
    for (int64_t h = 0; h < c.num_kv_heads; ++h) {
      auto head = reference_head(x + (c.num_heads + h) * d, c.qk_norm ? &s.k_norm : nullptr,
                                 s.positions[static_cast<size_t>(t)], s.inv_freq, d);
      std::copy(head.begin(), head.end(), k_expected_d.begin() + slot * kv_row + h * d);
    }
    // v is copied, never transformed: exact.
    std::copy(x + (c.num_heads + c.num_kv_heads) * d, x + row, expected_v.begin() + slot * kv_row);
  }
  EXPECT_TRUE(all_close(s.q_out, q_expected, kAtol, kRtol));
  // Untouched slots keep the sentinel exactly; written ones match within tolerance.
  EXPECT_TRUE(all_close(s.k_cache, k_expected_d, kAtol, kRtol));
  EXPECT_TRUE(all_equal(s.v_cache, expected_v));
}

TEST_P(QkvRopeTest, PositionZeroIsIdentityAndRotationKeepsPairNorms) {
  Case c = GetParam();
  c.qk_norm = false;  // the properties are of the rotation alone
  auto rng = make_rng(static_cast<uint64_t>(c.num_tokens * 31 + c.head_dim));
  RopeInputs s = make_inputs(c, rng);
  const int64_t d = c.head_dim;
  const int64_t half = d / 2;
  const int64_t row = (c.num_heads + 2 * c.num_kv_heads) * d;
  for (int64_t t = 0; t < c.num_tokens; t += 2) s.positions[static_cast<size_t>(t)] = 0;
  qkv_rope_cpu(s.params());
  for (int64_t t = 0; t < c.num_tokens; ++t) {
    for (int64_t h = 0; h < c.num_heads; ++h) {
      const float* in = s.qkv.data() + t * row + h * d;
      const float* out = s.q_out.data() + (t * c.num_heads + h) * d;
      for (int64_t i = 0; i < half; ++i) {
        if (t % 2 == 0) {  // cos 0 = 1 and sin 0 = 0 exactly: the rotation is the identity
          ASSERT_EQ(out[i], in[i]) << "token " << t << " head " << h << " i " << i;
          ASSERT_EQ(out[i + half], in[i + half]);
        }
        const double in_norm = std::hypot(double{in[i]}, double{in[i + half]});
        const double out_norm = std::hypot(double{out[i]}, double{out[i + half]});
        ASSERT_NEAR(out_norm, in_norm, 1e-6 + 1e-6 * in_norm)
            << "token " << t << " head " << h << " pair " << i << "; " << testing::seed_note();
      }
    }
  }
}

TEST_P(QkvRopeTest, QkNormEqualsRmsNormThenRope) {
  Case c = GetParam();
  c.qk_norm = true;  // the property is of the norm stage
  auto rng = make_rng(static_cast<uint64_t>(c.num_tokens * 37 + c.head_dim));
  RopeInputs fused = make_inputs(c, rng);
  qkv_rope_cpu(fused.params());

  // Manual: rms_norm_cpu over every q and k head (rows of head_dim), then rope without the norm.
  RopeInputs manual = fused;
  manual.c.qk_norm = false;
  poison(manual.q_out);
  std::fill(manual.k_cache.begin(), manual.k_cache.end(), kCacheSentinel);
  const int64_t d = c.head_dim;
  const int64_t row = (c.num_heads + 2 * c.num_kv_heads) * d;
  for (int64_t t = 0; t < c.num_tokens; ++t) {
    float* q = manual.qkv.data() + t * row;
    float* k = q + c.num_heads * d;
    rms_norm_cpu({q, manual.q_norm.data(), DType::kF32, q, c.num_heads, d, kEps});
    rms_norm_cpu({k, manual.k_norm.data(), DType::kF32, k, c.num_kv_heads, d, kEps});
  }
  qkv_rope_cpu(manual.params());
  // The two norms sum squares in different orders: equal to a few ulp, not bitwise.
  EXPECT_TRUE(all_close(fused.q_out, manual.q_out, 1e-6, 1e-5));
  EXPECT_TRUE(all_close(fused.k_cache, manual.k_cache, 1e-6, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, QkvRopeTest,
    ::testing::Values(Case{1, 4, 4, 8, 16, false}, Case{3, 8, 2, 16, 5, false},
                      Case{7, 7, 1, 32, 1, true}, Case{19, 28, 4, 64, 16, true},
                      Case{19, 4, 4, 128, 5, false}, Case{733, 14, 2, 64, 16, false},
                      Case{733, 16, 8, 128, 16, true}, Case{5, 7, 7, 2, 5, true}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::ostringstream os;
      os << info.param;
      return os.str();
    });

TEST(QkvRopeDeathTest, SlotBeyondTheCacheAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto rng = make_rng(99);
  RopeInputs s = make_inputs(Case{1, 1, 1, 4, 2, false}, rng);
  s.slots[0] = s.num_blocks * s.c.block_size;  // one past the last slot
  EXPECT_DEATH(qkv_rope_cpu(s.params()), "slot_mapping entry beyond the KV cache");
}

}  // namespace
}  // namespace roofline
