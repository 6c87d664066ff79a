// gather_rows_cuda against gather_rows_cpu, byte for byte: element types of every width, row
// lengths that allow 16-, 8-, 4-, 2- and 1-byte accesses, misaligned pointers, repeated and
// out-of-order indices; an out-of-range index leaves its row unwritten. Outputs poisoned first.
// Skips itself without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <tuple>

#include "ops/gather_rows/gather_rows.h"
#include "ops/testing/gpu_test_util.h"
#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

using testing::DeviceBuffer;
using testing::make_rng;
using testing::seed_note;

// dtype, num_in_rows, num_out_rows, hidden, byte offset of both pointers
using Case = std::tuple<DType, int64_t, int64_t, int64_t, int64_t>;

class GatherRowsCudaTest : public ::testing::TestWithParam<Case> {};

TEST_P(GatherRowsCudaTest, EqualsCpuByteForByte) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  const auto [dtype, in_rows, out_rows, hidden, offset] = GetParam();
  auto rng = make_rng(static_cast<uint64_t>(in_rows * 1000003 + out_rows * 1009 + hidden) * 64 +
                      static_cast<uint64_t>(static_cast<int>(dtype) * 8 + offset));
  const int64_t row_bytes = hidden * dtype_size_bytes(dtype);
  std::vector<uint8_t> x(static_cast<size_t>(in_rows * row_bytes + offset));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : x) b = static_cast<uint8_t>(byte(rng));
  std::uniform_int_distribution<int32_t> row(0, static_cast<int32_t>(in_rows - 1));
  std::vector<int32_t> index(static_cast<size_t>(out_rows));
  for (auto& i : index) i = row(rng);
  index.back() = static_cast<int32_t>(in_rows - 1);

  DeviceBuffer d_x = DeviceBuffer::from_host(x);
  DeviceBuffer d_index = DeviceBuffer::from_host(index);
  DeviceBuffer d_out(static_cast<size_t>(out_rows * row_bytes + offset));
  d_out.poison();
  GatherRowsParams p;
  p.x = d_x.get<uint8_t>() + offset;
  p.index = d_index.get<int32_t>();
  p.out = d_out.get<uint8_t>() + offset;
  p.num_in_rows = in_rows;
  p.num_out_rows = out_rows;
  p.hidden = hidden;
  p.dtype = dtype;
  gather_rows_cuda(p, nullptr);
  const auto out = d_out.to_host<uint8_t>();

  std::vector<uint8_t> expected(static_cast<size_t>(out_rows * row_bytes + offset), 0xff);
  p.x = x.data() + offset;
  p.index = index.data();
  p.out = expected.data() + offset;
  gather_rows_cpu(p);
  ASSERT_EQ(out.size(), expected.size());
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_EQ(out[i], expected[i]) << "byte " << i << "; " << seed_note();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GatherRowsCudaTest,
    ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16, DType::kI64, DType::kU8),
                       ::testing::Values(733), ::testing::Values(1, 3, 19, 733),
                       ::testing::Values(1, 3, 67, 896, 4096), ::testing::Values(0, 1, 2, 8)),
    [](const ::testing::TestParamInfo<Case>& info) {
      return std::string(dtype_name(std::get<0>(info.param))) + "_in" +
             std::to_string(std::get<1>(info.param)) + "_out" +
             std::to_string(std::get<2>(info.param)) + "_hidden" +
             std::to_string(std::get<3>(info.param)) + "_offset" +
             std::to_string(std::get<4>(info.param));
    });

TEST(GatherRowsCudaTest, OutOfRangeIndexLeavesItsRowUnwritten) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr int64_t kHidden = 16;
  std::vector<float> x(3 * kHidden);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  const std::vector<int32_t> index = {2, 3, -1, 0};
  DeviceBuffer d_x = DeviceBuffer::from_host(x);
  DeviceBuffer d_index = DeviceBuffer::from_host(index);
  DeviceBuffer d_out(4 * kHidden * sizeof(float));
  d_out.poison();
  GatherRowsParams p;
  p.x = d_x.get();
  p.index = d_index.get<int32_t>();
  p.out = d_out.get();
  p.num_in_rows = 3;
  p.num_out_rows = 4;
  p.hidden = kHidden;
  p.dtype = DType::kF32;
  gather_rows_cuda(p, nullptr);
  const auto out = d_out.to_host<uint32_t>();
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t i = 0; i < kHidden; ++i) {
      const uint32_t got = out[static_cast<size_t>(r * kHidden + i)];
      if (r == 1 || r == 2) {
        ASSERT_EQ(got, 0xffffffffu) << "row " << r << " was written";
      } else {
        float f;
        std::memcpy(&f, &got, 4);
        ASSERT_EQ(f, x[static_cast<size_t>(index[static_cast<size_t>(r)] * kHidden + i)]);
      }
    }
  }
}

}  // namespace
}  // namespace roofline
