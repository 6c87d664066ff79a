// The skinny CUDA matmul's host side on the CPU: its domain (matmul_skinny_unsupported_reason, fed
// made-up addresses — nothing is dereferenced) and its launch plan (matmul_skinny_launch): token
// tiles, column blocks, the ring's stages, and the split-K choice with its invariants (no empty
// split, partials within the workspace, a persistent grid of at most one block per SM), which
// matmul_skinny_launch_valid — the launcher's check — accepts, while it rejects launches that do
// not fit the problem.
#include "ops/matmul/matmul_skinny.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

const auto address = &testing::made_up_address;

MatmulParams supported_params() {
  MatmulParams p;
  p.x = address(256);
  p.w = address(16);
  p.w_dtype = DType::kBF16;
  p.dtype = DType::kBF16;
  p.bias = address(2);
  p.bias_dtype = DType::kBF16;
  p.residual = address(2);
  p.y = const_cast<void*>(
      address(2));  // y and the residual are written / read element by element: any alignment
  p.m = 8;
  p.n = 131;
  p.k = 72;
  p.y_row_stride = 137;
  return p;
}

// The reason contains `fragment` (so a message cannot silently stop saying what to fix).
::testing::AssertionResult rejected_for(const MatmulParams& p, MatmulEpilogue e,
                                        const char* fragment) {
  const char* reason = matmul_skinny_unsupported_reason(p, e);
  if (reason == nullptr) return ::testing::AssertionFailure() << "accepted";
  if (std::strstr(reason, fragment) == nullptr)
    return ::testing::AssertionFailure() << "reason '" << reason << "' lacks '" << fragment << "'";
  return ::testing::AssertionSuccess();
}

TEST(MatmulSkinnyDomain, AcceptsDecodeShapesWithEveryEpilogue) {
  for (const MatmulEpilogue e :
       {MatmulEpilogue::kNone, MatmulEpilogue::kBias, MatmulEpilogue::kResidual}) {
    MatmulParams p = supported_params();
    for (const int64_t m : {1, 2, 3, 17, 64}) {
      p.m = m;
      EXPECT_EQ(matmul_skinny_unsupported_reason(p, e), nullptr) << "m " << m;
    }
  }
}

TEST(MatmulSkinnyDomain, RejectsWhatItCannotRunWithAClearReason) {
  const MatmulEpilogue none = MatmulEpilogue::kNone;
  MatmulParams p = supported_params();
  p.dtype = DType::kF32;
  EXPECT_TRUE(rejected_for(p, none, "bf16"));
  p = supported_params();
  p.w_dtype = DType::kF16;
  EXPECT_TRUE(rejected_for(p, none, "bf16"));
  p = supported_params();
  p.bias_dtype = DType::kF32;
  EXPECT_TRUE(rejected_for(p, MatmulEpilogue::kBias, "bf16 bias"));
  EXPECT_EQ(matmul_skinny_unsupported_reason(p, none), nullptr);  // the bias is not read
  p = supported_params();
  p.m = 65;
  EXPECT_TRUE(rejected_for(p, none, "1 to 64 rows"));
  p.m = 0;
  EXPECT_TRUE(rejected_for(p, none, "1 to 64 rows"));
  p = supported_params();
  p.k = 67;
  EXPECT_TRUE(rejected_for(p, none, "multiple of 8"));
  p = supported_params();
  p.x = address(8);
  EXPECT_TRUE(rejected_for(p, none, "16-byte aligned"));
  p = supported_params();
  p.w = address(2);
  EXPECT_TRUE(rejected_for(p, none, "16-byte aligned"));
  p = supported_params();
  p.y_row_stride = p.n - 1;
  EXPECT_TRUE(rejected_for(p, none, "y_row_stride"));
  p = supported_params();
  p.residual = nullptr;
  EXPECT_TRUE(rejected_for(p, MatmulEpilogue::kResidual, "without a residual"));
  p = supported_params();
  p.bias = nullptr;
  EXPECT_TRUE(rejected_for(p, MatmulEpilogue::kBias, "without a bias"));
}

TEST(MatmulSkinnyLaunch, TokenTilesAndColumnBlocks) {
  const struct {
    int64_t m;
    int tiles;
  } cases[] = {{1, 1}, {8, 1}, {9, 2}, {16, 2}, {17, 4}, {32, 4}, {33, 8}, {64, 8}};
  for (const auto& c : cases) {
    EXPECT_EQ(matmul_skinny_launch(c.m, 4096, 4096, 132).m_tiles, c.tiles) << "m " << c.m;
  }
  EXPECT_EQ(matmul_skinny_launch(1, 1, 8, 132).n_blocks, 1);
  EXPECT_EQ(matmul_skinny_launch(1, 16, 8, 132).n_blocks, 1);
  EXPECT_EQ(matmul_skinny_launch(1, 17, 8, 132).n_blocks, 2);
  EXPECT_EQ(matmul_skinny_launch(1, 6144, 4096, 132).n_blocks, 384);
  EXPECT_EQ(matmul_skinny_launch(1, 4096, 72, 132).num_chunks, 1);
  EXPECT_EQ(matmul_skinny_launch(1, 4096, 1032, 132).num_chunks, 3);  // 1032 = 2·512 + 8
  EXPECT_EQ(matmul_skinny_launch(1, 4096, 4096, 132).num_chunks, 8);
}

TEST(MatmulSkinnyLaunch, RingsAndReductionsFitTheirBlocksPerSm) {
  // Two blocks per SM of 4 / 3 stages at 1 / 2 token tiles, one of 4 / 2 stages at 4 / 8 (stages of
  // 16 weight rows + 8·m_tiles token rows + the norm weight's row); the SM's rings within the
  // budget, and its blocks' rings and reduction buffers (two at one token tile with the RMSNorm
  // prologue) within the 228 KB of an SM (1 KB of each block reserved by the runtime), each block
  // within the 227 KB a block may take. kStaticSmem: more than any variant's static shared memory
  // (the epoch word, the RoPE epilogue's positions and slots; 1,920 bytes at most for sm_90a).
  constexpr int64_t kStaticSmem = 2048;
  const int expected_stages[] = {4, 3, 4, 2};
  const int expected_blocks[] = {2, 2, 1, 1};
  int i = 0;
  for (const int m_tiles : {1, 2, 4, 8}) {
    SCOPED_TRACE(m_tiles);
    const int blocks = matmul_skinny_blocks_per_sm(m_tiles);
    EXPECT_EQ(blocks, expected_blocks[i]);
    EXPECT_EQ(matmul_skinny_stages(m_tiles), expected_stages[i++]);
    EXPECT_LE(blocks * matmul_skinny_smem_bytes(m_tiles), kMatmulSkinnySmemBudget);
    for (const bool norm : {false, true}) {
      // The variants that may split also hold the cluster merge's receive area.
      const int64_t block_bytes =
          matmul_skinny_smem_bytes(m_tiles) +
          matmul_skinny_reduce_buffers(m_tiles, norm) * matmul_skinny_reduce_bytes(m_tiles) +
          (norm ? 0 : matmul_skinny_cluster_recv_bytes(m_tiles));
      EXPECT_LE(block_bytes, 227 * 1024) << norm;
      EXPECT_LE(blocks * (block_bytes + kStaticSmem + 1024), 228 * 1024) << norm;
    }
  }
  // The deep ring (one block per SM, plain one-token-tile variant): within a block's 227 KB with
  // its reduction buffer and static shared memory.
  EXPECT_LE(kMatmulSkinnyDeepStages * matmul_skinny_stage_rows(1) * kMatmulSkinnyRowBytes +
                matmul_skinny_reduce_buffers(1, false) * matmul_skinny_reduce_bytes(1) +
                matmul_skinny_cluster_recv_bytes(1) + kStaticSmem,
            227 * 1024);
  EXPECT_GE(kMatmulSkinnyDeepStages, matmul_skinny_stages(1));
  // A second reduction buffer for one token tile with the RMSNorm prologue only.
  EXPECT_EQ(matmul_skinny_reduce_buffers(1, true), 2);
  for (const int m_tiles : {2, 4, 8}) EXPECT_EQ(matmul_skinny_reduce_buffers(m_tiles, true), 1);
  for (const int m_tiles : {1, 2, 4, 8}) EXPECT_EQ(matmul_skinny_reduce_buffers(m_tiles, false), 1);
  // The persistent grid: up to two blocks per SM at m <= 16.
  EXPECT_EQ(matmul_skinny_launch(1, 28672, 4096, 132).grid, 264);
  EXPECT_EQ(matmul_skinny_launch(32, 28672, 4096, 132).grid, 132);
}

TEST(MatmulSkinnyLaunch, FewTokenVariantWhereTwoBlocksPerSmLeaveASecondWave) {
  constexpr int kSms = 132;
  // Its ring: three blocks per SM of 3 stages of 21 rows (16 weight rows, 4 rows of x, the norm
  // weight's), within the budget and an SM's 228 KB.
  EXPECT_EQ(matmul_skinny_blocks_per_sm(1, true), 3);
  EXPECT_EQ(matmul_skinny_stage_rows(1, true), 21);
  EXPECT_EQ(matmul_skinny_stages(1, true), 3);
  EXPECT_LE(3 * matmul_skinny_smem_bytes(1, true), kMatmulSkinnySmemBudget);
  EXPECT_LE(
      3 * (matmul_skinny_smem_bytes(1, true) +
           matmul_skinny_reduce_buffers(1, true) * matmul_skinny_reduce_bytes(1) + 2048 + 1024),
      228 * 1024);  // its two reduction buffers, static shared memory and the reserve
  // llama3-8b's q|k|v at m = 1 to 4: 384 tiles, more than two blocks per SM take (264) — one wave
  // of 384 blocks, 12 slots left, so the RoPE epilogue is fused there.
  for (const int64_t m : {1, 2, 3, 4}) {
    const MatmulSkinnyLaunch l = matmul_skinny_launch(m, 6144, 4096, kSms);
    EXPECT_TRUE(l.few_tokens) << m;
    EXPECT_EQ(l.grid, 384) << m;
    EXPECT_TRUE(matmul_skinny_fuses_rope(l, kSms)) << m;
    EXPECT_TRUE(matmul_skinny_launch_valid(l, m, 6144, 4096)) << m;
  }
  const MatmulSkinnyLaunch qkv = matmul_skinny_launch(4, 6144, 4096, kSms);
  // Not at m = 5 (past its 4 rows of x), nor where two blocks per SM hold every tile (llama3-8b's
  // o: 256) or three would not (gate_up: 1792), nor when switched off.
  EXPECT_FALSE(matmul_skinny_launch(5, 6144, 4096, kSms).few_tokens);
  EXPECT_FALSE(matmul_skinny_fuses_rope(matmul_skinny_launch(5, 6144, 4096, kSms), kSms));
  EXPECT_FALSE(matmul_skinny_launch(1, 4096, 4096, kSms).few_tokens);
  EXPECT_FALSE(matmul_skinny_launch(1, 28672, 4096, kSms).few_tokens);
  EXPECT_FALSE(
      matmul_skinny_launch(1, 6144, 4096, kSms, 0, false, MatmulSkinnyFewTokens::kOff).few_tokens);
  // The edges: 2·132 tiles fit two blocks per SM; 2·132 + 1 and 3·132 take three; 3·132 + 1 not.
  for (const auto& [tiles, expected] : std::initializer_list<std::pair<int64_t, bool>>{
           {264, false}, {265, true}, {396, true}, {397, false}}) {
    EXPECT_EQ(matmul_skinny_launch(1, tiles * 16, 4096, kSms).few_tokens, expected) << tiles;
  }
  // Beyond three tiles per SM only where a tile is at most two chunks (K <= 1024): qwen2.5-0.5b's
  // gate_up (608 tiles of 2 chunks) and LM head (9,496), a persistent grid of 396 blocks; not at 3
  // chunks (K = 1536), nor Llama-3-8B's gate_up (8), nor at m = 5.
  for (const int64_t n : {9728, 151936}) {
    const MatmulSkinnyLaunch l = matmul_skinny_launch(1, n, 896, kSms);
    EXPECT_TRUE(l.few_tokens) << n;
    EXPECT_EQ(l.grid, 3 * kSms) << n;
    EXPECT_TRUE(matmul_skinny_launch_valid(l, 1, n, 896)) << n;
  }
  EXPECT_TRUE(matmul_skinny_launch(4, 9728, 1024, kSms).few_tokens);
  EXPECT_FALSE(matmul_skinny_launch(1, 9728, 1032, kSms).few_tokens);  // 3 chunks
  EXPECT_FALSE(matmul_skinny_launch(1, 17920, 1536, kSms).few_tokens);
  EXPECT_FALSE(matmul_skinny_launch(5, 9728, 896, kSms).few_tokens);
  EXPECT_FALSE(
      matmul_skinny_launch(1, 9728, 896, kSms, 0, false, MatmulSkinnyFewTokens::kOff).few_tokens);
  // Short tiles that two blocks per SM hold keep two (qwen2.5-0.5b's o: 56 tiles; 264 tiles);
  // 397 tiles of 2 chunks take three (of 4096: two, the edges above).
  EXPECT_FALSE(matmul_skinny_launch(1, 896, 896, kSms).few_tokens);
  EXPECT_FALSE(matmul_skinny_launch(1, 264 * 16, 896, kSms).few_tokens);
  EXPECT_TRUE(matmul_skinny_launch(1, 397 * 16, 896, kSms).few_tokens);
  // Forced: wherever m <= 4 and K is not split; a split launch (qwen2.5-0.5b's down) keeps two.
  const MatmulSkinnyLaunch small =
      matmul_skinny_launch(1, 896, 896, kSms, 0, false, MatmulSkinnyFewTokens::kOn);
  EXPECT_TRUE(small.few_tokens);
  EXPECT_EQ(small.grid, 56);
  EXPECT_FALSE(
      matmul_skinny_launch(1, 896, 4864, kSms, 0, false, MatmulSkinnyFewTokens::kOn).few_tokens);
  EXPECT_TRUE(
      matmul_skinny_launch(3, 896, 896, kSms, 0, false, MatmulSkinnyFewTokens::kOn).few_tokens);
  EXPECT_FALSE(
      matmul_skinny_launch(5, 896, 896, kSms, 0, false, MatmulSkinnyFewTokens::kOn).few_tokens);
  // A launch planned for 4 tokens is not valid for 5.
  EXPECT_FALSE(matmul_skinny_launch_valid(qkv, 5, 6144, 4096));
}

TEST(MatmulSkinnyLaunch, SplitsOnlyWhereColumnsCannotFillTheGpu) {
  constexpr int kSms = 132;  // the H200
  // Every llama3-8b projection has at least 256 column blocks of 16 rows: no split, every block
  // slot filled (two per SM up to 16 rows, one beyond; three for q|k|v at m <= 4, the few-token
  // variant).
  for (const int64_t n : {6144, 4096, 28672, 128256}) {
    for (const int64_t k : {4096, 14336}) {
      for (const int64_t m : {1, 8, 64}) {
        const MatmulSkinnyLaunch l = matmul_skinny_launch(m, n, k, kSms);
        EXPECT_EQ(l.splits, 1) << n << "x" << k << " m " << m;
        EXPECT_EQ(l.few_tokens, n == 6144 && m == 1) << n << "x" << k << " m " << m;
        EXPECT_EQ(l.grid, std::min<int64_t>(l.n_blocks, kSms * matmul_skinny_blocks_per_sm(
                                                                   l.m_tiles, l.few_tokens)))
            << n << "x" << k << " m " << m;
      }
    }
  }
  // qwen2.5-0.5b's down (896 × 4864: 56 column blocks, 10 chunks): two splits of 5 chunks, one
  // tile per SM at most; its o (896 × 896: 2 chunks) cannot split (splits of >= 2 chunks only).
  const MatmulSkinnyLaunch down = matmul_skinny_launch(1, 896, 4864, kSms);
  EXPECT_EQ(down.splits, 2);
  EXPECT_EQ(down.chunks_per_split, 5);
  EXPECT_EQ(down.grid, 112);  // fewer tiles than block slots: one block each
  EXPECT_EQ(matmul_skinny_launch(1, 896, 896, kSms).splits, 1);
}

TEST(MatmulSkinnyLaunch, MergesInClustersOnlyWithOneTileABlockAndEveryClusterResident) {
  constexpr int kSms = 132;
  // qwen2.5-0.5b's down: 56 clusters of 2 blocks, one tile each.
  MatmulSkinnyLaunch down = matmul_skinny_launch(1, 896, 4864, kSms);
  ASSERT_EQ(down.splits, 2);
  EXPECT_TRUE(matmul_skinny_merges_in_clusters(down, 56));
  EXPECT_FALSE(matmul_skinny_merges_in_clusters(down, 55));  // a second wave of clusters
  EXPECT_FALSE(matmul_skinny_merges_in_clusters(down, 0));   // no clusters on this device
  down.cluster_merge = false;                                // the workspace path asked for
  EXPECT_FALSE(matmul_skinny_merges_in_clusters(down, 1000));
  // One split: nothing to merge.
  EXPECT_FALSE(matmul_skinny_merges_in_clusters(matmul_skinny_launch(1, 896, 896, kSms), 1000));
  // Persistent blocks (more tiles than block slots): a block's tiles belong to different column
  // blocks, so its neighbours are not its splits.
  const MatmulSkinnyLaunch llama_o = matmul_skinny_launch(1, 4096, 4096, kSms, 2);
  ASSERT_LT(llama_o.grid, llama_o.tiles);
  EXPECT_FALSE(matmul_skinny_merges_in_clusters(llama_o, 1000));
  // Splits past the portable cluster size merge through the workspace.
  const MatmulSkinnyLaunch wide = matmul_skinny_launch(1, 33, 16384, kSms, 16);
  ASSERT_GT(wide.splits, kMatmulSkinnyMaxClusterSplits);
  EXPECT_FALSE(matmul_skinny_merges_in_clusters(wide, 1000));
  const MatmulSkinnyLaunch seven = matmul_skinny_launch(1, 33, 16384, kSms, 7);
  ASSERT_EQ(seven.splits, 7);
  EXPECT_TRUE(matmul_skinny_merges_in_clusters(seven, 3));
}

TEST(MatmulSkinnyLaunch, InvariantsHoldForEveryShapeAndRequest) {
  for (const int sms : {1, 8, 132}) {
    for (const int64_t m : {1, 3, 8, 17, 64}) {
      for (const int64_t n : {1, 31, 33, 896, 4096, 6144, 9728, 600000}) {
        for (const int64_t k : {8, 72, 256, 896, 4096, 4864, 14336}) {
          for (const int requested : {0, 1, 2, 3, 5, 16, 100}) {
            const MatmulSkinnyLaunch l = matmul_skinny_launch(m, n, k, sms, requested);
            const std::string what = std::to_string(m) + "x" + std::to_string(n) + "x" +
                                     std::to_string(k) + " sms " + std::to_string(sms) +
                                     " requested " + std::to_string(requested);
            ASSERT_GE(l.splits, 1) << what;
            ASSERT_LE(l.splits, kMatmulSkinnyMaxSplits) << what;
            // No split is empty, and together they cover every chunk.
            ASSERT_LT((l.splits - 1) * l.chunks_per_split, l.num_chunks) << what;
            ASSERT_GE(l.splits * l.chunks_per_split, l.num_chunks) << what;
            if (l.splits > 1) {
              ASSERT_GE(l.chunks_per_split, kMatmulSkinnyMinChunksPerSplit) << what;
              ASSERT_LE(l.splits * m * n * 4, kMatmulSkinnyPartialBytes) << what;
              ASSERT_LE(l.n_blocks, kMatmulSkinnyMaxCounters) << what;
            }
            if (requested > 0) {
              ASSERT_LE(l.splits, requested) << what;
            }
            // Persistent: never more blocks than block slots or tiles, at least one.
            ASSERT_EQ(l.tiles, l.n_blocks * l.splits) << what;
            ASSERT_EQ(l.grid, std::min<int64_t>(l.tiles, sms * matmul_skinny_blocks_per_sm(
                                                                   l.m_tiles, l.few_tokens)))
                << what;
            // The few-token variant: up to 4 tokens, one split, more tiles than two blocks per
            // SM take, and no more than three unless a tile is at most two chunks.
            ASSERT_EQ(
                l.few_tokens,
                m <= kMatmulSkinnyFewTokensMaxM && l.splits == 1 && l.tiles > 2 * sms &&
                    (l.tiles <= 3 * sms || l.num_chunks <= kMatmulSkinnyFewTokensShortTileChunks))
                << what;
            // The ring: the variant's stages, fewer only with at most one block per SM, and
            // never fewer than a block's stream touches; the deep ring where a plain one-token-
            // tile launch of at most one block per SM streams more chunks a block than the
            // variant requests before its PDL wait.
            const int stages = matmul_skinny_stages(l.m_tiles, l.few_tokens);
            const int64_t chunks = matmul_skinny_block_chunks(l);
            const bool deep =
                l.grid <= sms && l.m_tiles == 1 && !l.few_tokens && chunks > stages - 1;
            ASSERT_EQ(l.deep_ring, deep) << what;
            ASSERT_EQ(l.ring_stages,
                      l.grid <= sms
                          ? std::min<int64_t>(deep ? kMatmulSkinnyDeepStages : stages, chunks)
                          : stages)
                << what;
            ASSERT_GE(l.ring_stages, 1) << what;
            ASSERT_TRUE(matmul_skinny_launch_valid(l, m, n, k)) << what;
          }
        }
      }
    }
  }
}

TEST(MatmulSkinnyLaunch, ValidityCheckRejectsLaunchesThatDoNotFit) {
  const MatmulSkinnyLaunch good = matmul_skinny_launch(8, 4096, 4096, 132);
  ASSERT_TRUE(matmul_skinny_launch_valid(good, 8, 4096, 4096));
  EXPECT_FALSE(matmul_skinny_launch_valid(good, 9, 4096, 4096));  // two token tiles needed
  EXPECT_FALSE(matmul_skinny_launch_valid(good, 8, 4112, 4096));  // one more column block
  EXPECT_FALSE(matmul_skinny_launch_valid(good, 8, 4096, 4104));  // one more chunk
  MatmulSkinnyLaunch l = good;
  l.splits += 1;  // the last split would be empty
  l.tiles = l.n_blocks * l.splits;
  EXPECT_FALSE(matmul_skinny_launch_valid(l, 8, 4096, 4096));
  l = good;
  l.chunks_per_split -= 1;  // chunks left over
  EXPECT_FALSE(matmul_skinny_launch_valid(l, 8, 4096, 4096));
  l = good;
  l.splits = 0;
  EXPECT_FALSE(matmul_skinny_launch_valid(l, 8, 4096, 4096));
  l = good;
  l.grid = l.tiles + 1;  // a block without a tile
  EXPECT_FALSE(matmul_skinny_launch_valid(l, 8, 4096, 4096));
  l.grid = 0;
  EXPECT_FALSE(matmul_skinny_launch_valid(l, 8, 4096, 4096));
  l = good;
  l.tiles += 1;  // tiles that are not column blocks × splits
  EXPECT_FALSE(matmul_skinny_launch_valid(l, 8, 4096, 4096));
  // 16 splits of 64 × 8192 fp32 partials need 32 MiB: more than the workspace; at 32 rows, 16 MiB
  // fit.
  l = matmul_skinny_launch(64, 8192, 16384, 132, 1);
  l.splits = 16;
  l.chunks_per_split = 2;
  l.tiles = l.n_blocks * l.splits;
  EXPECT_FALSE(matmul_skinny_launch_valid(l, 64, 8192, 16384));
  l.m_tiles = matmul_skinny_m_tiles(32);
  l.ring_stages = matmul_skinny_stages(l.m_tiles);
  EXPECT_TRUE(matmul_skinny_launch_valid(l, 32, 8192, 16384));
  // A ring without a stage its blocks stream into, or with more than the variant's.
  l = matmul_skinny_launch(1, 896, 896, 132);  // one tile of 2 chunks a block: 2 stages
  ASSERT_EQ(l.ring_stages, 2);
  ASSERT_TRUE(matmul_skinny_launch_valid(l, 1, 896, 896));
  l.ring_stages = 1;
  EXPECT_FALSE(matmul_skinny_launch_valid(l, 1, 896, 896));
  l.ring_stages = 0;
  EXPECT_FALSE(matmul_skinny_launch_valid(l, 1, 896, 896));
  l.ring_stages = matmul_skinny_stages(1);
  EXPECT_TRUE(matmul_skinny_launch_valid(l, 1, 896, 896));  // more than needed is allowed
  l.ring_stages += 1;
  EXPECT_FALSE(matmul_skinny_launch_valid(l, 1, 896, 896));
  // The deep ring: up to its own stages, and only for the plain one-token-tile variant.
  l = matmul_skinny_launch(1, 896, 4864, 132);
  ASSERT_TRUE(l.deep_ring);
  ASSERT_TRUE(matmul_skinny_launch_valid(l, 1, 896, 4864));
  l.ring_stages = kMatmulSkinnyDeepStages;
  EXPECT_TRUE(matmul_skinny_launch_valid(l, 1, 896, 4864));
  l.ring_stages += 1;
  EXPECT_FALSE(matmul_skinny_launch_valid(l, 1, 896, 4864));
  l = matmul_skinny_launch(1, 896, 4864, 132);
  l.ring_stages = 4;  // a stage its blocks stream into left out
  EXPECT_FALSE(matmul_skinny_launch_valid(l, 1, 896, 4864));
  l = matmul_skinny_launch(1, 896, 4864, 132);
  l.few_tokens = true;
  EXPECT_FALSE(matmul_skinny_launch_valid(l, 1, 896, 4864));
}

TEST(MatmulSkinnyLaunch, RingFitsOnlyLaunchesOfAtMostOneBlockPerSm) {
  constexpr int kSms = 132;
  // Qwen2.5-0.5B's o (56 tiles) and q|k|v (72) at m = 1 and 16: one tile of 2 chunks a block, so 2
  // of the variant's 4 stages; at m = 32 (one block per SM, 4 stages of 49 rows) also 2.
  for (const int64_t m : {1, 16, 32}) {
    EXPECT_EQ(matmul_skinny_launch(m, 896, 896, kSms).ring_stages, 2) << m;
    EXPECT_EQ(matmul_skinny_launch(m, 1152, 896, kSms, 0, true).ring_stages, 2) << m;
  }
  // Its down: 2 splits of 5 chunks on 112 blocks, more than the 3 the variant requests before its
  // PDL wait: the deep ring, 5 of its stages, so all 5 are requested before the wait.
  const MatmulSkinnyLaunch down = matmul_skinny_launch(1, 896, 4864, kSms);
  EXPECT_EQ(down.grid, 112);
  EXPECT_TRUE(down.deep_ring);
  EXPECT_EQ(down.ring_stages, 5);
  // Not with the RMSNorm prologue or an epilogue that needs an unsplit launch (their variants
  // have no deep ring), nor at two token tiles: the variant's 4 stages, all filled.
  const MatmulSkinnyLaunch down_unsplit = matmul_skinny_launch(1, 896, 4864, kSms, 0, true);
  EXPECT_FALSE(down_unsplit.deep_ring);
  EXPECT_EQ(down_unsplit.ring_stages, 4);
  EXPECT_FALSE(matmul_skinny_launch(16, 896, 4864, kSms).deep_ring);
  // A block of more chunks than the deep ring's stages: all 8.
  const MatmulSkinnyLaunch long_split = matmul_skinny_launch(1, 896, 14336, kSms, 2);
  EXPECT_TRUE(long_split.deep_ring);
  EXPECT_EQ(long_split.ring_stages, kMatmulSkinnyDeepStages);
  // Qwen3-0.6B's o (2 splits of 2 chunks, 128 blocks) and down (2 of 3): 2 and 3 stages, all
  // requested before the wait by the variant's own ring.
  EXPECT_EQ(matmul_skinny_launch(1, 1024, 2048, kSms).ring_stages, 2);
  EXPECT_EQ(matmul_skinny_launch(1, 1024, 3072, kSms).ring_stages, 3);
  EXPECT_FALSE(matmul_skinny_launch(1, 1024, 3072, kSms).deep_ring);
  // More blocks than SMs keep every stage even where a block streams fewer chunks: Qwen3-0.6B's
  // q|k|v (256 tiles of 2 chunks) and gate_up (384, the few-token variant's 3 stages).
  EXPECT_EQ(matmul_skinny_launch(1, 4096, 1024, kSms, 0, true).ring_stages, 4);
  const MatmulSkinnyLaunch gate_up = matmul_skinny_launch(1, 6144, 1024, kSms, 0, true);
  EXPECT_TRUE(gate_up.few_tokens);
  EXPECT_EQ(gate_up.ring_stages, 3);
  // One chunk a block: one stage.
  EXPECT_EQ(matmul_skinny_launch(1, 64, 512, kSms).ring_stages, 1);
  // A block of several tiles counts them all: 2 tiles of 1 chunk on one SM (m = 32: one block
  // per SM), 2 stages.
  const MatmulSkinnyLaunch two = matmul_skinny_launch(32, 32, 512, 1);
  EXPECT_EQ(two.grid, 1);
  EXPECT_EQ(two.ring_stages, 2);
}

TEST(MatmulSkinnyLaunch, RmsNormPrologueNeverSplits) {
  // A prologue tile must see its tokens' whole K (it sums their squares): shapes that would split
  // (qwen2.5-0.5b's down, Llama-3-8B's o at m = 8 on fewer SMs) and requested splits stay at one.
  EXPECT_EQ(matmul_skinny_launch(1, 896, 4864, 132).splits, 2);
  EXPECT_EQ(matmul_skinny_launch(1, 896, 4864, 132, 0, true).splits, 1);
  EXPECT_EQ(matmul_skinny_launch(8, 4096, 4096, 16, 7, true).splits, 1);
  const MatmulSkinnyLaunch l = matmul_skinny_launch(1, 1152, 896, 132, 0, true);
  EXPECT_TRUE(matmul_skinny_launch_valid(l, 1, 1152, 896));
  EXPECT_EQ(l.grid, 72);  // one block per column block
}

TEST(MatmulSkinnyDomain, RmsNormPrologueNeedsAnAlignedBf16Weight) {
  alignas(16) static uint8_t bytes[64];
  MatmulParams p;
  p.x = bytes;
  p.w = bytes;
  p.y = bytes;
  p.dtype = DType::kBF16;
  p.w_dtype = DType::kBF16;
  p.m = 1;
  p.n = 16;
  p.k = 16;
  p.y_row_stride = 16;
  p.norm_weight = bytes;
  p.norm_weight_dtype = DType::kBF16;
  EXPECT_EQ(matmul_skinny_unsupported_reason(p, MatmulEpilogue::kNone), nullptr);
  p.norm_weight_dtype = DType::kF32;
  EXPECT_NE(std::string(matmul_skinny_unsupported_reason(p, MatmulEpilogue::kNone)).find("bf16"),
            std::string::npos);
  p.norm_weight_dtype = DType::kBF16;
  p.norm_weight = bytes + 2;
  EXPECT_NE(std::string(matmul_skinny_unsupported_reason(p, MatmulEpilogue::kNone)).find("aligned"),
            std::string::npos);
}

TEST(MatmulSkinnyDomain, SwigluEpilogueTakesAnEvenNAndNoOtherEpilogue) {
  alignas(16) static uint8_t bytes[64];
  MatmulParams p;
  p.x = bytes;
  p.w = bytes;
  p.y = bytes;
  p.bias = bytes;
  p.residual = bytes;
  p.dtype = DType::kBF16;
  p.w_dtype = DType::kBF16;
  p.bias_dtype = DType::kBF16;
  p.m = 1;
  p.n = 32;
  p.k = 16;
  p.y_row_stride = 16;  // n / 2: y is the activation
  p.swiglu = true;
  EXPECT_EQ(matmul_skinny_unsupported_reason(p, MatmulEpilogue::kNone), nullptr);
  for (const MatmulEpilogue e : {MatmulEpilogue::kBias, MatmulEpilogue::kResidual})
    EXPECT_NE(std::string(matmul_skinny_unsupported_reason(p, e)).find("SwiGLU"),
              std::string::npos);
  p.n = 33;
  EXPECT_NE(std::string(matmul_skinny_unsupported_reason(p, MatmulEpilogue::kNone)).find("even n"),
            std::string::npos);
  // A SwiGLU launch never splits: Llama-3-8B's gate_up at m = 1 on 8 SMs would.
  EXPECT_GT(matmul_skinny_launch(1, 28672, 4096, 8, 4).splits, 1);
  EXPECT_EQ(matmul_skinny_launch(1, 28672, 4096, 8, 4, true).splits, 1);
}

TEST(MatmulSkinnyDomain, RopeEpilogueTakesWholeHeadsOf16DimsAndNoQkNorm) {
  // Llama-3-8B's q|k|v (32 + 2·8 heads of 128) at m = 1, with and without bias.
  MatmulParams p = supported_params();
  p.m = 1;
  p.n = 48 * 128;
  p.k = 4096;
  p.y_row_stride = p.n;
  p.qkv_rope = true;
  p.rope.num_heads = 32;
  p.rope.num_kv_heads = 8;
  p.rope.head_dim = 128;
  p.rope.kv_dtype = DType::kBF16;
  EXPECT_EQ(matmul_skinny_unsupported_reason(p, MatmulEpilogue::kNone), nullptr);
  EXPECT_EQ(matmul_skinny_unsupported_reason(p, MatmulEpilogue::kBias), nullptr);
  EXPECT_TRUE(rejected_for(p, MatmulEpilogue::kResidual, "no residual"));
  EXPECT_TRUE(matmul_skinny_no_split(p));
  // Head dim 40: a tile of 8 dims from each half of a head would straddle two heads.
  MatmulParams odd = p;
  odd.rope.head_dim = 40;
  odd.n = odd.y_row_stride = 48 * 40;
  EXPECT_TRUE(rejected_for(odd, MatmulEpilogue::kNone, "multiple of 16"));
  MatmulParams wide = p;
  wide.n = 48 * 128 + 16;
  wide.y_row_stride = wide.n;
  EXPECT_TRUE(rejected_for(wide, MatmulEpilogue::kNone, "n = (num_heads + 2 * num_kv_heads)"));
  MatmulParams qk_norm = p;
  qk_norm.rope.q_norm_weight = qk_norm.rope.k_norm_weight = address(16);
  EXPECT_TRUE(rejected_for(qk_norm, MatmulEpilogue::kNone, "no q/k norm"));
  MatmulParams f32_cache = p;
  f32_cache.rope.kv_dtype = DType::kF32;
  EXPECT_TRUE(rejected_for(f32_cache, MatmulEpilogue::kNone, "bf16 KV cache"));
  // A RoPE launch never splits: this one on 8 SMs, asked for 4 splits, would.
  EXPECT_EQ(matmul_skinny_launch(1, p.n, p.k, 8, 4).splits, 4);
  EXPECT_EQ(matmul_skinny_launch(1, p.n, p.k, 8, 4, matmul_skinny_no_split(p)).splits, 1);
  // The kernel rotates in its epilogue only where the tiles leave block slots free: Qwen2.5-0.5B's
  // q|k|v (72 tiles) at m = 1 and 32, on two blocks per SM or three; Llama-3-8B's at m <= 4 on the
  // few-token variant (384 tiles, 12 of 396 slots free), not without it (264 slots), nor at m = 8
  // (264 slots) or m = 64 (132).
  EXPECT_TRUE(matmul_skinny_fuses_rope(matmul_skinny_launch(1, 1152, 896, 132, 0, true), 132));
  EXPECT_TRUE(matmul_skinny_fuses_rope(matmul_skinny_launch(32, 1152, 896, 132, 0, true), 132));
  EXPECT_TRUE(matmul_skinny_fuses_rope(matmul_skinny_launch(1, 6144, 4096, 132, 0, true), 132));
  EXPECT_TRUE(matmul_skinny_fuses_rope(
      matmul_skinny_launch(1, 1152, 896, 132, 0, true, MatmulSkinnyFewTokens::kOn), 132));
  EXPECT_TRUE(matmul_skinny_fuses_rope(matmul_skinny_launch(2, 6144, 4096, 132, 0, true), 132));
  EXPECT_FALSE(matmul_skinny_fuses_rope(matmul_skinny_launch(8, 6144, 4096, 132, 0, true), 132));
  EXPECT_FALSE(matmul_skinny_fuses_rope(matmul_skinny_launch(64, 6144, 4096, 132, 0, true), 132));
  EXPECT_FALSE(matmul_skinny_fuses_rope(
      matmul_skinny_launch(1, 6144, 4096, 132, 0, true, MatmulSkinnyFewTokens::kOff), 132));
}

TEST(MatmulSkinnyLaunch, LargeNNeverSplitsBeyondTheCounters) {
  // 16385 column blocks: one more than the counters cover, so no split even when asked.
  const int64_t n = (kMatmulSkinnyMaxCounters + 1) * kMatmulSkinnyBlockRows;
  EXPECT_EQ(matmul_skinny_launch(1, n, 4096, 132, 4).splits, 1);
}

}  // namespace
}  // namespace roofline
