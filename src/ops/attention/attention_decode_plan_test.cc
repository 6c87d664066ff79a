// The decode kernel's launch plan (a pure host function): rows per block, row chunks and splits
// for the shapes the kernel meets, and the bounds that keep its workspace fixed.
#include "ops/attention/attention_decode_plan.h"

#include <gtest/gtest.h>

#include "ops/attention/attention_bulk_copy.h"

namespace roofline {
namespace {

// 132 SMs x 3 resident blocks (the H200 holds 2 of head_dim 128 blocks per SM).
constexpr int64_t kResident = 396;

// A block holds 8 rows (the n of the kernel's MMAs); more rows take more chunks.
TEST(DecodePlanTest, RowsAreEightAndChunksCoverTheGroupTimesQueries) {
  EXPECT_EQ(plan_decode_attention(64, 8, 1, 1, 512, kResident).rows, 8);
  EXPECT_EQ(plan_decode_attention(64, 8, 1, 1, 512, kResident).row_chunks, 1);
  EXPECT_EQ(plan_decode_attention(64, 8, 4, 1, 512, kResident).row_chunks, 1);
  EXPECT_EQ(plan_decode_attention(64, 2, 7, 1, 512, kResident).row_chunks, 1);   // 14 / 2 heads
  const DecodePlan verify = plan_decode_attention(64, 8, 4, 5, 512, kResident);  // 20 rows
  EXPECT_EQ(verify.rows, 8);
  EXPECT_EQ(verify.row_chunks, 3);
  EXPECT_EQ(plan_decode_attention(1, 1, 40, 1, 100, kResident).row_chunks, 5);
}

TEST(DecodePlanTest, SplitsOnlyWhenTheGridWouldNotFillTheGpu) {
  // B=64 x 8 KV heads = 512 blocks >= 396: no split, no workspace traffic.
  EXPECT_EQ(plan_decode_attention(64, 8, 4, 1, 4096, kResident).splits, 1);
  EXPECT_EQ(plan_decode_attention(256, 8, 4, 1, 32768, kResident).splits, 1);
  // B=1 x 8 heads: splits fill whole waves, bounded by the context (>= 128 keys per split).
  EXPECT_EQ(plan_decode_attention(1, 8, 4, 1, 32768, kResident).splits, 48);  // 396 / 8, whole
  EXPECT_EQ(plan_decode_attention(1, 8, 4, 1, 4096, kResident).splits, 32);   // 4096 / 128
  EXPECT_EQ(plan_decode_attention(1, 8, 4, 1, 512, kResident).splits, 4);     // 512 / 128
  EXPECT_EQ(plan_decode_attention(1, 8, 4, 1, 1, kResident).splits, 1);       // one key
  EXPECT_EQ(plan_decode_attention(8, 8, 4, 1, 4096, kResident).splits, 6);    // 396 / 64
  // Never a partial second wave: 264 slots (the H200's 2 per SM), 64 groups -> 4 splits.
  EXPECT_EQ(plan_decode_attention(8, 8, 4, 1, 32768, 264).splits, 4);
}

// More splits than one merge round loads come in whole rounds when that costs at most an eighth of
// them.
TEST(DecodePlanTest, ManySplitsComeInWholeMergeRoundsWhereThatCostsLittle) {
  EXPECT_EQ(plan_decode_attention(1, 8, 4, 1, 32768, 264).splits, 32);  // 33: a third round
  EXPECT_EQ(plan_decode_attention(1, 8, 4, 1, 8192, 264).splits, 32);
  EXPECT_EQ(plan_decode_attention(2, 8, 4, 1, 32768, 264).splits, 16);   // already whole
  EXPECT_EQ(plan_decode_attention(3, 8, 4, 1, 32768, 264).splits, 11);   // one round
  EXPECT_EQ(plan_decode_attention(1, 8, 4, 1, 1100, 264).splits, 9);     // one round
  EXPECT_EQ(plan_decode_attention(1, 2, 7, 1, 32768, 264).splits, 128);  // qwen2.5-0.5b: 8 rounds
  EXPECT_EQ(plan_decode_attention(1, 2, 7, 1, 5000, 264).splits, 40);    // 32 would lose 8 of 40
}

// In the kernel, a group takes whole 16-key stages a split and counts only the splits that get a
// key; every key lies in exactly one of them.
TEST(DecodePlanTest, GroupSplitsCoverTheKeysAndNoneIsEmpty) {
  EXPECT_EQ(decode_group_splits(33, 8192).splits, 32);  // 33 x 256 would leave the last empty
  EXPECT_EQ(decode_group_splits(33, 8192).per_split, 256);
  EXPECT_EQ(decode_group_splits(32, 4100).splits, 29);  // 32 x 144: three empty
  EXPECT_EQ(decode_group_splits(32, 4096).splits, 32);
  EXPECT_EQ(decode_group_splits(32, 512).splits, 4);  // a graph's launch at a short context
  EXPECT_EQ(decode_group_splits(32, 1).splits, 1);
  EXPECT_EQ(decode_group_splits(1, 100000).splits, 1);
  EXPECT_EQ(decode_group_splits(1, 100000).per_split, 100000);
  for (const int launch : {1, 2, 5, 8, 16, 33, 49, 128}) {
    for (int keys = 1; keys <= 20000; keys += keys < 600 ? 1 : 97) {
      const DecodeGroupSplits c = decode_group_splits(launch, keys);
      ASSERT_GE(c.splits, 1);
      ASSERT_LE(c.splits, launch);
      ASSERT_EQ(c.per_split % 16, 0);
      ASSERT_GE(c.splits * c.per_split, keys);        // every key in some split
      ASSERT_LT((c.splits - 1) * c.per_split, keys);  // and the last split gets one
    }
  }
}

// A launch's splits form clusters of up to 8 (the portable cluster size).
TEST(DecodePlanTest, ClustersSpanUpToEightSplits) {
  EXPECT_EQ(decode_cluster_width(1), 1);  // no split: no cluster
  EXPECT_EQ(decode_cluster_width(4), 4);  // llama3-8b bs 1 at 512 keys: one cluster of 4
  EXPECT_EQ(decode_cluster_width(5), 5);  // qwen2.5-0.5b bs 1 at 540 keys
  EXPECT_EQ(decode_cluster_width(8), 8);
  EXPECT_EQ(decode_cluster_width(32), 8);   // llama3-8b bs 1 planned for 8192: 4 clusters of 8
  EXPECT_EQ(decode_cluster_width(128), 8);  // qwen2.5-0.5b bs 1 planned for 32768: 16 of 8
}

TEST(DecodePlanTest, SplitBlocksNeverExceedTheWorkspace) {
  for (const int64_t seqs : {1, 2, 3, 7, 64, 257, 4096}) {
    for (const int64_t kv_heads : {1, 2, 8, 64}) {
      for (const int64_t group : {1, 4, 7, 8, 40}) {
        for (const int64_t q : {1, 3, 8}) {
          for (const int64_t len : {1, 17, 4096, 1 << 20}) {
            for (const int64_t resident : {int64_t{1}, kResident, int64_t{1} << 20}) {
              const DecodePlan p = plan_decode_attention(seqs, kv_heads, group, q, len, resident);
              ASSERT_GE(p.splits, 1);
              ASSERT_LE(p.splits, kDecodeMaxSplits);
              ASSERT_EQ(p.rows, kDecodeMaxRows);
              ASSERT_GE(p.rows * p.row_chunks, group * q);
              ASSERT_LT(p.rows * (p.row_chunks - 1), group * q);
              const int64_t width = decode_cluster_width(p.splits);
              ASSERT_GE(width, 1);
              ASSERT_LE(width, std::min(p.splits, kDecodeMaxClusterSplits));
              ASSERT_TRUE(width == p.splits || width == kDecodeMaxClusterSplits);
              if (p.splits > 1) {
                ASSERT_LE(seqs * kv_heads * p.row_chunks * p.splits, kDecodeMaxSplitBlocks);
                ASSERT_LE((p.splits - 1) * kDecodeMinKeysPerSplit, len);
                ASSERT_LE(seqs * kv_heads * p.row_chunks * p.splits, resident);  // one wave
                if (p.splits > kDecodeMergeRound && p.splits % kDecodeMergeRound != 0) {
                  // whole rounds would have cost more than an eighth of the splits
                  ASSERT_LT(8 * (p.splits / kDecodeMergeRound * kDecodeMergeRound), 7 * p.splits);
                }
              }
            }
          }
        }
      }
    }
  }
}

// Bulk copies only where every 16-key run lies in one page and a box (64 dims) tiles the head.
TEST(DecodePlanTest, BulkCopiesOnlyWhereAStageLiesInOnePage) {
  for (const int64_t page : {16, 32, 64, 128, 256}) {
    EXPECT_TRUE(paged_kv_takes_bulk_copies(page, 0, 128, 1000)) << page;
    EXPECT_TRUE(paged_kv_takes_bulk_copies(page, 0, 64, 1000)) << page;
    EXPECT_TRUE(paged_kv_takes_bulk_copies(page, 0, 256, 1000)) << page;
  }
  // Pages smaller than a stage, or of a size whose stages would straddle two pages.
  for (const int64_t page : {1, 8, 15, 17, 24, 48, 100})
    EXPECT_FALSE(paged_kv_takes_bulk_copies(page, 0, 128, 1000)) << page;
  // A sliding window starts a split's keys anywhere in a page.
  EXPECT_FALSE(paged_kv_takes_bulk_copies(16, 4096, 128, 1000));
  // head_dim 32 is half a box; other widths are not whole boxes.
  EXPECT_FALSE(paged_kv_takes_bulk_copies(16, 0, 32, 1000));
  EXPECT_FALSE(paged_kv_takes_bulk_copies(16, 0, 96, 1000));
  // The copy engine's slot coordinate is a 32-bit signed integer.
  EXPECT_TRUE(paged_kv_takes_bulk_copies(16, 0, 128, (int64_t{1} << 27) - 1));
  EXPECT_FALSE(paged_kv_takes_bulk_copies(16, 0, 128, int64_t{1} << 27));
  EXPECT_FALSE(paged_kv_takes_bulk_copies(16, 0, 128, 0));
}

TEST(DecodePlanTest, WorkspaceHoldsEveryPartialAndCounter) {
  EXPECT_EQ(kDecodeWorkspaceBytes,
            kDecodeMaxSplitBlocks * kDecodeMaxRows * (kDecodeMaxHeadDim + 1) * 4 +
                kDecodeMaxSplitBlocks * 4);
  EXPECT_EQ(paged_attention_cuda_workspace_bytes(), kDecodeWorkspaceBytes);
}

}  // namespace
}  // namespace roofline
