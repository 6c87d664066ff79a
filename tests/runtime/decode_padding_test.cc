// Decode-step padding for CUDA graphs: the bucket list, the bucket a batch lands in, and the
// padded step (real rows unchanged, padding rows inert: slot -1, one token, block 0).
#include "runtime/decode_padding.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace roofline {
namespace {

TEST(DecodeBucketsTest, PowersOfTwoToThirtyTwoThenEverySixteenEndingAtTheMaximum) {
  EXPECT_EQ(decode_batch_buckets(1), (std::vector<int64_t>{1}));
  EXPECT_EQ(decode_batch_buckets(8), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(decode_batch_buckets(20), (std::vector<int64_t>{1, 2, 4, 8, 16, 20}));
  EXPECT_EQ(decode_batch_buckets(64), (std::vector<int64_t>{1, 2, 4, 8, 16, 24, 32, 48, 64}));
  EXPECT_EQ(decode_batch_buckets(70), (std::vector<int64_t>{1, 2, 4, 8, 16, 24, 32, 48, 64, 70}));
  const auto b256 = decode_batch_buckets(256);
  EXPECT_EQ(b256.size(), 21u);  // 7 up to 32, 48 ... 240, 256
  EXPECT_EQ(b256.back(), 256);
}

TEST(DecodeBucketsTest, EveryBatchLandsInTheSmallestBucketThatHoldsIt) {
  const auto b = decode_batch_buckets(64);
  EXPECT_EQ(decode_bucket(b, 1), 1);
  EXPECT_EQ(decode_bucket(b, 3), 4);
  EXPECT_EQ(decode_bucket(b, 17), 24);
  EXPECT_EQ(decode_bucket(b, 33), 48);
  EXPECT_EQ(decode_bucket(b, 64), 64);
  EXPECT_EQ(decode_bucket(b, 65), 0);
  for (int64_t batch = 1; batch <= 64; ++batch) {
    const int64_t k = decode_bucket(b, batch);
    EXPECT_GE(k, batch);
    for (int64_t smaller : b) {
      if (smaller < k) {
        EXPECT_LT(smaller, batch);
      }
    }
  }
}

StepBuffers decode_step() {
  StepBuffers s;
  s.num_tokens = s.num_seqs = 3;
  s.block_table_width = 2;
  s.token_ids = {11, 12, 13};
  s.positions = {20, 5, 17};
  s.slot_mapping = {100, 37, 65};
  s.block_tables = {6, 7, 2, -1, 4, 5};
  s.seq_lens = {21, 6, 18};
  s.query_start = {0, 1, 2, 3};
  s.last_token_index = {0, 1, 2};
  return s;
}

TEST(DecodePaddingTest, RealRowsKeepTheirValuesAndPaddingRowsAreInert) {
  StepBuffers p;
  pad_decode_step(decode_step(), 4, 5, &p);
  EXPECT_EQ(p.num_tokens, 4);
  EXPECT_EQ(p.num_seqs, 4);
  EXPECT_EQ(p.block_table_width, 5);
  EXPECT_EQ(p.token_ids, (std::vector<int32_t>{11, 12, 13, 0}));
  EXPECT_EQ(p.positions, (std::vector<int32_t>{20, 5, 17, 0}));
  EXPECT_EQ(p.slot_mapping, (std::vector<int64_t>{100, 37, 65, -1}));
  EXPECT_EQ(p.seq_lens, (std::vector<int32_t>{21, 6, 18, 1}));
  EXPECT_EQ(p.query_start, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(p.last_token_index, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(p.block_tables, (std::vector<int32_t>{6, 7,  0, 0, 0,  //
                                                  2, -1, 0, 0, 0,  //
                                                  4, 5,  0, 0, 0,  //
                                                  0, 0,  0, 0, 0}));
  EXPECT_EQ(p.table_columns_read, 2);
}

// A step costs its batch times its own width: the columns past it (never read) keep what an
// earlier, wider step left there; the columns read are rewritten, padding rows' included.
TEST(DecodePaddingTest, TableColumnsPastTheStepsWidthAreLeftAlone) {
  StepBuffers p;
  pad_decode_step(decode_step(), 4, 5, &p);
  std::fill(p.block_tables.begin(), p.block_tables.end(), 99);
  pad_decode_step(decode_step(), 4, 5, &p);
  EXPECT_EQ(p.block_tables, (std::vector<int32_t>{6, 7,  99, 99, 99,  //
                                                  2, -1, 99, 99, 99,  //
                                                  4, 5,  99, 99, 99,  //
                                                  0, 0,  99, 99, 99}));
  // A step whose sequences hold no page yet still reads column 0 (padding rows read block 0).
  StepBuffers empty = decode_step();
  empty.block_table_width = 0;
  empty.block_tables.clear();
  pad_decode_step(empty, 4, 5, &p);
  EXPECT_EQ(p.table_columns_read, 1);
  for (int64_t r = 0; r < 4; ++r)
    EXPECT_EQ(p.block_tables[static_cast<size_t>(r * 5)], 0) << "row " << r;
}

TEST(DecodePaddingTest, ReusedOutputTakesTheNewShape) {
  StepBuffers p;
  pad_decode_step(decode_step(), 8, 4, &p);
  pad_decode_step(decode_step(), 4, 2, &p);
  EXPECT_EQ(p.token_ids.size(), 4u);
  EXPECT_EQ(p.block_tables.size(), 8u);
  EXPECT_EQ(p.query_start.size(), 5u);
  EXPECT_EQ(p.block_tables[6], 0);
}

TEST(DecodePaddingTest, OnlyOneTokenPerSequenceIsADecodeStep) {
  StepBuffers s = decode_step();
  EXPECT_TRUE(is_decode_step(s));
  s.num_tokens = 4;
  EXPECT_FALSE(is_decode_step(s));
  EXPECT_FALSE(is_decode_step(StepBuffers{}));
}

}  // namespace
}  // namespace roofline
