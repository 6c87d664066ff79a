// add_cpu against a double-precision sum, over awkward sizes and with the output aliasing an input.
#include "ops/add/add.h"

#include <gtest/gtest.h>

#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

using testing::all_close;
using testing::make_rng;
using testing::poison;
using testing::random_vector;

// One f32 add rounds once: |error| <= 2^-24·|a + b| < 1e-7·|ref|, and no absolute slack is needed.
constexpr double kAtol = 0.0;
constexpr double kRtol = 1e-7;

std::vector<double> reference_add(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = static_cast<double>(a[i]) + b[i];
  return out;
}

class AddTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(AddTest, MatchesReference) {
  const int64_t n = GetParam();
  auto rng = make_rng(static_cast<uint64_t>(n));
  auto a = random_vector(n, rng, -100.0f, 100.0f);
  auto b = random_vector(n, rng, -100.0f, 100.0f);
  std::vector<float> out(static_cast<size_t>(n));
  poison(out);
  add_cpu({a.data(), b.data(), out.data(), n});
  EXPECT_TRUE(all_close(out, reference_add(a, b), kAtol, kRtol));
}

TEST_P(AddTest, OutputMayAliasEitherInput) {
  const int64_t n = GetParam();
  auto rng = make_rng(static_cast<uint64_t>(n) + 1000);
  auto a = random_vector(n, rng);
  auto b = random_vector(n, rng);
  const auto expected = reference_add(a, b);
  auto a_copy = a;
  auto b_copy = b;
  add_cpu({a_copy.data(), b.data(), a_copy.data(), n});
  EXPECT_TRUE(all_close(a_copy, expected, kAtol, kRtol));
  add_cpu({a.data(), b_copy.data(), b_copy.data(), n});
  EXPECT_TRUE(all_close(b_copy, expected, kAtol, kRtol));
}

// 1 << 17 + 3 spans several pool chunks with an uneven tail.
INSTANTIATE_TEST_SUITE_P(Sizes, AddTest,
                         ::testing::Values(1, 3, 7, 19, 67, 733, (int64_t{1} << 17) + 3));

TEST(AddTest, ZeroElementsIsANoOp) { add_cpu({nullptr, nullptr, nullptr, 0}); }

}  // namespace
}  // namespace roofline
