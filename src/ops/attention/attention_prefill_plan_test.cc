// The prefill kernel's tile table: a row for exactly the head dims paged_attention_cuda accepts,
// shapes the kernel's loops need (whole m16n8k16 steps, whole 16-byte chunks per thread), two
// blocks per H200 SM in shared memory, and the grid's row-tile arithmetic.
#include "ops/attention/attention_prefill_plan.h"

#include <gtest/gtest.h>

#include <climits>

namespace roofline {
namespace {

// H200 (sm_90): 227 KiB of shared memory per block on opt-in, 228 KiB per SM, of which the
// runtime reserves 1 KiB per resident block.
constexpr int64_t kMaxSmemPerBlock = 227 * 1024;
constexpr int64_t kSmemPerSm = 228 * 1024;
constexpr int64_t kReservedPerBlock = 1024;

TEST(PrefillPlanTest, EverySupportedHeadDimHasExactlyOneTile) {
  for (int64_t d = 1; d <= 512; ++d) {
    const PrefillTile t = prefill_tile(d);
    EXPECT_EQ(t.head_dim == d, paged_attention_cuda_supports_head_dim(d)) << "head_dim " << d;
  }
}

TEST(PrefillPlanTest, TilesAreWholeTensorCoreStepsAndCopies) {
  for (const PrefillTile& t : kPrefillTiles) {
    SCOPED_TRACE(t.head_dim);
    EXPECT_EQ(t.head_dim % 16, 0);  // k-steps of Q·Kᵀ, n-tile pairs of P·V
    EXPECT_EQ(t.keys % 16, 0);      // k-steps of P·V, n-tile pairs of Q·Kᵀ
    EXPECT_GE(t.warps, 1);
    EXPECT_GE(t.m_tiles, 1);
    // Each gathering thread issues the same number of 16-byte K/V chunks per tile.
    const int64_t gatherers = t.producer_warps > 0 ? t.producer_warps : t.warps;
    EXPECT_EQ(t.keys * (t.head_dim / 8) % (32 * gatherers), 0);
    EXPECT_GE(t.stages, 2);
    if (t.wgmma) {
      // The wgmma kernel: 128-byte swizzle rows, a producer warpgroup, consumer warpgroups of 64
      // rows (the named barriers that alternate them are written for two), 128 keys.
      EXPECT_EQ(t.head_dim, 128);
      EXPECT_EQ(t.producer_warps, 4);
      EXPECT_EQ(t.warps, 12);
      EXPECT_EQ(t.m_tiles, 1);
      EXPECT_EQ(t.keys, 128);
      EXPECT_EQ(prefill_row_stride(t) * 2 % 128, 0);
    } else {
      // Rows padded by 16 bytes: 16-byte aligned, not a multiple of 128 bytes (bank spread).
      EXPECT_EQ(prefill_row_stride(t) * 2 % 16, 0);
      EXPECT_NE(prefill_row_stride(t) * 2 % 128, 0);
      EXPECT_EQ(t.producer_warps, 0);
      EXPECT_EQ(t.stages, 2);  // the mma.sync kernel double-buffers
    }
  }
}

TEST(PrefillPlanTest, BlocksFitInAnH200SmsSharedMemory) {
  for (const PrefillTile& t : kPrefillTiles) {
    SCOPED_TRACE(t.head_dim);
    EXPECT_LE(prefill_smem_bytes(t), kMaxSmemPerBlock);
    // mma.sync tiles are sized for two blocks per SM; the wgmma tile for one.
    EXPECT_LE((t.wgmma ? 1 : 2) * (prefill_smem_bytes(t) + kReservedPerBlock), kSmemPerSm);
  }
  // wgmma: Q 128 rows + 3 stages × (K, V) × 128 keys, 256-byte rows, 1 KiB alignment slack,
  // 3 stages × 4 mbarriers.
  EXPECT_EQ(prefill_smem_bytes(prefill_tile(128)), (128 + 6 * 128) * 128 * 2 + 1024 + 96);
  // mma.sync: Q 128 rows + 2 stages × (K, V) × 64 keys, rows of 72 bf16.
  EXPECT_EQ(prefill_smem_bytes(prefill_tile(64)), (128 + 4 * 64) * 72 * 2);
}

TEST(PrefillPlanTest, RowTilesCoverTheLongestSequencesRows) {
  const PrefillTile t = prefill_tile(64);  // 128 rows per block
  EXPECT_EQ(prefill_rows(t), 128);
  EXPECT_EQ(prefill_row_tiles(t, 1, 1), 1);
  EXPECT_EQ(prefill_row_tiles(t, 32, 4), 1);  // 128 rows exactly
  EXPECT_EQ(prefill_row_tiles(t, 33, 4), 2);  // four rows over
  EXPECT_EQ(prefill_row_tiles(t, 2048, 4), 64);
  EXPECT_EQ(prefill_row_tiles(t, 19, 7), 2);  // 133 rows
  EXPECT_EQ(prefill_rows(prefill_tile(256)), 64);
  EXPECT_EQ(prefill_rows(prefill_tile(128)), 128);  // two consumer warpgroups
  EXPECT_EQ(prefill_row_tiles(prefill_tile(128), 2048, 4), 64);
}

// Llama-3-8B's attention (8 KV heads of 128 dims) on the H200's 50 MiB of L2: a 2048-token prompt's
// 8 MiB of K/V take the longest-first order, 8192 tokens (32 MiB) and a ragged batch whose longest
// sequence bounds every one the head-major order; an unknown longest length counts the block
// tables' reach.
TEST(PrefillPlanTest, LongestFirstOnlyWhereTheKeysFitInAThirdOfL2) {
  constexpr int64_t kL2 = 50 << 20;
  PagedAttentionParams p;
  p.num_seqs = 1;
  p.num_kv_heads = 8;
  p.head_dim = 128;
  p.block_size = 16;
  p.max_seq_len = 2048;
  EXPECT_EQ(prefill_kv_bytes_bound(p), int64_t{8} << 20);
  EXPECT_EQ(prefill_block_order(prefill_kv_bytes_bound(p), kL2), PrefillBlockOrder::kLongestFirst);
  p.max_seq_len = 8192;
  EXPECT_EQ(prefill_block_order(prefill_kv_bytes_bound(p), kL2), PrefillBlockOrder::kHeadMajor);
  p.num_seqs = 8;
  p.max_seq_len = 2048;
  EXPECT_EQ(prefill_block_order(prefill_kv_bytes_bound(p), kL2), PrefillBlockOrder::kHeadMajor);
  p.num_seqs = 1;
  p.max_seq_len = 0;
  p.max_blocks_per_seq = 1024;  // 16,384 keys
  EXPECT_EQ(prefill_kv_bytes_bound(p), int64_t{64} << 20);
  EXPECT_EQ(prefill_block_order(prefill_kv_bytes_bound(p), kL2), PrefillBlockOrder::kHeadMajor);
  // A batch whose bound does not fit 64 bits saturates (head-major) instead of wrapping.
  p.num_seqs = 65535;
  p.max_seq_len = int64_t{1} << 31;
  p.num_kv_heads = 65535;
  p.head_dim = 256;
  EXPECT_EQ(prefill_kv_bytes_bound(p), INT64_MAX);
  EXPECT_EQ(prefill_block_order(prefill_kv_bytes_bound(p), kL2), PrefillBlockOrder::kHeadMajor);
  // The boundary: exactly a third of L2 still fits.
  EXPECT_EQ(prefill_block_order(100, 300), PrefillBlockOrder::kLongestFirst);
  EXPECT_EQ(prefill_block_order(101, 300), PrefillBlockOrder::kHeadMajor);
}

TEST(PrefillPlanTest, SlotShiftOnlyWherePowerOfTwoRowsMakeItExact) {
  EXPECT_EQ(prefill_slot_shift(8, 128), 10);  // llama3-8b: 1,024 elements a slot
  EXPECT_EQ(prefill_slot_shift(1, 128), 7);
  EXPECT_EQ(prefill_slot_shift(2, 64), 7);
  EXPECT_EQ(prefill_slot_shift(1, 1), 0);
  EXPECT_EQ(prefill_slot_shift(3, 128), -1);  // 384: the multiply-add
  EXPECT_EQ(prefill_slot_shift(7, 128), -1);
  EXPECT_EQ(prefill_slot_shift(0, 128), -1);
  EXPECT_EQ(prefill_slot_shift(-8, 128), -1);
  // The shift is exact: slot << shift is slot · row for every power-of-two row.
  for (int64_t heads : {1, 2, 4, 8, 16, 32}) {
    const int shift = prefill_slot_shift(heads, 128);
    ASSERT_GE(shift, 0);
    EXPECT_EQ((int64_t{123457} << shift), int64_t{123457} * heads * 128);
  }
}

}  // namespace
}  // namespace roofline
