// argmax_cuda against argmax_rows_cpu (argmax_cpu per row), exactly: f32 and bf16 logits, batches
// of 1 to 64 rows, vocabularies from 1 to 151936 (on the 16-byte path and not), planted ties
// between positions that different threads and warps scan, NaNs (never chosen), all-NaN rows (-1),
// all -inf rows (0), +inf, and a misaligned pointer. Output poisoned first. Skips itself without
// a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "ops/sampling/sampling.h"
#include "ops/testing/gpu_dtype_util.h"
#include "ops/testing/gpu_test_util.h"
#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

using testing::DeviceBuffer;
using testing::make_rng;
using testing::random_vector;
using testing::round_to;
using testing::seed_note;
using testing::upload_as;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Runs argmax_cuda on rows x vocab logits placed `offset` elements into their buffer and checks
// every row against the CPU.
void expect_matches_cpu(const std::vector<float>& logits, int64_t rows, int64_t vocab, DType dtype,
                        int64_t offset = 0) {
  std::vector<float> padded(static_cast<size_t>(offset), 0.0f);
  padded.insert(padded.end(), logits.begin(), logits.end());
  DeviceBuffer d_logits = upload_as(padded, dtype);
  DeviceBuffer d_out(static_cast<size_t>(rows) * sizeof(int32_t));
  d_out.poison();
  ArgmaxParams p;
  p.logits = d_logits.get<uint8_t>() + offset * dtype_size_bytes(dtype);
  p.out = d_out.get<int32_t>();
  p.num_rows = rows;
  p.vocab_size = vocab;
  p.dtype = dtype;
  argmax_cuda(p, nullptr);
  const auto got = d_out.to_host<int32_t>();

  std::vector<int32_t> expected(static_cast<size_t>(rows), -2);
  p.logits = logits.data();
  p.out = expected.data();
  p.dtype = DType::kF32;  // logits already hold the dtype-rounded values
  argmax_rows_cpu(p);
  for (int64_t r = 0; r < rows; ++r) {
    ASSERT_EQ(got[static_cast<size_t>(r)], expected[static_cast<size_t>(r)])
        << "row " << r << " of " << rows << ", vocab " << vocab << ", " << dtype_name(dtype)
        << ", offset " << offset << "; " << seed_note();
  }
}

class ArgmaxCudaTest : public ::testing::TestWithParam<std::tuple<DType, int64_t, int64_t>> {};

TEST_P(ArgmaxCudaTest, MatchesCpuWithTiesAndNaNs) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  const auto [dtype, rows, vocab] = GetParam();
  auto rng = make_rng(static_cast<uint64_t>(rows * 1000003 + vocab) * 4 + static_cast<int>(dtype));
  // Rounded to dtype: bf16's 8 significant bits make natural ties common too.
  auto logits = round_to(random_vector(rows * vocab, rng, -20.0f, 20.0f), dtype);
  std::uniform_int_distribution<int64_t> pos(0, vocab - 1);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = logits.data() + r * vocab;
    switch (r % 6) {
      case 0:  // a tie for the maximum at two random positions (often in different warps)
        row[pos(rng)] = 30.0f;
        row[pos(rng)] = 30.0f;
        break;
      case 1:  // a tie at the last element and a random one
        row[vocab - 1] = 25.0f;
        row[pos(rng)] = 25.0f;
        break;
      case 2:  // NaNs sprinkled, one where the maximum would be
        for (int k = 0; k < 5; ++k) row[pos(rng)] = kNaN;
        row[0] = kNaN;
        break;
      case 3:  // every logit NaN: -1
        for (int64_t i = 0; i < vocab; ++i) row[i] = kNaN;
        break;
      case 4:  // every logit -inf: the first index
        for (int64_t i = 0; i < vocab; ++i) row[i] = -kInf;
        break;
      default:  // +inf twice, NaN in between
        row[pos(rng)] = kInf;
        row[pos(rng)] = kNaN;
        row[pos(rng)] = kInf;
        break;
    }
  }
  expect_matches_cpu(logits, rows, vocab, dtype);
  // Misaligned by one element: the one-element path.
  expect_matches_cpu(logits, rows, vocab, dtype, 1);
}

INSTANTIATE_TEST_SUITE_P(Shapes, ArgmaxCudaTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values(1, 3, 7, 19, 64),
                                            ::testing::Values(1, 7, 67, 1000, 32000, 128256,
                                                              151936)),
                         [](const ::testing::TestParamInfo<ArgmaxCudaTest::ParamType>& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_rows" +
                                  std::to_string(std::get<1>(info.param)) + "_vocab" +
                                  std::to_string(std::get<2>(info.param));
                         });

// Every row's maximum planted at each position of a pack and of a warp's span in turn, with an
// equal value later in the row: the lower index must win wherever the two fall.
TEST(ArgmaxCudaTest, LowestIndexWinsTiesAtEveryPosition) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr int64_t kVocab = 4096 + 8;
  constexpr int64_t kRows = 300;
  auto rng = make_rng(11);
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    auto logits = round_to(random_vector(kRows * kVocab, rng, -1.0f, 1.0f), dtype);
    for (int64_t r = 0; r < kRows; ++r) {
      const int64_t first = r * 13 % kVocab;
      const int64_t second = (first + 1 + r * 7919) % kVocab;
      logits[static_cast<size_t>(r * kVocab + first)] = 2.0f;
      logits[static_cast<size_t>(r * kVocab + second)] = 2.0f;
    }
    expect_matches_cpu(logits, kRows, kVocab, dtype);
  }
}

TEST(ArgmaxCudaTest, ZeroRowsLaunchesNothing) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  ArgmaxParams p;
  p.vocab_size = 10;
  argmax_cuda(p, nullptr);
  ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace roofline
