// silu_mul_cuda against silu_mul_cpu on every element: bf16 and f32 activations, tokens 1..733,
// intermediate sizes on the 16-byte path (64, 896, 4864, 14336) and on the one-element path (67,
// 130), extreme gates, a misaligned pointer; every kernel variant (silu_mul_cuda_variant.h) on
// every case. Fresh random inputs, output poisoned with NaN first. The GPU cases skip themselves
// without a GPU; the flat layout's grid heuristic is checked on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "ops/silu_mul/silu_mul.h"
#include "ops/silu_mul/silu_mul_cuda_variant.h"
#include "ops/testing/gpu_dtype_util.h"
#include "ops/testing/gpu_test_util.h"
#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

using testing::all_close;
using testing::DeviceBuffer;
using testing::download_as_f32;
using testing::make_rng;
using testing::random_vector;
using testing::round_to;
using testing::upload_as;

// Tolerance atol + rtol·|ref| against the CPU twin in f32 on the same (rounded) inputs:
// - f32: CUDA's expf is within 2 ulp, glibc's within 1; the add, the division and the product are
//   correctly rounded on both, so the two f32 results are within ~8 ulp (5e-7) relative: 2e-6.
// - bf16 output: plus one rounding to 8 significant bits, at most 2^-8 relative.
// - atol 1e-9: only for products of two inputs that are both within ~1e-5 of 0, where a few ulp
//   of the tiny result could reach the subnormal range.
double rtol_for(DType dtype) { return (dtype == DType::kBF16 ? std::ldexp(1.0, -8) : 0.0) + 2e-6; }
constexpr double kAtol = 1e-9;

void expect_matches_cpu(const std::vector<float>& gate_up, int64_t tokens, int64_t inter,
                        DType dtype, int variant) {
  SCOPED_TRACE(kSiluMulVariants[variant].name);
  DeviceBuffer d_in = upload_as(gate_up, dtype);
  DeviceBuffer d_out(static_cast<size_t>(tokens * inter * dtype_size_bytes(dtype)));
  d_out.poison();
  SiluMulParams p;
  p.gate_up = d_in.get();
  p.out = d_out.get();
  p.num_tokens = tokens;
  p.intermediate = inter;
  p.dtype = dtype;
  silu_mul_cuda_variant(p, variant, nullptr);
  std::vector<float> expected(static_cast<size_t>(tokens * inter));
  silu_mul_cpu({gate_up.data(), expected.data(), tokens, inter});
  EXPECT_TRUE(all_close(download_as_f32(d_out, dtype), expected, kAtol, rtol_for(dtype)));
}

class SiluMulCudaTest : public ::testing::TestWithParam<std::tuple<DType, int64_t, int64_t, int>> {
};

TEST_P(SiluMulCudaTest, MatchesCpu) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  const auto [dtype, tokens, inter, variant] = GetParam();
  auto rng = make_rng(static_cast<uint64_t>(tokens * 100003 + inter) * 4 + static_cast<int>(dtype));
  const auto gate_up = round_to(random_vector(tokens * 2 * inter, rng, -8.0f, 8.0f), dtype);
  expect_matches_cpu(gate_up, tokens, inter, dtype, variant);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SiluMulCudaTest,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF32),
                                            ::testing::Values(1, 3, 7, 19, 733),
                                            ::testing::Values(64, 67, 130, 896, 4864, 14336),
                                            ::testing::Range(0, kSiluMulNumVariants)),
                         [](const ::testing::TestParamInfo<SiluMulCudaTest::ParamType>& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_tokens" +
                                  std::to_string(std::get<1>(info.param)) + "_inter" +
                                  std::to_string(std::get<2>(info.param)) + "_" +
                                  kSiluMulVariants[std::get<3>(info.param)].name;
                         });

TEST(SiluMulCudaTest, ExtremeGatesStayFinite) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  // exp(-g) overflows for g << 0: silu must tend to -0, not NaN. For g >> 0, silu(g) = g.
  // 16 gates so the 16-byte path runs too.
  const std::vector<float> gates = {-200.0f, -88.0f, -87.0f, -20.0f, -1e-3f, 0.0f, 1e-3f, 1.0f,
                                    20.0f,   87.0f,  88.0f,  200.0f, -3.0f,  3.0f, -0.5f, 0.5f};
  std::vector<float> gate_up = gates;
  for (size_t i = 0; i < gates.size(); ++i) gate_up.push_back(1.5f - 0.25f * static_cast<float>(i));
  for (const DType dtype : {DType::kBF16, DType::kF32}) {
    for (int v = 0; v < kSiluMulNumVariants; ++v) {
      expect_matches_cpu(round_to(gate_up, dtype), 1, static_cast<int64_t>(gates.size()), dtype, v);
    }
  }
}

TEST(SiluMulCudaTest, MisalignedPointerMatchesCpu) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr int64_t kTokens = 19, kInter = 896;
  constexpr DType kDType = DType::kBF16;
  auto rng = make_rng(77);
  const auto gate_up = round_to(random_vector(kTokens * 2 * kInter, rng, -8.0f, 8.0f), kDType);
  std::vector<float> padded(gate_up.size() + 1, 0.0f);
  std::copy(gate_up.begin(), gate_up.end(), padded.begin() + 1);
  DeviceBuffer d_in = upload_as(padded, kDType);
  DeviceBuffer d_out(static_cast<size_t>((kTokens * kInter + 1) * 2));
  std::vector<float> expected(static_cast<size_t>(kTokens * kInter));
  silu_mul_cpu({gate_up.data(), expected.data(), kTokens, kInter});
  for (int v = 0; v < kSiluMulNumVariants; ++v) {
    SCOPED_TRACE(kSiluMulVariants[v].name);
    d_out.poison();
    SiluMulParams p;
    p.gate_up = d_in.get<uint16_t>() + 1;
    p.out = d_out.get<uint16_t>() + 1;
    p.num_tokens = kTokens;
    p.intermediate = kInter;
    p.dtype = kDType;
    silu_mul_cuda_variant(p, v, nullptr);
    auto out = download_as_f32(d_out, kDType);
    out.erase(out.begin());
    EXPECT_TRUE(all_close(out, expected, kAtol, rtol_for(kDType)));
  }
}

// The flat layout's grid (a pure host heuristic, no GPU needed): enough threads x packs for every
// pack, at least one block, no whole idle block; beyond int32 packs the rows layout takes over.
TEST(SiluMulVariantTest, FlatGridCoversEveryPackOnce) {
  for (int v = 0; v < kSiluMulNumVariants; ++v) {
    const SiluMulVariant& variant = kSiluMulVariants[v];
    const int64_t per_block = int64_t{variant.threads} * variant.packs_per_thread;
    for (const int64_t packs : {int64_t{1}, int64_t{7}, per_block - 1, per_block, per_block + 1,
                                int64_t{8192} * 1792, int64_t{0x7fffffff}}) {
      const int64_t blocks = silu_mul_flat_blocks(variant, packs);
      EXPECT_GE(blocks * per_block, packs) << variant.name << " " << packs;
      EXPECT_LT((blocks - 1) * per_block, packs) << variant.name << " " << packs;
    }
    EXPECT_EQ(silu_mul_runs_flat(variant, 0x7fffffff), variant.flat);
    EXPECT_FALSE(silu_mul_runs_flat(variant, int64_t{0x7fffffff} + 1));
  }
}

}  // namespace
}  // namespace roofline
