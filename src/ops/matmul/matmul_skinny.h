// The skinny-M weight-streaming GEMM of the CUDA backend (matmul_skinny_cuda.cu): its tile
// constants, its domain (matmul_skinny_unsupported_reason) and its launch plan
// (matmul_skinny_launch: the split-K choice). Everything here is a pure host function, tested on
// the CPU (matmul_skinny_test.cc) and used by both the CUDA dispatch (matmul_cuda.cu) and the
// launcher, so the "supported?" query and the launch can never disagree.
//
// Tiling (see matmul_skinny_cuda.cu): a block of kMatmulSkinnyWarps warps owns
// kMatmulSkinnyBlockRows weight rows (output columns) and one K split; its warps interleave over
// the split's kMatmulSkinnyChunkK-wide K chunks. A split count > 1 sends fp32 partials through the
// context's workspace, reduced by the last block of each column block to arrive.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/cuda_stream.h"
#include "core/dtype.h"
#include "ops/matmul/matmul.h"

namespace roofline {

// Most rows (tokens) the kernel takes: 8 mma tiles of 8 tokens. Larger m is compute bound and
// belongs to cuBLASLt.
inline constexpr int64_t kMatmulSkinnyMaxM = 64;
// Weight rows per block: two 16-row mma tiles per warp, so every x fragment loaded feeds two MMAs.
inline constexpr int64_t kMatmulSkinnyBlockRows = 32;
// K per chunk: one 16-byte load per thread per weight row covers 4 threads × 8 elements = 32.
inline constexpr int64_t kMatmulSkinnyChunkK = 32;
inline constexpr int kMatmulSkinnyWarps = 4;
// Chunks each warp loads before it multiplies: 2 chunks × 4 weight rows = 8 16-byte loads in flight
// per thread (128 B), 16 KB per block, which with >= 3 resident blocks per SM covers the ~20-30 KB
// per SM that 4.28 TB/s × ~1 µs of DRAM latency needs (Little's law, 132 SMs).
inline constexpr int kMatmulSkinnyUnroll = 2;
// Blocks per SM the split-K choice aims for: 4 resident 128-thread blocks per SM keep enough loads
// in flight; more splits only add partial traffic. (ptxas, CUDA 13: 44, 72, 96, 135 registers per
// thread for 1, 2, 4, 8 token tiles, no spills: 3 resident blocks per SM at m > 32, more below.)
inline constexpr int kMatmulSkinnyTargetBlocksPerSm = 4;
// A split never gets fewer chunks than one full unrolled iteration of every warp.
inline constexpr int64_t kMatmulSkinnyMinChunksPerSplit =
    int64_t{kMatmulSkinnyWarps} * kMatmulSkinnyUnroll;
inline constexpr int kMatmulSkinnyMaxSplits = 16;
// The context's split-K workspace: fp32 partials [splits, m, n] and one arrival counter per column
// block. 16 MiB holds 16 splits of m = 64 rows of n = 4096 (more than any choice below needs at
// decode sizes); the counters cover n up to 16384 · 32 = 524288 columns.
inline constexpr int64_t kMatmulSkinnyPartialBytes = int64_t{16} << 20;
inline constexpr int64_t kMatmulSkinnyMaxCounters = 16384;

// Why the skinny kernel cannot run `p` with `epilogue`, or nullptr when it can. Addresses are only
// inspected, never dereferenced, so the CPU tests pass made-up pointers.
inline const char* matmul_skinny_unsupported_reason(const MatmulParams& p,
                                                    MatmulEpilogue epilogue) {
  const auto aligned16 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  if (p.dtype != DType::kBF16 || p.w_dtype != DType::kBF16)
    return "the skinny matmul takes bf16 x, W and y only";
  if (epilogue == MatmulEpilogue::kBias && p.bias_dtype != DType::kBF16)
    return "the skinny matmul takes a bf16 bias only";
  if (p.m < 1 || p.m > kMatmulSkinnyMaxM)
    return "the skinny matmul takes 1 to 64 rows of x (larger m is compute bound: use cuBLASLt)";
  if (p.n < 1 || p.k < 1 || p.y_row_stride < p.n) return "n, k must be >= 1 and y_row_stride >= n";
  // The kernel indexes with 32-bit column and K offsets.
  if (p.n > (int64_t{1} << 30) || p.k > (int64_t{1} << 30))
    return "the skinny matmul takes n and k below 2^30";
  if (p.k % 8 != 0)
    return "the skinny matmul needs k to be a multiple of 8 (16-byte rows of x and W)";
  if (!aligned16(p.x) || !aligned16(p.w))
    return "the skinny matmul needs x and W 16-byte aligned (it loads 8 bf16 at a time)";
  if (epilogue == MatmulEpilogue::kBias && p.bias == nullptr) return "bias epilogue without a bias";
  if (epilogue == MatmulEpilogue::kResidual && p.residual == nullptr)
    return "residual epilogue without a residual";
  return nullptr;
}

struct MatmulSkinnyLaunch {
  int m_tiles = 0;               // 1, 2, 4 or 8: 8-row mma tiles of x the kernel is built for
  int64_t n_blocks = 0;          // ceil(n / kMatmulSkinnyBlockRows): grid x
  int64_t num_chunks = 0;        // ceil(k / kMatmulSkinnyChunkK)
  int splits = 0;                // K splits: grid y; > 1 goes through the workspace
  int64_t chunks_per_split = 0;  // every split but the last has exactly this many chunks
};

// The token tiles the kernel is built for: m / 8 rounded up to a power of two.
inline int matmul_skinny_m_tiles(int64_t m) {
  int tiles = 1;
  while (tiles < (m + 7) / 8) tiles *= 2;
  return tiles;
}

// The most splits an m × n × k problem may use: each split at least
// kMatmulSkinnyMinChunksPerSplit chunks, all partials within the workspace, a counter per column
// block.
inline int64_t matmul_skinny_max_splits(int64_t m, int64_t n, int64_t k) {
  const int64_t num_chunks = (k + kMatmulSkinnyChunkK - 1) / kMatmulSkinnyChunkK;
  const int64_t n_blocks = (n + kMatmulSkinnyBlockRows - 1) / kMatmulSkinnyBlockRows;
  if (n_blocks > kMatmulSkinnyMaxCounters) return 1;
  const int64_t partial_bytes_per_split = std::max<int64_t>(m, 1) * std::max<int64_t>(n, 1) * 4;
  int64_t max_splits =
      std::min<int64_t>(kMatmulSkinnyMaxSplits, num_chunks / kMatmulSkinnyMinChunksPerSplit);
  max_splits = std::min(max_splits, kMatmulSkinnyPartialBytes / partial_bytes_per_split);
  return std::max<int64_t>(max_splits, 1);
}

// The launch for an m × n × k problem on `num_sms` SMs. `requested_splits` 0 chooses: no split
// when the column blocks alone reach kMatmulSkinnyTargetBlocksPerSm per SM, otherwise just enough
// splits to reach it, within matmul_skinny_max_splits. A requested count (tests, benchmark sweeps)
// is clamped to the same limits. With several splits, chunks_per_split is then rounded up to whole
// warp steps (kMatmulSkinnyMinChunksPerSplit chunks: every warp of a block loads in every step, no
// warp idles through the last one) and the splits recounted, so none is empty; this may drop a
// split (llama3-8b's o: 5 splits of 26 chunks become 4 of 32).
inline MatmulSkinnyLaunch matmul_skinny_launch(int64_t m, int64_t n, int64_t k, int num_sms,
                                               int requested_splits = 0) {
  MatmulSkinnyLaunch l;
  l.m_tiles = matmul_skinny_m_tiles(m);
  l.n_blocks = (n + kMatmulSkinnyBlockRows - 1) / kMatmulSkinnyBlockRows;
  l.num_chunks = (k + kMatmulSkinnyChunkK - 1) / kMatmulSkinnyChunkK;
  int64_t splits = requested_splits;
  if (splits <= 0) {
    const int64_t target_blocks = int64_t{std::max(num_sms, 1)} * kMatmulSkinnyTargetBlocksPerSm;
    splits = (target_blocks + l.n_blocks - 1) / l.n_blocks;
  }
  splits = std::clamp<int64_t>(splits, 1, matmul_skinny_max_splits(m, n, k));
  l.chunks_per_split = (l.num_chunks + splits - 1) / splits;
  if (splits > 1) {
    const int64_t step = kMatmulSkinnyMinChunksPerSplit;
    l.chunks_per_split = (l.chunks_per_split + step - 1) / step * step;
  }
  l.splits = static_cast<int>((l.num_chunks + l.chunks_per_split - 1) / l.chunks_per_split);
  return l;
}

// Whether `l` is a launch the kernel can run for m × n × k: the tiles and blocks of the problem,
// every chunk in exactly one non-empty split, and the workspace limits when it splits. The
// launcher checks every launch with it (a planned one or a caller's).
inline bool matmul_skinny_launch_valid(const MatmulSkinnyLaunch& l, int64_t m, int64_t n,
                                       int64_t k) {
  if (l.m_tiles != matmul_skinny_m_tiles(m)) return false;
  if (l.n_blocks != (n + kMatmulSkinnyBlockRows - 1) / kMatmulSkinnyBlockRows) return false;
  if (l.num_chunks != (k + kMatmulSkinnyChunkK - 1) / kMatmulSkinnyChunkK) return false;
  if (l.splits < 1 || l.splits > kMatmulSkinnyMaxSplits || l.chunks_per_split < 1) return false;
  if ((l.splits - 1) * l.chunks_per_split >= l.num_chunks) return false;  // an empty split
  if (l.splits * l.chunks_per_split < l.num_chunks) return false;         // chunks left over
  return l.splits == 1 || (l.n_blocks <= kMatmulSkinnyMaxCounters &&
                           l.splits * m * n * 4 <= kMatmulSkinnyPartialBytes);
}

// The workspace a context provides to the launcher: zeroed counters once, at creation; the kernel
// leaves every counter at zero when it finishes, so CUDA-graph replays need no reset.
struct MatmulSkinnyWorkspace {
  float* partials = nullptr;     // kMatmulSkinnyPartialBytes
  uint32_t* counters = nullptr;  // [kMatmulSkinnyMaxCounters]
};

// y = x · Wᵀ (+ epilogue) with `launch` (from matmul_skinny_launch for p's m, n, k); aborts with
// matmul_skinny_unsupported_reason's message when the kernel cannot run p. Asynchronous on stream.
// CUDA builds only.
void matmul_skinny_cuda(const MatmulParams& p, MatmulEpilogue epilogue,
                        const MatmulSkinnyLaunch& launch, const MatmulSkinnyWorkspace& workspace,
                        CudaStream stream);

}  // namespace roofline
