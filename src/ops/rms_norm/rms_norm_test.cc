// rms_norm_cpu and rms_norm_residual_cpu against a double-precision RMSNorm, plus the properties
// the executor relies on: out may alias x, the fused form equals add then norm, f16/bf16 weights.
#include "ops/rms_norm/rms_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "ops/add/add.h"
#include "ops/rms_norm/rms_norm_launch.h"
#include "ops/rms_norm/rms_norm_shapes.h"
#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::make_rng;
using testing::poison;
using testing::random_vector;

// fp32 sum of squares over up to 8192 elements is good to ~1e-6 relative; the rest is a handful of
// roundings.
constexpr double kAtol = 1e-5;
constexpr double kRtol = 1e-5;
constexpr float kEps = 1e-6f;

std::vector<double> reference_rms_norm(const std::vector<float>& x, const std::vector<float>& w,
                                       int64_t rows, int64_t hidden, double eps) {
  std::vector<double> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int64_t i = 0; i < hidden; ++i) {
      const double v = x[static_cast<size_t>(r * hidden + i)];
      sum += v * v;
    }
    const double scale = 1.0 / std::sqrt(sum / static_cast<double>(hidden) + eps);
    for (int64_t i = 0; i < hidden; ++i) {
      out[static_cast<size_t>(r * hidden + i)] =
          x[static_cast<size_t>(r * hidden + i)] * scale * w[static_cast<size_t>(i)];
    }
  }
  return out;
}

// A weight stored in dtype, and its exact f32 values (rounded through dtype first).
struct Weight {
  std::vector<uint16_t> half_bits;
  std::vector<float> values;
  const void* data() const {
    return half_bits.empty() ? static_cast<const void*>(values.data()) : half_bits.data();
  }
};

Weight make_weight(DType dtype, int64_t hidden, std::mt19937_64& rng) {
  Weight w;
  w.values = random_vector(hidden, rng, 0.5f, 1.5f);
  if (dtype == DType::kF32) return w;
  for (float& v : w.values) {
    const uint16_t bits = dtype == DType::kF16 ? f32_to_f16_bits(v) : f32_to_bf16_bits(v);
    w.half_bits.push_back(bits);
    v = dtype == DType::kF16 ? f16_bits_to_f32(bits) : bf16_bits_to_f32(bits);
  }
  return w;
}

class RmsNormTest : public ::testing::TestWithParam<std::tuple<RmsNormShape, DType>> {};

TEST_P(RmsNormTest, MatchesReference) {
  const auto [shape, dtype] = GetParam();
  const auto [rows, hidden] = shape;
  auto rng = make_rng(static_cast<uint64_t>(rows * 100000 + hidden) * 8 + static_cast<int>(dtype));
  auto x = random_vector(rows * hidden, rng, -3.0f, 3.0f);
  const Weight w = make_weight(dtype, hidden, rng);
  std::vector<float> out(x.size());
  poison(out);
  rms_norm_cpu({x.data(), w.data(), dtype, out.data(), rows, hidden, kEps});
  EXPECT_TRUE(all_close(out, reference_rms_norm(x, w.values, rows, hidden, kEps), kAtol, kRtol));

  // In place gives the same bits.
  auto in_place = x;
  rms_norm_cpu({in_place.data(), w.data(), dtype, in_place.data(), rows, hidden, kEps});
  EXPECT_TRUE(all_equal(in_place, out));
}

TEST_P(RmsNormTest, ResidualEqualsAddThenNorm) {
  const auto [shape, dtype] = GetParam();
  const auto [rows, hidden] = shape;
  auto rng =
      make_rng(static_cast<uint64_t>(rows * 100000 + hidden) * 8 + static_cast<int>(dtype) + 1);
  auto x = random_vector(rows * hidden, rng, -3.0f, 3.0f);
  auto residual = random_vector(rows * hidden, rng, -3.0f, 3.0f);
  const Weight w = make_weight(dtype, hidden, rng);

  std::vector<float> sum(x.size()), expected(x.size());
  add_cpu({residual.data(), x.data(), sum.data(), rows * hidden});
  rms_norm_cpu({sum.data(), w.data(), dtype, expected.data(), rows, hidden, kEps});

  std::vector<float> residual_out(x.size()), out(x.size());
  poison(residual_out);
  poison(out);
  rms_norm_residual_cpu({x.data(), residual.data(), residual_out.data(), w.data(), dtype,
                         out.data(), rows, hidden, kEps});
  EXPECT_TRUE(all_equal(residual_out, sum));
  EXPECT_TRUE(all_equal(out, expected));

  // Against double too, so the fused form is not merely consistent with a wrong rms_norm.
  EXPECT_TRUE(all_close(out, reference_rms_norm(sum, w.values, rows, hidden, kEps), kAtol, kRtol));

  // The executor updates the residual stream in place and may write the norm over x.
  auto residual_inout = residual;
  auto x_inout = x;
  rms_norm_residual_cpu({x_inout.data(), residual_inout.data(), residual_inout.data(), w.data(),
                         dtype, x_inout.data(), rows, hidden, kEps});
  EXPECT_TRUE(all_equal(residual_inout, sum));
  EXPECT_TRUE(all_equal(x_inout, expected));
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormTest,
                         ::testing::Combine(::testing::ValuesIn(kRmsNormShapes),
                                            ::testing::Values(DType::kF32, DType::kF16,
                                                              DType::kBF16)));

TEST(RmsNormTest, LargeAndTinyRowsScaleCorrectly) {
  // RMSNorm is scale invariant up to eps: rows of magnitude 1e4 and 1e-2 normalise alike.
  constexpr int64_t kHidden = 67;
  auto rng = make_rng(7);
  auto base = random_vector(kHidden, rng);
  std::vector<float> x;
  for (float s : {1e4f, 1e-2f}) {
    for (float v : base) x.push_back(v * s);
  }
  std::vector<float> w(kHidden, 1.0f), out(x.size());
  poison(out);
  rms_norm_cpu({x.data(), w.data(), DType::kF32, out.data(), 2, kHidden, kEps});
  EXPECT_TRUE(all_close(out, reference_rms_norm(x, w, 2, kHidden, kEps), kAtol, kRtol));
}

// The CUDA launch shape (a pure host heuristic): whole warps, within the block limit, the row
// covered by threads x items packs, and the fewest items that do so; two passes only when even
// kRmsNormMaxItems packs per thread cannot hold the row.
TEST(RmsNormLaunchShapeTest, CoversTheRowWithTheFewestItems) {
  for (const int vec : {1, 4, 8}) {
    for (int64_t hidden = vec; hidden <= 70000; hidden += hidden < 2048 ? vec : 97 * vec) {
      const RmsNormLaunchShape s = rms_norm_launch_shape(hidden, vec);
      const int64_t packs = (hidden + vec - 1) / vec;
      ASSERT_EQ(s.threads % 32, 0) << hidden;
      ASSERT_GE(s.threads, 32) << hidden;
      ASSERT_LE(s.threads, kRmsNormMaxThreads) << hidden;
      if (s.items == 0) {
        ASSERT_GT(packs, int64_t{kRmsNormMaxThreads} * kRmsNormMaxItems) << hidden;
        continue;
      }
      ASSERT_TRUE(s.items == 1 || s.items == 2 || s.items == 4) << hidden;
      ASSERT_GE(int64_t{s.threads} * s.items, packs) << hidden;
      ASSERT_LT(int64_t{s.threads} - 32, (packs + s.items - 1) / s.items) << "no idle warp";
      if (s.items > 1) {
        ASSERT_GT(packs, int64_t{kRmsNormMaxThreads} * (s.items / 2)) << "fewer items would do";
      }
    }
  }
  EXPECT_EQ(rms_norm_launch_shape(4096, 8).threads, 256);
  EXPECT_EQ(rms_norm_launch_shape(4096, 8).items, 2);
  EXPECT_EQ(rms_norm_launch_shape(5120, 8).threads, 160);
  EXPECT_EQ(rms_norm_launch_shape(5120, 8).items, 4);
  EXPECT_EQ(rms_norm_launch_shape(896, 8).threads, 128);
  EXPECT_EQ(rms_norm_launch_shape(67, 1).threads, 96);
  EXPECT_EQ(rms_norm_launch_shape(16384, 8).items, 0);
}

}  // namespace
}  // namespace roofline
