// Scalar conversions: exact where they must be, round-to-nearest-even where they round.
#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace roofline {
namespace {

TEST(Dtype, Bf16RoundTripAndRounding) {
  for (float v : {0.0f, 1.0f, -2.5f, 3.140625f, 1e-30f, 65504.0f})
    EXPECT_EQ(bf16_bits_to_f32(f32_to_bf16_bits(bf16_bits_to_f32(f32_to_bf16_bits(v)))),
              bf16_bits_to_f32(f32_to_bf16_bits(v)));
  EXPECT_EQ(f32_to_bf16_bits(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between two bf16 values: ties go to even (1.0).
  EXPECT_EQ(f32_to_bf16_bits(1.0f + 1.0f / 256), 0x3f80);
  // 1 + 3*2^-8 is halfway too: rounds up to the even neighbour 1 + 2^-6.
  EXPECT_EQ(f32_to_bf16_bits(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(std::nanf("")))));
}

TEST(Dtype, F16KnownValues) {
  EXPECT_EQ(f16_bits_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_bits_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_bits_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_bits_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(f16_bits_to_f32(0x7c00)));
  EXPECT_TRUE(std::isnan(f16_bits_to_f32(0x7e00)));
  EXPECT_EQ(f32_to_f16_bits(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16_bits(1e6f), 0x7c00);  // overflow to inf
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -24)), 0x0001);
}

TEST(Dtype, F16EveryBitPatternRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_bits_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16_bits(f), h) << std::hex << h;
  }
}

TEST(Dtype, SafetensorsNames) {
  EXPECT_EQ(dtype_from_safetensors_name("BF16"), DType::kBF16);
  EXPECT_EQ(dtype_from_safetensors_name("F8_E4M3"), std::nullopt);
}

}  // namespace
}  // namespace roofline
