// add_cuda against add_cpu on every element, bit for bit (both form the f32 sum of the same
// values; the GPU rounds it once to the dtype, which the test applies to the CPU result): bf16
// and f32, sizes with and without a tail after the last 16-byte pack, misaligned pointers, and the
// output aliasing either input. Output poisoned with NaN first. Skips itself without a GPU.
#include <gtest/gtest.h>

#include <tuple>

#include "ops/add/add.h"
#include "ops/testing/gpu_dtype_util.h"
#include "ops/testing/gpu_test_util.h"
#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

using testing::all_equal;
using testing::DeviceBuffer;
using testing::download_as_f32;
using testing::make_rng;
using testing::random_vector;
using testing::round_to;
using testing::upload_as;

class AddCudaTest : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {};

TEST_P(AddCudaTest, EqualsCpuSumRounded) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  const auto [dtype, n] = GetParam();
  auto rng = make_rng(static_cast<uint64_t>(n) * 4 + static_cast<int>(dtype));
  const auto a = round_to(random_vector(n, rng, -100.0f, 100.0f), dtype);
  const auto b = round_to(random_vector(n, rng, -100.0f, 100.0f), dtype);
  std::vector<float> sum(static_cast<size_t>(n));
  add_cpu({a.data(), b.data(), sum.data(), n});
  const auto expected = round_to(sum, dtype);

  // Offset 0: the 16-byte path; offset 1 element: misaligned, the one-element path.
  for (const int64_t offset : {int64_t{0}, int64_t{1}}) {
    auto padded = [&](const std::vector<float>& v) {
      std::vector<float> out(static_cast<size_t>(offset), 0.0f);
      out.insert(out.end(), v.begin(), v.end());
      return out;
    };
    const int64_t esize = dtype_size_bytes(dtype);
    DeviceBuffer d_a = upload_as(padded(a), dtype);
    DeviceBuffer d_b = upload_as(padded(b), dtype);
    DeviceBuffer d_out(static_cast<size_t>((n + offset) * esize));
    d_out.poison();
    auto at = [&](const DeviceBuffer& buf) { return buf.get<uint8_t>() + offset * esize; };
    AddParams p;
    p.a = at(d_a);
    p.b = at(d_b);
    p.out = at(d_out);
    p.n = n;
    p.dtype = dtype;
    add_cuda(p, nullptr);
    auto strip = [&](std::vector<float> v) {
      v.erase(v.begin(), v.begin() + offset);
      return v;
    };
    EXPECT_TRUE(all_equal(strip(download_as_f32(d_out, dtype)), expected)) << "offset " << offset;

    // out aliasing a, then b (b's buffer still holds b; a's now holds the sum).
    p.out = at(d_a);
    add_cuda(p, nullptr);
    EXPECT_TRUE(all_equal(strip(download_as_f32(d_a, dtype)), expected)) << "offset " << offset;
    DeviceBuffer d_a2 = upload_as(padded(a), dtype);
    p.a = at(d_a2);
    p.out = at(d_b);
    add_cuda(p, nullptr);
    EXPECT_TRUE(all_equal(strip(download_as_f32(d_b, dtype)), expected)) << "offset " << offset;
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, AddCudaTest,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF32),
                                            ::testing::Values(1, 3, 7, 19, 67, 733, 4096,
                                                              733 * 4096 + 3,
                                                              (int64_t{1} << 22) + 5)),
                         [](const ::testing::TestParamInfo<AddCudaTest::ParamType>& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_n" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace roofline
