// rms_norm_cuda and rms_norm_residual_cuda against their CPU twins on every element, over
// activation dtypes (bf16, f32) x weight dtypes (bf16, f16, f32) x awkward shapes: hidden sizes on
// the 16-byte path (64, 896, 4096, 5120), on the one-element path (67, 130: not a multiple of the
// pack), and past the register-resident limit (1030 one-element, 16384 16-byte: the two-pass
// kernel). Fresh random inputs, outputs poisoned with NaN first, aliasing (in place) and
// misaligned pointers; every kernel variant (rms_norm_launch.h) on every case. The GPU cases skip
// themselves without a GPU; the variant-shape heuristic is checked on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "ops/rms_norm/rms_norm.h"
#include "ops/rms_norm/rms_norm_cuda_variant.h"
#include "ops/rms_norm/rms_norm_launch.h"
#include "ops/testing/gpu_dtype_util.h"
#include "ops/testing/gpu_test_util.h"
#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::DeviceBuffer;
using testing::download_as_f32;
using testing::make_rng;
using testing::random_vector;
using testing::round_to;
using testing::upload_as;

constexpr float kEps = 1e-6f;

// Tolerance atol + rtol·|ref| against the CPU twin run in f32 on the same (rounded) inputs:
// - The two f32 sums of squares differ in order: the CPU sums hidden/8 terms per lane, so each is
//   within (hidden/8)·2^-24 relative of the exact sum (all terms positive): 3.8e-5 at hidden 5120,
//   halved by the square root, plus a few ulp of division and products. rtol 3e-5 covers it.
// - bf16 output: one more rounding to 8 significant bits, at most 2^-8 relative.
// - atol 1e-6 only absorbs outputs near 0, where relative bounds say nothing useful.
double rtol_for(DType dtype) { return (dtype == DType::kBF16 ? std::ldexp(1.0, -8) : 0.0) + 3e-5; }
constexpr double kAtol = 1e-6;

// dtype, weight dtype, rows, hidden, kernel variant
using Case = std::tuple<DType, DType, int64_t, int64_t, int>;

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const auto [dtype, weight_dtype, rows, hidden, variant] = info.param;
  return std::string(dtype_name(dtype)) + "_w" + dtype_name(weight_dtype) + "_rows" +
         std::to_string(rows) + "_hidden" + std::to_string(hidden) + "_" +
         kRmsNormVariants[variant].name;
}

class RmsNormCudaTest : public ::testing::TestWithParam<Case> {};

TEST_P(RmsNormCudaTest, NormMatchesCpu) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  const auto [dtype, weight_dtype, rows, hidden, variant] = GetParam();
  auto rng = make_rng(static_cast<uint64_t>(rows * 100003 + hidden) * 16 +
                      static_cast<int>(dtype) * 4 + static_cast<int>(weight_dtype));
  const auto x = round_to(random_vector(rows * hidden, rng, -3.0f, 3.0f), dtype);
  const auto w = round_to(random_vector(hidden, rng, 0.5f, 1.5f), weight_dtype);

  DeviceBuffer d_x = upload_as(x, dtype);
  DeviceBuffer d_w = upload_as(w, weight_dtype);
  DeviceBuffer d_out(x.size() * static_cast<size_t>(dtype_size_bytes(dtype)));
  d_out.poison();
  RmsNormParams p;
  p.x = d_x.get();
  p.weight = d_w.get();
  p.weight_dtype = weight_dtype;
  p.out = d_out.get();
  p.num_rows = rows;
  p.hidden = hidden;
  p.eps = kEps;
  p.dtype = dtype;
  rms_norm_cuda_variant(p, variant, nullptr);
  const auto out = download_as_f32(d_out, dtype);

  std::vector<float> expected(x.size());
  rms_norm_cpu({x.data(), w.data(), DType::kF32, expected.data(), rows, hidden, kEps});
  EXPECT_TRUE(all_close(out, expected, kAtol, rtol_for(dtype)));

  // In place (out aliases x) gives the same bits.
  p.out = d_x.get();
  rms_norm_cuda_variant(p, variant, nullptr);
  EXPECT_TRUE(all_equal(download_as_f32(d_x, dtype), out));
}

TEST_P(RmsNormCudaTest, ResidualMatchesCpuWithTheRoundingPointDocumented) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  const auto [dtype, weight_dtype, rows, hidden, variant] = GetParam();
  auto rng = make_rng(static_cast<uint64_t>(rows * 100003 + hidden) * 16 +
                      static_cast<int>(dtype) * 4 + static_cast<int>(weight_dtype) + 1000);
  const auto x = round_to(random_vector(rows * hidden, rng, -3.0f, 3.0f), dtype);
  const auto residual = round_to(random_vector(rows * hidden, rng, -3.0f, 3.0f), dtype);
  const auto w = round_to(random_vector(hidden, rng, 0.5f, 1.5f), weight_dtype);

  const size_t bytes = x.size() * static_cast<size_t>(dtype_size_bytes(dtype));
  DeviceBuffer d_x = upload_as(x, dtype);
  DeviceBuffer d_residual = upload_as(residual, dtype);
  DeviceBuffer d_w = upload_as(w, weight_dtype);
  DeviceBuffer d_residual_out(bytes), d_out(bytes);
  d_residual_out.poison();
  d_out.poison();
  RmsNormResidualParams p;
  p.x = d_x.get();
  p.residual_in = d_residual.get();
  p.residual_out = d_residual_out.get();
  p.weight = d_w.get();
  p.weight_dtype = weight_dtype;
  p.out = d_out.get();
  p.num_rows = rows;
  p.hidden = hidden;
  p.eps = kEps;
  p.dtype = dtype;
  rms_norm_residual_cuda_variant(p, variant, nullptr);
  const auto residual_out = download_as_f32(d_residual_out, dtype);
  const auto out = download_as_f32(d_out, dtype);

  // The CPU twin in f32; the GPU's residual_out is that sum rounded to dtype (the sum of two
  // values is formed in f32 by both, then rounded once): equal bit for bit.
  std::vector<float> sum(x.size()), unused(x.size());
  rms_norm_residual_cpu({x.data(), residual.data(), sum.data(), w.data(), DType::kF32,
                         unused.data(), rows, hidden, kEps});
  const auto rounded_sum = round_to(sum, dtype);
  EXPECT_TRUE(all_equal(residual_out, rounded_sum));
  // out is the norm of the rounded sum, the value the next layer sees.
  std::vector<float> expected(x.size());
  rms_norm_cpu({rounded_sum.data(), w.data(), DType::kF32, expected.data(), rows, hidden, kEps});
  EXPECT_TRUE(all_close(out, expected, kAtol, rtol_for(dtype)));

  // In place, as the executor runs it: residual_out aliases residual_in, out aliases x.
  p.residual_out = d_residual.get();
  p.out = d_x.get();
  rms_norm_residual_cuda_variant(p, variant, nullptr);
  EXPECT_TRUE(all_equal(download_as_f32(d_residual, dtype), residual_out));
  EXPECT_TRUE(all_equal(download_as_f32(d_x, dtype), out));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, RmsNormCudaTest,
    ::testing::Combine(::testing::Values(DType::kBF16, DType::kF32),
                       ::testing::Values(DType::kBF16, DType::kF16, DType::kF32),
                       ::testing::Values(1, 3, 7, 19, 733),
                       ::testing::Values(64, 67, 130, 896, 1030, 4096, 5120, 16384),
                       ::testing::Range(0, kRmsNormNumVariants)),
    case_name);

// Pointers one element past a 16-byte boundary force the one-element path even for hidden 4096.
TEST(RmsNormCudaTest, MisalignedPointersMatchCpu) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr int64_t kRows = 19, kHidden = 4096;
  constexpr DType kDType = DType::kBF16;
  auto rng = make_rng(4242);
  const auto x = round_to(random_vector(kRows * kHidden, rng, -3.0f, 3.0f), kDType);
  const auto residual = round_to(random_vector(kRows * kHidden, rng, -3.0f, 3.0f), kDType);
  const auto w = round_to(random_vector(kHidden, rng, 0.5f, 1.5f), kDType);
  // Each buffer holds one leading pad element, then the tensor.
  auto padded = [](const std::vector<float>& v) {
    std::vector<float> out(v.size() + 1, 0.0f);
    std::copy(v.begin(), v.end(), out.begin() + 1);
    return out;
  };
  DeviceBuffer d_x = upload_as(padded(x), kDType);
  DeviceBuffer d_residual = upload_as(padded(residual), kDType);
  DeviceBuffer d_w = upload_as(padded(w), kDType);
  DeviceBuffer d_residual_out((x.size() + 1) * 2), d_out((x.size() + 1) * 2);
  d_residual_out.poison();
  d_out.poison();
  RmsNormResidualParams p;
  p.x = d_x.get<uint16_t>() + 1;
  p.residual_in = d_residual.get<uint16_t>() + 1;
  p.residual_out = d_residual_out.get<uint16_t>() + 1;
  p.weight = d_w.get<uint16_t>() + 1;
  p.weight_dtype = kDType;
  p.out = d_out.get<uint16_t>() + 1;
  p.num_rows = kRows;
  p.hidden = kHidden;
  p.eps = kEps;
  p.dtype = kDType;
  std::vector<float> sum(x.size()), unused(x.size()), expected(x.size());
  rms_norm_residual_cpu({x.data(), residual.data(), sum.data(), w.data(), DType::kF32,
                         unused.data(), kRows, kHidden, kEps});
  const auto rounded_sum = round_to(sum, kDType);
  rms_norm_cpu({rounded_sum.data(), w.data(), DType::kF32, expected.data(), kRows, kHidden, kEps});
  for (int variant = 0; variant < kRmsNormNumVariants; ++variant) {
    SCOPED_TRACE(kRmsNormVariants[variant].name);
    d_residual_out.poison();
    d_out.poison();
    rms_norm_residual_cuda_variant(p, variant, nullptr);
    auto residual_out = download_as_f32(d_residual_out, kDType);
    auto out = download_as_f32(d_out, kDType);
    residual_out.erase(residual_out.begin());
    out.erase(out.begin());
    EXPECT_TRUE(all_equal(residual_out, rounded_sum));
    EXPECT_TRUE(all_close(out, expected, kAtol, rtol_for(kDType)));
  }
}

// Every variant's shape (a pure host heuristic, no GPU needed): whole warps, the block within the
// 256 threads every kernel is compiled for, the row covered by threads x items, items within the
// registers each pack width allows (8 only for bf16 16-byte packs, 2 on the one-element path).
TEST(RmsNormVariantShapeTest, CoversTheRowWithinTheBlockAndRegisterLimits) {
  for (int v = 0; v < kRmsNormNumVariants; ++v) {
    const RmsNormVariant& variant = kRmsNormVariants[v];
    for (const int vec : {1, 4, 8}) {
      const int cap = vec == 8 ? 8 : vec == 1 ? 2 : 4;
      for (int64_t hidden = vec; hidden <= 70000; hidden += hidden < 2048 ? vec : 97 * vec) {
        const RmsNormLaunchShape s = rms_norm_variant_shape(variant, hidden, vec);
        const int64_t packs = (hidden + vec - 1) / vec;
        ASSERT_EQ(s.threads % 32, 0) << variant.name << " " << hidden;
        ASSERT_LE(s.threads, variant.threads_per_row) << variant.name << " " << hidden;
        ASSERT_LE(s.threads * variant.rows_per_block, kRmsNormMaxThreads) << variant.name;
        ASSERT_LE(s.items, cap) << variant.name << " " << hidden;
        if (s.items == 0) {
          ASSERT_GT(packs, int64_t{variant.threads_per_row} * std::min(cap, variant.max_items));
        } else {
          ASSERT_GE(int64_t{s.threads} * s.items, packs) << variant.name << " " << hidden;
        }
      }
    }
  }
  EXPECT_STREQ(kRmsNormVariants[0].name, "row256");  // the old launch: 256 threads x 2 packs
  EXPECT_EQ(rms_norm_variant_shape(kRmsNormVariants[0], 4096, 8).items, 2);
  EXPECT_EQ(rms_norm_variant_shape(kRmsNormVariants[1], 4096, 8).threads, 128);
  EXPECT_EQ(rms_norm_variant_shape(kRmsNormVariants[1], 4096, 8).items, 4);
  EXPECT_EQ(rms_norm_variant_shape(kRmsNormVariants[4], 4096, 8).items, 8);
  EXPECT_EQ(rms_norm_variant_shape(kRmsNormVariants[4], 4096, 4).items, 0);
}

TEST(RmsNormCudaTest, ZeroRowsLaunchesNothing) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  RmsNormParams p;
  p.hidden = 4096;
  p.dtype = DType::kBF16;
  rms_norm_cuda(p, nullptr);
  ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace roofline
