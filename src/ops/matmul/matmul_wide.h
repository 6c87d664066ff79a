// The wide decode GEMM of the CUDA backend (matmul_wide_cuda.cu): y = x · Wᵀ (+ bias | + residual)
// for 1 to 64 rows of x on Hopper's warpgroup MMA, its tile constants, its domain
// (matmul_wide_unsupported_reason) and its launch plan (matmul_wide_launch). Everything here is a
// pure host function, tested on the CPU (matmul_wide_test.cc) and used by both the CUDA dispatch
// (matmul_cuda.cu) and the launcher, so the "supported?" query and the launch never disagree.
//
// Why a second decode kernel beside the skinny one (matmul_skinny.h): the skinny kernel's tile is
// 16 weight rows, so it reads x once per 16 rows of W — m / 16 times the weight bytes again, 4× at
// m = 64 — and at m >= 8 cuBLASLt beat it while reaching only 69-80 % of the copy ceiling on
// Llama-3-8B's q|k|v, o and down (bench/results/2026-12-01-skinny-few-tokens.md). Here a tile is
// kMatmulWideTileN = 128 weight rows against all 64 token rows (x is read once per 128 rows of W:
// half the weight bytes at m = 64, from L2), multiplied by wgmma.m64n128k16 straight from
// shared memory that the bulk tensor copy engine (TMA) fills, one 64-wide K chunk per stage.
//
// Where it stands (H200, bench/results/2026-12-01-wide-decode-gemm.md, 2026-12-01-wide-stream-k.md
// and 2026-12-01-wide-merge.md): with x's box cut to its m rows (a 64-row box past the tensor made
// the copy engine fill zeros, slowly), y written 16 bytes at a time and the split merge moved by
// bulk copies, m = 1: q|k|v 75 %, o 67 %, gate_up 91 %, down 84 % of the copy ceiling — o 7 %
// faster than cuBLASLt, the rest within 1-4 % of it, all below the skinny kernel; m = 64: q|k|v
// 68 %, o 60 %, gate_up 83 %, down 78 % — down 1 % faster than cuBLASLt, gate_up level, q|k|v and
// o 7-10 % slower. The stage loop alone (no merge, no epilogue) streams gate_up at 96 % and down at
// 89 % at m = 64; what is left is each block's fixed cost around the stream (~1 µs to the first
// stage, ~3.5 µs of merge and outputs at m = 64), a third of o's 13 µs. Measured slower and not
// kept: a stream-K version (every SM a balanced range, parts merged through L2), and a ring of 3
// or 4 stages that let the next kernel's blocks start beside this one's. Not a candidate
// of the default selection (the decode steps are level with it: ROOFLINE_MATMUL_WIDE=1 makes it
// one; ROOFLINE_MATMUL_IMPL=wide forces it).
//
// Tiling: a tile is 128 weight rows (output columns) × one K split; a split is a run of
// kMatmulWideChunkK-wide K chunks. Splits of one tile form a thread-block cluster and merge their
// fp32 sums through their shared memories (each block finishes a run of the tile's rows and the
// others send it theirs by bulk copy: no workspace, no second kernel). One block per SM
// (its ring takes most of the shared memory), one tile per block.
//
// Logit tile summaries (an LM head's, for the sampler: matmul.h): written in the output loop, where
// a half-warp holds one token's 128 columns (matmul_wide_fuses_summaries). Correct, but at m = 64
// they add ~4 us to every block's output loop, which only 4 warps per SM run (+33-40 us on
// Llama-3-8B's LM head, bench/results/2026-12-04-sampling-wide-summaries.md), so the wide kernel
// is not a default candidate for summarised heads either.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/cuda_stream.h"
#include "core/dtype.h"
#include "ops/matmul/matmul.h"

#if defined(ROOFLINE_PHASE_TRACE)
#include "ops/common/phase_trace.h"
#endif

namespace roofline {

// Most rows (tokens): one m64 wgmma tile. The wgmma rows past m multiply stale shared memory into
// sums that are never read (x's copies are its m rows).
inline constexpr int64_t kMatmulWideMaxM = 64;
// Weight rows per tile: the wgmma's n (the accumulators of one warpgroup: 64 f32 per thread).
inline constexpr int64_t kMatmulWideTileN = 128;
// K per stage: one 128-byte row of bf16, the width of the 128-byte swizzle both wgmma operands
// are read in.
inline constexpr int64_t kMatmulWideChunkK = 64;
// Stages of the ring: 24 KB each (16 KB of W, 8 KB of x), 192 KB in all — up to 128 KB of weights
// in flight per SM, and the first stages' weights are requested before the PDL wait.
inline constexpr int kMatmulWideStages = 8;
// Most K splits of a tile: the portable thread-block cluster size.
inline constexpr int kMatmulWideMaxSplits = 8;

// Why the wide kernel cannot run `p` with `epilogue`, or nullptr when it can. It runs the plain
// product: an RMSNorm prologue, SwiGLU or RoPE epilogue belongs to the caller (matmul_cuda.cu runs
// them as kernels of their own around it, as for cuBLASLt). Addresses are only inspected, never
// dereferenced, so the CPU tests pass made-up pointers.
inline const char* matmul_wide_unsupported_reason(const MatmulParams& p, MatmulEpilogue epilogue) {
  const auto aligned16 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  if (p.dtype != DType::kBF16 || p.w_dtype != DType::kBF16)
    return "the wide matmul takes bf16 x, W and y only";
  if (epilogue == MatmulEpilogue::kBias && p.bias_dtype != DType::kBF16)
    return "the wide matmul takes a bf16 bias only";
  if (p.m < 1 || p.m > kMatmulWideMaxM)
    return "the wide matmul takes 1 to 64 rows of x (larger m is compute bound: use cuBLASLt)";
  if (p.norm_weight != nullptr || p.swiglu || p.qkv_rope)
    return "the wide matmul runs the plain product (the RMSNorm prologue and the SwiGLU and RoPE "
           "epilogues run as kernels of their own around it)";
  if (p.n < 1 || p.k < 1 || p.y_row_stride < p.n) return "n, k must be >= 1 and y_row_stride >= n";
  // Tensor-map dimensions and the kernel's 32-bit column offsets.
  if (p.n > (int64_t{1} << 30) || p.k > (int64_t{1} << 30))
    return "the wide matmul takes n and k below 2^30";
  if (p.k % 8 != 0)
    return "the wide matmul needs k to be a multiple of 8 (the copy engine's rows of x and W are "
           "16-byte multiples)";
  if (!aligned16(p.x) || !aligned16(p.w))
    return "the wide matmul needs x and W 16-byte aligned (the copy engine's tensor maps)";
  if (epilogue == MatmulEpilogue::kBias && p.bias == nullptr) return "bias epilogue without a bias";
  if (epilogue == MatmulEpilogue::kResidual && p.residual == nullptr)
    return "residual epilogue without a residual";
  return nullptr;
}

// Whether the kernel writes p's logit tile summaries (MatmulParams::summaries) in its epilogue:
// there one half-warp stores a token's 128 outputs of a tile, 8 a lane, so a summary tile must be
// whole lanes within a wide tile (tile_tokens 8, 16, 32, 64 or 128) and each summary tile's word
// is complete in one half-warp (a plain store, no atomics). Otherwise the caller runs the kernel
// without them and summarize_logit_tiles_cuda after it (the same words). A domain, not a refusal:
// matmul_wide_unsupported_reason does not look at them.
inline bool matmul_wide_fuses_summaries(const MatmulParams& p) {
  const int64_t t = p.summaries.tile_tokens;
  return p.summaries.words != nullptr && t >= 8 && t <= kMatmulWideTileN &&
         kMatmulWideTileN % t == 0;
}

struct MatmulWideLaunch {
  int64_t n_tiles = 0;           // ceil(n / kMatmulWideTileN)
  int64_t num_chunks = 0;        // ceil(k / kMatmulWideChunkK)
  int splits = 0;                // K splits of each tile: the cluster size (1: no cluster)
  int64_t chunks_per_split = 0;  // every split but the last has exactly this many chunks
  int64_t grid = 0;              // n_tiles · splits blocks, one tile each
};

// The launch for an m × n × k problem on `num_sms` SMs. `requested_splits` 0 chooses: as many
// splits as keep every tile's blocks within one wave of one block per SM (the tiles alone leave
// most SMs idle at decode: Llama-3-8B's o has 32 tiles), at most kMatmulWideMaxSplits and one
// chunk each; a requested count (tests, benchmark sweeps) is clamped to the same limits. The
// split count then shrinks while `max_active_clusters[s]` (clusters of s blocks the device runs
// at once, index 2..kMatmulWideMaxSplits; null: all fit) is below the tile count: a second wave of
// clusters would cost more than the splits save. chunks_per_split is ceil(chunks / splits) and the
// splits are recounted, so none is empty.
inline MatmulWideLaunch matmul_wide_launch(int64_t m, int64_t n, int64_t k, int num_sms,
                                           int requested_splits = 0,
                                           const int64_t* max_active_clusters = nullptr) {
  (void)m;  // every m runs the same 64-row tile
  MatmulWideLaunch l;
  const int64_t sms = std::max(num_sms, 1);
  l.n_tiles = (n + kMatmulWideTileN - 1) / kMatmulWideTileN;
  l.num_chunks = (k + kMatmulWideChunkK - 1) / kMatmulWideChunkK;
  int64_t splits = requested_splits > 0 ? requested_splits : std::max<int64_t>(sms / l.n_tiles, 1);
  splits = std::clamp<int64_t>(splits, 1, std::min<int64_t>(kMatmulWideMaxSplits, l.num_chunks));
  if (max_active_clusters != nullptr)
    while (splits > 1 && max_active_clusters[splits] < l.n_tiles) --splits;
  l.chunks_per_split = (l.num_chunks + splits - 1) / splits;
  l.splits = static_cast<int>((l.num_chunks + l.chunks_per_split - 1) / l.chunks_per_split);
  l.grid = l.n_tiles * l.splits;
  return l;
}

// Whether `l` is a launch the kernel can run for m × n × k: the tiles and chunks of the problem,
// every chunk in exactly one non-empty split, at most kMatmulWideMaxSplits, a grid the launch API
// takes.
inline bool matmul_wide_launch_valid(const MatmulWideLaunch& l, int64_t n, int64_t k) {
  if (l.n_tiles != (n + kMatmulWideTileN - 1) / kMatmulWideTileN) return false;
  if (l.num_chunks != (k + kMatmulWideChunkK - 1) / kMatmulWideChunkK) return false;
  if (l.splits < 1 || l.splits > kMatmulWideMaxSplits || l.chunks_per_split < 1) return false;
  if ((l.splits - 1) * l.chunks_per_split >= l.num_chunks) return false;  // an empty split
  if (l.splits * l.chunks_per_split < l.num_chunks) return false;         // chunks left over
  return l.grid == l.n_tiles * l.splits && l.grid <= (int64_t{1} << 31) - 1;
}

// The launch matmul_wide_launch plans for m × n × k on the current device (its SM count and how
// many clusters of each size it runs at once). CUDA builds only.
MatmulWideLaunch matmul_wide_cuda_launch(int64_t m, int64_t n, int64_t k, int requested_splits = 0);

// y = x · Wᵀ (+ epilogue) with `launch` (from matmul_wide_cuda_launch for p's m, n, k), and p's
// logit tile summaries where they are on (matmul_wide_fuses_summaries must hold); aborts with
// matmul_wide_unsupported_reason's message when the kernel cannot run p. Asynchronous on stream.
// CUDA builds only.
void matmul_wide_cuda(const MatmulParams& p, MatmulEpilogue epilogue,
                      const MatmulWideLaunch& launch, CudaStream stream);

#if defined(ROOFLINE_PHASE_TRACE)
// The wide kernel's phase records (phase_trace.h), in trace builds only (matmul_skinny_trace_bench
// trace wide): armed, every launch writes one record per block.
PhaseTraceRecorder& matmul_wide_phase_trace();
#endif

}  // namespace roofline
