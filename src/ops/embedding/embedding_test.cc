// embedding_cpu: every token gets exactly its table row, for f32, f16 and bf16 tables. Table values
// are chosen exactly representable in the table's dtype, so the expected f32 output is known
// without going through the conversion under test.
#include "ops/embedding/embedding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

using testing::all_equal;
using testing::make_rng;
using testing::poison;

struct Table {
  std::vector<uint8_t> bytes;  // [vocab, hidden] in dtype
  std::vector<float> values;   // [vocab, hidden] the exact value of each element
};

// Values m · 2^e with a small integer m fit both f16 (11-bit significand) and bf16 (8 bits).
Table make_table(DType dtype, int64_t vocab, int64_t hidden, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> mantissa(-255, 255);
  std::uniform_int_distribution<int> exponent(-10, 4);
  Table t;
  const int64_t n = vocab * hidden;
  t.values.resize(static_cast<size_t>(n));
  t.bytes.resize(static_cast<size_t>(n * dtype_size_bytes(dtype)));
  for (int64_t i = 0; i < n; ++i) {
    const float v = std::ldexp(static_cast<float>(mantissa(rng)), exponent(rng));
    t.values[static_cast<size_t>(i)] = v;
    switch (dtype) {
      case DType::kF32:
        std::memcpy(t.bytes.data() + i * 4, &v, 4);
        break;
      case DType::kF16: {
        const uint16_t bits = f32_to_f16_bits(v);
        std::memcpy(t.bytes.data() + i * 2, &bits, 2);
        break;
      }
      case DType::kBF16: {
        const uint16_t bits = f32_to_bf16_bits(v);
        std::memcpy(t.bytes.data() + i * 2, &bits, 2);
        break;
      }
      default:
        ADD_FAILURE() << "not a float dtype";
    }
  }
  return t;
}

class EmbeddingTest : public ::testing::TestWithParam<std::tuple<DType, int64_t, int64_t>> {};

TEST_P(EmbeddingTest, GathersExactRows) {
  const auto [dtype, tokens, hidden] = GetParam();
  constexpr int64_t kVocab = 101;
  auto rng = make_rng(static_cast<uint64_t>(tokens * 1000 + hidden) * 8 + static_cast<int>(dtype));
  const Table table = make_table(dtype, kVocab, hidden, rng);
  std::uniform_int_distribution<int32_t> id(0, kVocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(tokens));
  for (auto& x : ids) x = id(rng);
  ids[0] = kVocab - 1;  // the last row, where an off-by-one would read past the table
  std::vector<float> out(static_cast<size_t>(tokens * hidden));
  poison(out);
  embedding_cpu({ids.data(), table.bytes.data(), dtype, out.data(), tokens, hidden, kVocab});
  std::vector<float> expected(out.size());
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < hidden; ++i) {
      expected[static_cast<size_t>(t * hidden + i)] =
          table.values[static_cast<size_t>(ids[static_cast<size_t>(t)] * hidden + i)];
    }
  }
  EXPECT_TRUE(all_equal(out, expected));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, EmbeddingTest,
    ::testing::Combine(::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                       ::testing::Values(1, 3, 7, 19, 733), ::testing::Values(1, 67, 256)));

TEST(EmbeddingDeathTest, OutOfRangeIdAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<float> table(4 * 3, 1.0f);
  std::vector<float> out(3);
  const int32_t id = 4;
  EXPECT_DEATH(embedding_cpu({&id, table.data(), DType::kF32, out.data(), 1, 3, 4}),
               "internal check failed");
}

}  // namespace
}  // namespace roofline
