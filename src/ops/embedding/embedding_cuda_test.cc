// embedding_cuda against embedding_cpu on every element, bit for bit (a conversion rounds once,
// to nearest even, on both sides): tables in f32, f16 and bf16, outputs in bf16 and f32, hidden
// sizes on the 16-byte path and the one-element path, repeated ids and the last row. An
// out-of-range id leaves its row unwritten. Outputs poisoned first. Skips itself without a GPU.
#include <gtest/gtest.h>

#include <tuple>

#include "ops/embedding/embedding.h"
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

constexpr int64_t kVocab = 1001;

using Case = std::tuple<DType, DType, int64_t, int64_t>;  // table dtype, out dtype, tokens, hidden

class EmbeddingCudaTest : public ::testing::TestWithParam<Case> {};

TEST_P(EmbeddingCudaTest, EqualsCpuRowsRounded) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  const auto [table_dtype, dtype, tokens, hidden] = GetParam();
  auto rng = make_rng(static_cast<uint64_t>(tokens * 100003 + hidden) * 16 +
                      static_cast<int>(table_dtype) * 4 + static_cast<int>(dtype));
  // Values of every magnitude a real table has, so f32 -> bf16 rounding is exercised.
  const auto table = round_to(random_vector(kVocab * hidden, rng, -0.3f, 0.3f), table_dtype);
  std::uniform_int_distribution<int32_t> id(0, kVocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(tokens));
  for (auto& x : ids) x = id(rng);
  ids.back() = kVocab - 1;   // the last row
  ids.front() = ids.back();  // a repeated id (for tokens > 1)

  DeviceBuffer d_ids = DeviceBuffer::from_host(ids);
  DeviceBuffer d_table = upload_as(table, table_dtype);
  DeviceBuffer d_out(static_cast<size_t>(tokens * hidden * dtype_size_bytes(dtype)));
  d_out.poison();
  EmbeddingParams p;
  p.token_ids = d_ids.get<int32_t>();
  p.table = d_table.get();
  p.table_dtype = table_dtype;
  p.out = d_out.get();
  p.num_tokens = tokens;
  p.hidden = hidden;
  p.vocab_size = kVocab;
  p.dtype = dtype;
  embedding_cuda(p, nullptr);

  std::vector<float> expected(static_cast<size_t>(tokens * hidden));
  embedding_cpu({ids.data(), table.data(), DType::kF32, expected.data(), tokens, hidden, kVocab});
  EXPECT_TRUE(all_equal(download_as_f32(d_out, dtype), round_to(expected, dtype)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, EmbeddingCudaTest,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16,
                                                              DType::kF32),
                                            ::testing::Values(DType::kBF16, DType::kF32),
                                            ::testing::Values(1, 3, 7, 19, 733),
                                            ::testing::Values(64, 67, 130, 896, 4096)),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string("table_") + dtype_name(std::get<0>(info.param)) +
                                  "_out_" + dtype_name(std::get<1>(info.param)) + "_tokens" +
                                  std::to_string(std::get<2>(info.param)) + "_hidden" +
                                  std::to_string(std::get<3>(info.param));
                         });

TEST(EmbeddingCudaTest, OutOfRangeIdLeavesItsRowUnwritten) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr int64_t kHidden = 64;
  auto rng = make_rng(5);
  const auto table = round_to(random_vector(kVocab * kHidden, rng), DType::kBF16);
  const std::vector<int32_t> ids = {3, static_cast<int32_t>(kVocab), -1, 7};
  DeviceBuffer d_ids = DeviceBuffer::from_host(ids);
  DeviceBuffer d_table = upload_as(table, DType::kBF16);
  DeviceBuffer d_out(static_cast<size_t>(4 * kHidden * 2));
  d_out.poison();
  EmbeddingParams p;
  p.token_ids = d_ids.get<int32_t>();
  p.table = d_table.get();
  p.table_dtype = DType::kBF16;
  p.out = d_out.get();
  p.num_tokens = 4;
  p.hidden = kHidden;
  p.vocab_size = kVocab;
  p.dtype = DType::kBF16;
  embedding_cuda(p, nullptr);
  const auto out = d_out.to_host<uint16_t>();
  for (int64_t t = 0; t < 4; ++t) {
    for (int64_t i = 0; i < kHidden; ++i) {
      const uint16_t got = out[static_cast<size_t>(t * kHidden + i)];
      if (t == 1 || t == 2) {
        ASSERT_EQ(got, 0xffff) << "token " << t << " element " << i << " was written";
      } else {
        const int32_t id = ids[static_cast<size_t>(t)];
        ASSERT_EQ(bf16_bits_to_f32(got), table[static_cast<size_t>(id * kHidden + i)]);
      }
    }
  }
}

}  // namespace
}  // namespace roofline
