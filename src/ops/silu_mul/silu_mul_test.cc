// silu_mul_cpu against silu(gate)·up computed in double, over awkward shapes and extreme gates.
#include "ops/silu_mul/silu_mul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

using testing::all_close;
using testing::make_rng;
using testing::poison;
using testing::random_vector;

// f32 exp is within a couple of ulp and four more roundings follow: a few 1e-7 relative.
constexpr double kAtol = 1e-6;
constexpr double kRtol = 1e-5;

std::vector<double> reference_silu_mul(const std::vector<float>& gate_up, int64_t tokens,
                                       int64_t inter) {
  std::vector<double> out(static_cast<size_t>(tokens * inter));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < inter; ++i) {
      const double g = gate_up[static_cast<size_t>(t * 2 * inter + i)];
      const double u = gate_up[static_cast<size_t>(t * 2 * inter + inter + i)];
      out[static_cast<size_t>(t * inter + i)] = g / (1.0 + std::exp(-g)) * u;
    }
  }
  return out;
}

class SiluMulTest : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(SiluMulTest, MatchesReference) {
  const auto [tokens, inter] = GetParam();
  auto rng = make_rng(static_cast<uint64_t>(tokens * 100000 + inter));
  auto gate_up = random_vector(tokens * 2 * inter, rng, -8.0f, 8.0f);
  std::vector<float> out(static_cast<size_t>(tokens * inter));
  poison(out);
  silu_mul_cpu({gate_up.data(), out.data(), tokens, inter});
  EXPECT_TRUE(all_close(out, reference_silu_mul(gate_up, tokens, inter), kAtol, kRtol));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SiluMulTest,
                         ::testing::Combine(::testing::Values(1, 3, 7, 19, 733),
                                            ::testing::Values(1, 67, 256)));

TEST(SiluMulTest, ExtremeGatesStayFinite) {
  // exp(-g) overflows for g << 0; silu must tend to 0, not NaN. For g >> 0, silu(g) = g.
  std::vector<float> gate_up = {-200.0f, -88.0f, 0.0f, 88.0f, 200.0f,
                                3.0f,    5.0f,   7.0f, 11.0f, 13.0f};
  std::vector<float> out(5);
  poison(out);
  silu_mul_cpu({gate_up.data(), out.data(), 1, 5});
  EXPECT_TRUE(all_close(out, reference_silu_mul(gate_up, 1, 5), kAtol, kRtol));
}

}  // namespace
}  // namespace roofline
