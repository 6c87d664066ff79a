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
  EXPECT_EQ(plan_decode_attention(1, 8, 4, 1, 32768, kResident).splits, 49);  // 396 / 8
  EXPECT_EQ(plan_decode_attention(1, 8, 4, 1, 4096, kResident).splits, 32);   // 4096 / 128
  EXPECT_EQ(plan_decode_attention(1, 8, 4, 1, 512, kResident).splits, 4);     // 512 / 128
  EXPECT_EQ(plan_decode_attention(1, 8, 4, 1, 1, kResident).splits, 1);       // one key
  EXPECT_EQ(plan_decode_attention(8, 8, 4, 1, 4096, kResident).splits, 6);    // 396 / 64
  // Never a partial second wave: 264 slots (the H200's 2 per SM), 64 groups -> 4 splits.
  EXPECT_EQ(plan_decode_attention(8, 8, 4, 1, 32768, 264).splits, 4);
}

TEST(DecodePlanTest, ClustersSpanUpToEightSplits) {
  EXPECT_EQ(decode_cluster_width(1), 1);  // no split: no cluster
  EXPECT_EQ(decode_cluster_width(4), 4);  // llama3-8b bs 1 at 512 keys: one cluster of 4
  EXPECT_EQ(decode_cluster_width(5), 5);  // qwen2.5-0.5b bs 1 at 540 keys
  EXPECT_EQ(decode_cluster_width(8), 8);
  EXPECT_EQ(decode_cluster_width(33), 8);   // llama3-8b bs 1 planned for 8192: 5 clusters of 8
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
