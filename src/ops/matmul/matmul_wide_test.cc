// The wide CUDA matmul's host side on the CPU: its domain (matmul_wide_unsupported_reason, fed
// made-up addresses — nothing is dereferenced) and its launch plan (matmul_wide_launch): tiles,
// chunks, the split choice (one wave of one block per SM, within a cluster's size and the
// clusters the device runs at once) with its invariants (every chunk in one non-empty split),
// which matmul_wide_launch_valid — the launcher's check — accepts, while it rejects launches that
// do not fit the problem.
#include "ops/matmul/matmul_wide.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

const auto address = &testing::made_up_address;

MatmulParams supported_params() {
  MatmulParams p;
  p.x = address(16);
  p.w = address(256);
  p.w_dtype = DType::kBF16;
  p.dtype = DType::kBF16;
  p.bias = address(2);
  p.bias_dtype = DType::kBF16;
  p.residual = address(2);
  p.y = const_cast<void*>(address(2));  // y, bias and residual go element by element
  p.m = 17;
  p.n = 131;
  p.k = 72;
  p.y_row_stride = 137;
  return p;
}

bool says(const char* reason, const char* part) {
  return reason != nullptr && std::strstr(reason, part) != nullptr;
}

TEST(MatmulWideDomainTest, TakesDecodeProblemsAndSaysWhyNotOtherwise) {
  const MatmulParams p = supported_params();
  for (const MatmulEpilogue e :
       {MatmulEpilogue::kNone, MatmulEpilogue::kBias, MatmulEpilogue::kResidual})
    EXPECT_EQ(matmul_wide_unsupported_reason(p, e), nullptr);
  for (const int64_t m : {1, 64}) {
    MatmulParams q = p;
    q.m = m;
    EXPECT_EQ(matmul_wide_unsupported_reason(q, MatmulEpilogue::kNone), nullptr) << m;
  }
  MatmulParams q = p;
  q.m = 65;
  EXPECT_TRUE(says(matmul_wide_unsupported_reason(q, MatmulEpilogue::kNone), "1 to 64 rows"));
  q = p;
  q.m = 0;
  EXPECT_TRUE(says(matmul_wide_unsupported_reason(q, MatmulEpilogue::kNone), "1 to 64 rows"));
  q = p;
  q.k = 67;
  EXPECT_TRUE(says(matmul_wide_unsupported_reason(q, MatmulEpilogue::kNone), "multiple of 8"));
  q = p;
  q.x = address(8);
  EXPECT_TRUE(says(matmul_wide_unsupported_reason(q, MatmulEpilogue::kNone), "16-byte aligned"));
  q = p;
  q.w = address(2);
  EXPECT_TRUE(says(matmul_wide_unsupported_reason(q, MatmulEpilogue::kNone), "16-byte aligned"));
  q = p;
  q.dtype = DType::kF32;
  EXPECT_TRUE(says(matmul_wide_unsupported_reason(q, MatmulEpilogue::kNone), "bf16"));
  q = p;
  q.bias_dtype = DType::kF32;
  EXPECT_TRUE(says(matmul_wide_unsupported_reason(q, MatmulEpilogue::kBias), "bf16 bias"));
  q = p;
  q.y_row_stride = q.n - 1;
  EXPECT_TRUE(says(matmul_wide_unsupported_reason(q, MatmulEpilogue::kNone), "y_row_stride"));
  q = p;
  q.residual = nullptr;
  EXPECT_TRUE(says(matmul_wide_unsupported_reason(q, MatmulEpilogue::kResidual), "residual"));
  // The fused forms belong to the caller: it runs the product here and the rest around it.
  q = p;
  q.norm_weight = address(16);
  EXPECT_TRUE(says(matmul_wide_unsupported_reason(q, MatmulEpilogue::kNone), "plain product"));
  q = p;
  q.swiglu = true;
  EXPECT_TRUE(says(matmul_wide_unsupported_reason(q, MatmulEpilogue::kNone), "plain product"));
}

TEST(MatmulWideDomainTest, FusesSummariesOfTilesThatDivideItsTile) {
  // The wide kernel writes the logit tile summaries itself where a summary tile is whole lanes of
  // one half-warp's 128 columns (8, 16, 32, 64 or 128 tokens); the others, and summaries that are
  // off, are not its to write (the caller's own pass writes them).
  MatmulParams p = supported_params();
  EXPECT_FALSE(matmul_wide_fuses_summaries(p));
  uint64_t words = 0, counts = 0;
  const uint32_t epoch = 1;
  p.summaries = {&words, &counts, &epoch, 128};
  for (const int64_t tile_tokens : {8, 16, 32, 64, 128}) {
    p.summaries.tile_tokens = tile_tokens;
    EXPECT_TRUE(matmul_wide_fuses_summaries(p)) << tile_tokens;
  }
  for (const int64_t tile_tokens : {1, 4, 24, 37, 48, 256, 4096}) {
    p.summaries.tile_tokens = tile_tokens;
    EXPECT_FALSE(matmul_wide_fuses_summaries(p)) << tile_tokens;
  }
  // A domain, not a refusal: the product itself stays supported.
  EXPECT_EQ(matmul_wide_unsupported_reason(p, MatmulEpilogue::kNone), nullptr);
  // What every CUDA epilogue that writes them needs besides: the general limits, and words and
  // counts 8-byte aligned.
  p.summaries.tile_tokens = 128;
  EXPECT_EQ(matmul_summaries_epilogue_reason(p), nullptr);
  uint64_t storage[2] = {};
  p.summaries.words = reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(storage) + 4);
  EXPECT_TRUE(says(matmul_summaries_epilogue_reason(p), "8-byte aligned"));
  p.summaries.words = &words;
  p.summaries.nonfinite = reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(storage) + 4);
  EXPECT_TRUE(says(matmul_summaries_epilogue_reason(p), "8-byte aligned"));
  p.summaries.nonfinite = &counts;
  p.summaries.tile_tokens = 0;
  EXPECT_TRUE(says(matmul_summaries_epilogue_reason(p), "tile_tokens must be in"));
}

TEST(MatmulWideLaunchTest, FillsOneWaveWithClustersOfSplits) {
  // Llama-3-8B at m = 64 on 132 SMs: o and down (32 tiles) take 4 splits, q|k|v (48) 2, gate_up
  // (224 tiles) none.
  struct Case {
    int64_t n, k;
    int splits;
    int64_t chunks_per_split;
  };
  for (const Case c : {Case{4096, 4096, 4, 16}, Case{4096, 14336, 4, 56}, Case{6144, 4096, 2, 32},
                       Case{28672, 4096, 1, 64}, Case{896, 896, 7, 2}, Case{1152, 896, 7, 2}}) {
    const MatmulWideLaunch l = matmul_wide_launch(64, c.n, c.k, 132);
    SCOPED_TRACE(std::to_string(c.n) + "x" + std::to_string(c.k));
    EXPECT_EQ(l.n_tiles, (c.n + 127) / 128);
    EXPECT_EQ(l.num_chunks, (c.k + 63) / 64);
    EXPECT_EQ(l.splits, c.splits);
    EXPECT_EQ(l.chunks_per_split, c.chunks_per_split);
    EXPECT_EQ(l.grid, l.n_tiles * l.splits);
    if (l.splits > 1) {
      EXPECT_LE(l.grid, 132);  // one wave
    }
    EXPECT_TRUE(matmul_wide_launch_valid(l, c.n, c.k));
  }
}

TEST(MatmulWideLaunchTest, SplitsAreClampedRecountedAndLimitedByResidentClusters) {
  // Requested counts are clamped to [1, 8] and to the chunks; a count that would leave an empty
  // split is recounted (9 chunks in 4 splits: 3 splits of 3).
  EXPECT_EQ(matmul_wide_launch(8, 4096, 4096, 132, 16).splits, 8);
  EXPECT_EQ(matmul_wide_launch(8, 4096, 200, 132, 8).splits, 4);  // 4 chunks
  const MatmulWideLaunch odd = matmul_wide_launch(8, 4096, 576, 132, 4);
  EXPECT_EQ(odd.num_chunks, 9);
  EXPECT_EQ(odd.chunks_per_split, 3);
  EXPECT_EQ(odd.splits, 3);
  EXPECT_TRUE(matmul_wide_launch_valid(odd, 4096, 576));
  for (int requested = 1; requested <= 12; ++requested) {
    for (const int64_t k : {8, 64, 72, 200, 576, 4104, 14336}) {
      const MatmulWideLaunch l = matmul_wide_launch(3, 131, k, 132, requested);
      EXPECT_TRUE(matmul_wide_launch_valid(l, 131, k)) << requested << " " << k;
    }
  }
  // Where clusters of the chosen size do not all fit at once, fewer splits: 32 tiles and room
  // for 30 clusters of 4 but 40 of 3 -> 3 splits; no cluster at all fits -> 1.
  int64_t clusters[kMatmulWideMaxSplits + 1] = {0, 0, 64, 40, 30, 20, 16, 14, 12};
  EXPECT_EQ(matmul_wide_launch(64, 4096, 4096, 132, 0, clusters).splits, 3);
  int64_t none[kMatmulWideMaxSplits + 1] = {};
  EXPECT_EQ(matmul_wide_launch(64, 4096, 4096, 132, 0, none).splits, 1);
}

TEST(MatmulWideLaunchTest, ValidityRejectsLaunchesOfOtherProblems) {
  const MatmulWideLaunch l = matmul_wide_launch(64, 4096, 4096, 132);
  ASSERT_TRUE(matmul_wide_launch_valid(l, 4096, 4096));
  EXPECT_FALSE(matmul_wide_launch_valid(l, 4096 + 128, 4096));  // another tile count
  EXPECT_FALSE(matmul_wide_launch_valid(l, 4096, 4096 + 64));   // another chunk count
  MatmulWideLaunch bad = l;
  bad.splits = 9;
  EXPECT_FALSE(matmul_wide_launch_valid(bad, 4096, 4096));
  bad = l;
  bad.chunks_per_split = 8;  // chunks left over
  EXPECT_FALSE(matmul_wide_launch_valid(bad, 4096, 4096));
  bad = l;
  bad.chunks_per_split = 60;  // empty splits
  EXPECT_FALSE(matmul_wide_launch_valid(bad, 4096, 4096));
  bad = l;
  bad.grid = l.grid - 1;
  EXPECT_FALSE(matmul_wide_launch_valid(bad, 4096, 4096));
}

}  // namespace
}  // namespace roofline
