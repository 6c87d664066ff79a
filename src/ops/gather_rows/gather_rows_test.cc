// gather_rows_cpu: every output row is a byte-exact copy of the indexed input row, for element
// types of every width, awkward row lengths, repeated and out-of-order indices; a bad index aborts.
#include "ops/gather_rows/gather_rows.h"

#include <gtest/gtest.h>

#include <cstring>
#include <tuple>
#include <vector>

#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

using testing::make_rng;
using testing::seed_note;

class GatherRowsTest
    : public ::testing::TestWithParam<std::tuple<DType, int64_t, int64_t, int64_t>> {};

TEST_P(GatherRowsTest, CopiesIndexedRowsExactly) {
  const auto [dtype, in_rows, out_rows, hidden] = GetParam();
  auto rng = make_rng(static_cast<uint64_t>(in_rows * 1000003 + out_rows * 1009 + hidden) * 8 +
                      static_cast<int>(dtype));
  const int64_t row_bytes = hidden * dtype_size_bytes(dtype);
  std::vector<uint8_t> x(static_cast<size_t>(in_rows * row_bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : x) b = static_cast<uint8_t>(byte(rng));
  std::uniform_int_distribution<int32_t> row(0, static_cast<int32_t>(in_rows - 1));
  std::vector<int32_t> index(static_cast<size_t>(out_rows));
  for (auto& i : index) i = row(rng);
  index.back() = static_cast<int32_t>(in_rows - 1);  // the last row, where an off-by-one reads past
  std::vector<uint8_t> out(static_cast<size_t>(out_rows * row_bytes), 0xAB);

  GatherRowsParams p;
  p.x = x.data();
  p.index = index.data();
  p.out = out.data();
  p.num_in_rows = in_rows;
  p.num_out_rows = out_rows;
  p.hidden = hidden;
  p.dtype = dtype;
  gather_rows_cpu(p);

  for (int64_t r = 0; r < out_rows; ++r) {
    ASSERT_EQ(std::memcmp(out.data() + r * row_bytes,
                          x.data() + index[static_cast<size_t>(r)] * row_bytes,
                          static_cast<size_t>(row_bytes)),
              0)
        << "row " << r << " (index " << index[static_cast<size_t>(r)] << "); " << seed_note();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GatherRowsTest,
    ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16, DType::kI64, DType::kU8),
                       ::testing::Values(1, 19, 733), ::testing::Values(1, 3, 7),
                       ::testing::Values(1, 67, 896)));

TEST(GatherRowsTest, NoRowsIsANoOp) {
  GatherRowsParams p;
  p.hidden = 4;
  gather_rows_cpu(p);
}

TEST(GatherRowsDeathTest, OutOfRangeIndexAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<float> x(2 * 3, 1.0f), out(3);
  for (const int32_t bad : {2, -1}) {
    GatherRowsParams p;
    p.x = x.data();
    p.index = &bad;
    p.out = out.data();
    p.num_in_rows = 2;
    p.num_out_rows = 1;
    p.hidden = 3;
    p.dtype = DType::kF32;
    EXPECT_DEATH(gather_rows_cpu(p), "internal check failed");
  }
}

}  // namespace
}  // namespace roofline
