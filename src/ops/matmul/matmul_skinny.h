// The skinny-M weight-streaming GEMM of the CUDA backend (matmul_skinny_cuda.cu): its tile
// constants, its domain (matmul_skinny_unsupported_reason) and its launch plan
// (matmul_skinny_launch: the split-K choice and the persistent grid). Everything here is a pure
// host function, tested on the CPU (matmul_skinny_test.cc) and used by both the CUDA dispatch
// (matmul_cuda.cu) and the launcher, so the "supported?" query and the launch can never disagree.
//
// Tiling (see matmul_skinny_cuda.cu): a tile is kMatmulSkinnyBlockRows weight rows (output
// columns) × one K split; a split is a run of kMatmulSkinnyChunkK-wide K chunks, and a chunk is one
// stage of the block's shared-memory ring (filled with cp.async by all threads; each of the
// kMatmulSkinnyWarps warps multiplies an eighth of its K). The grid is persistent: at most
// matmul_skinny_blocks_per_sm blocks per SM, each taking tiles blockIdx.x, + gridDim.x, ... so its
// ring streams across tile boundaries. A split count > 1 merges the splits of a column block in a
// thread-block cluster when every block has one tile and the clusters all fit at once
// (matmul_skinny_merges_in_clusters); otherwise it sends fp32 partials through the context's
// workspace, reduced by the last block of each column block to arrive.
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

// Most rows (tokens) the kernel takes: 8 mma tiles of 8 tokens. Larger m is compute bound and
// belongs to cuBLASLt.
inline constexpr int64_t kMatmulSkinnyMaxM = 64;
// Weight rows per tile: one 16-row mma tile, shared by the warps, which split each chunk's K.
// Eight warps: with four, a block streamed ~25 GB/s whatever the ring's depth (H200), below the
// 32 GB/s per SM that 4.28 TB/s needs.
inline constexpr int kMatmulSkinnyWarps = 8;
inline constexpr int64_t kMatmulSkinnyBlockRows = 16;
// K per chunk (one ring stage): 1 KB of each weight row, read as one contiguous run (64 cp.async
// of 16 bytes by consecutive threads). Measured on the H200: 256-byte runs per row (64 rows × 128
// k per stage) capped a block at ~24 GB/s whatever the ring's depth.
inline constexpr int64_t kMatmulSkinnyChunkK = 512;
// Bytes of one shared-memory row of a stage (weight rows, then token rows of x, then the RMSNorm
// prologue's weight): unpadded; odd rows swap the 64-byte halves of each 128-byte window, so the
// two rows a quarter-warp's 16-byte reads touch (g and g + 1) never share a bank.
inline constexpr int64_t kMatmulSkinnyRowBytes = kMatmulSkinnyChunkK * 2;
// Shared memory the rings of an SM may take: most of its 228 KB (the warps' reduction
// buffer, at most 32 KB, and the runtime's reserve take the rest).
inline constexpr int64_t kMatmulSkinnySmemBudget = 200 * 1024;
inline constexpr int kMatmulSkinnyMaxStages = 8;
// The deep ring (MatmulSkinnyLaunch::deep_ring): a plain launch of one token tile with at most one
// block per SM, whose blocks stream more chunks than the two-per-SM ring requests before its PDL
// wait (its stages - 1 = 3), takes a ring of this many stages, so that up to 7 chunks a block are
// requested before the wait and only x is left for after it. Qwen2.5-0.5B's down at m <= 8 (2
// splits of 5 chunks on 112 blocks) left 2 chunks a block for after the wait: the phase trace put
// that tile's stream at 3.4 us after x landed, against 0.5 us for its o and q|k|v, whose blocks'
// chunks were all requested early (bench/results/2026-12-06-skinny-deep-ring.md). 8 stages of one
// token tile are 200 KB, within one block's shared memory; a launch allocates only the stages its
// blocks fill, so the next kernel's blocks still fit beside one of 5.
inline constexpr int kMatmulSkinnyDeepStages = 8;

// Resident blocks per SM: two at 1–2 token tiles, each with half the shared memory, so that one
// block's per-stage barrier and multiplies overlap the other's copies; one at 4–8 tiles, whose
// stages are too large for two rings of two. Measured on the H200 at m = 1 (one block of 8 stages
// -> two of 4): llama3-8b qkv 73 -> 81 %, o 65 -> 84 %, gate_up 88 -> 99.9 %, down 88 -> 98 % of
// the copy ceiling; at m = 8, 53–74 % -> 73–96 %. A block alone streamed ~28 GB/s whatever its
// ring's depth. (Not the barrier per stage, as once thought: without it, each warp awaiting only
// its own slice, plain launches streamed no faster — 2026-12-01-skinny-warp-slices.md.)
//   The few-token variant (`few_tokens`: m <= kMatmulSkinnyFewTokensMaxM, see
// matmul_skinny_launch) runs three blocks per SM instead of two, its stages carrying 4 rows of x
// instead of 8.
inline constexpr int64_t kMatmulSkinnyFewTokensMaxM = 4;
// The few-token variant also runs a launch of more tiles than three blocks per SM hold when a tile
// is at most this many chunks (K <= 1024: Qwen2.5-0.5B's gate_up, 608 tiles, and its LM head).
// Such a tile is one fill of the variant's ring (its 2 stages in flight), so a block streams a
// tile, then stops for the tile's end (the block barrier, the warps' reduction, the stores) every
// two stages; a third block per SM streams through those stops. Measured on the H200
// (bench/results/2026-12-03-few-token-short-tiles.md, 16 chained calls, % of the copy ceiling at
// m = 1): 9728 × 896 65 -> 80 % (with the RMSNorm prologue and SwiGLU 58 -> 62 %), 151936 × 896
// 98 -> 102 %; the Qwen2.5-0.5B bs 1 / bs 4 decode steps -1 / -2 %. Longer tiles lose: at 3-4
// chunks the prologue variants 3-5 % (two stages in flight where the two-block ring keeps three),
// at 8 (Llama-3-8B's gate_up) every variant 1-6 %.
inline constexpr int64_t kMatmulSkinnyFewTokensShortTileChunks = 2;
constexpr int matmul_skinny_blocks_per_sm(int m_tiles, bool few_tokens = false) {
  return few_tokens ? 3 : m_tiles <= 2 ? 2 : 1;
}
// Rows of one ring stage: the 16 weight rows, the token rows of x (8·m_tiles; the few-token
// variant: kMatmulSkinnyFewTokensMaxM) and one row for the RMSNorm prologue's weight (filled only
// by a launch with the prologue).
constexpr int64_t matmul_skinny_stage_rows(int m_tiles, bool few_tokens = false) {
  return kMatmulSkinnyBlockRows + (few_tokens ? kMatmulSkinnyFewTokensMaxM : 8 * int64_t{m_tiles}) +
         1;
}
// The ring's stages for `m_tiles` token tiles, one chunk each. 4 / 3 / 4 / 2 stages for
// 1 / 2 / 4 / 8 tiles (two blocks per SM at 1–2): 96 / 64 / 48 / 16 KB of weights in flight per SM
// while one stage per block is multiplied; at 1–2 tiles that is 8–13 MB over 132 SMs, above the
// ~6 MB that 4.28 TB/s × ~1.5 µs of loaded DRAM latency needs (Little's law). The few-token
// variant: 3 stages of 21 rows in each of three blocks, the same 96 KB of weights in flight per SM.
constexpr int matmul_skinny_stages(int m_tiles, bool few_tokens = false) {
  const int64_t stages = kMatmulSkinnySmemBudget /
                         matmul_skinny_blocks_per_sm(m_tiles, few_tokens) /
                         (matmul_skinny_stage_rows(m_tiles, few_tokens) * kMatmulSkinnyRowBytes);
  return static_cast<int>(stages < kMatmulSkinnyMaxStages ? stages : kMatmulSkinnyMaxStages);
}
constexpr int64_t matmul_skinny_smem_bytes(int m_tiles, bool few_tokens = false) {
  return matmul_skinny_stages(m_tiles, few_tokens) * matmul_skinny_stage_rows(m_tiles, few_tokens) *
         kMatmulSkinnyRowBytes;
}
// What the warps meet through at the end of a tile: their fp32 accumulators [warps][16
// rows][8·m_tiles tokens], then (the prologue) their rows' partial sums of squares
// [warps][8·m_tiles tokens].
constexpr int64_t matmul_skinny_reduce_bytes(int m_tiles) {
  return kMatmulSkinnyWarps * (kMatmulSkinnyBlockRows + 1) * 8 * int64_t{m_tiles} * 4;
}
// How many of those buffers a block keeps: two for one token tile with the RMSNorm prologue, one
// otherwise. With the prologue each warp walks its own slice of the ring, so the only thing that
// holds a warp back at the end of a tile is the buffer: with one, it must wait until the epilogue
// of the tile before (one half-warp's at m <= 2) has read it. With two, tiles alternate, and a
// warp waits only at the barrier after the sums are written, as every launch does. Measured on
// the H200 (bench/results/2026-12-04-skinny-summaries-chain.md): Qwen2.5-0.5B's LM head at m = 1
// spent 13 % of its warps' stall samples at that wait, and twice that with the summaries' epilogue.
// The rings of two or more token tiles leave no room for a second buffer at their blocks per SM.
constexpr int matmul_skinny_reduce_buffers(int m_tiles, bool norm) {
  return m_tiles == 1 && norm ? 2 : 1;
}

// A split never gets fewer chunks than this (below it the partials' traffic and the reduction cost
// more than the parallelism brings).
inline constexpr int64_t kMatmulSkinnyMinChunksPerSplit = 2;
inline constexpr int kMatmulSkinnyMaxSplits = 16;
// The context's split-K workspace: fp32 partials [splits, m, n] and one arrival counter per column
// block. 16 MiB holds 16 splits of m = 64 rows of n = 4096 (more than any choice below needs at
// decode sizes); the counters cover n up to 16384 · 16 columns.
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
  if (p.swiglu && (epilogue != MatmulEpilogue::kNone || p.n % 2 != 0 || p.y_row_stride < p.n / 2))
    return "the skinny matmul's SwiGLU epilogue takes an even n (gate rows, then up rows), no bias "
           "or residual";
  if (p.n < 1 || p.k < 1 || (!p.swiglu && p.y_row_stride < p.n))
    return "n, k must be >= 1 and y_row_stride >= n";
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
  if (p.qkv_rope) {
    const char* rope = matmul_rope_unsupported_reason(p, epilogue);
    if (rope != nullptr) return rope;
    if (p.rope.head_dim % 16 != 0)
      return "the skinny matmul's RoPE epilogue takes head_dim a multiple of 16 (a tile pairs 8 "
             "dims of each half of a head)";
    if (p.rope.q_norm_weight != nullptr || p.rope.k_norm_weight != nullptr)
      return "the skinny matmul's RoPE epilogue has no q/k norm (it needs a whole head's sums)";
    if (p.rope.kv_dtype != DType::kBF16)
      return "the skinny matmul's RoPE epilogue takes a bf16 KV cache";
  }
  if (p.norm_weight != nullptr) {
    if (p.norm_weight_dtype != DType::kBF16)
      return "the skinny matmul's RMSNorm prologue takes a bf16 norm weight only";
    if (!aligned16(p.norm_weight))
      return "the skinny matmul's RMSNorm prologue needs the norm weight 16-byte aligned";
  }
  return nullptr;
}

// Whether p's launch must keep every tile's K whole: the RMSNorm prologue, the SwiGLU and the RoPE
// epilogue, and the logit tile summaries (only the unsplit epilogue writes them; an LM head's
// thousands of column blocks never split anyway).
inline bool matmul_skinny_no_split(const MatmulParams& p) {
  return p.norm_weight != nullptr || p.swiglu || p.qkv_rope || p.summaries.words != nullptr;
}

// Whether the kernel writes p's logit tile summaries (MatmulParams::summaries) in its epilogue:
// each half-warp there holds one token's 16 outputs of a column block and leaves their largest
// word with one atomicMax, so a tile must be whole column blocks (tile_tokens a multiple of 16).
// Otherwise the caller runs the kernel without them and summarize_logit_tiles_cuda after it (the
// same words). A domain, not a refusal: matmul_skinny_unsupported_reason does not look at them.
inline bool matmul_skinny_fuses_summaries(const MatmulParams& p) {
  return p.summaries.words != nullptr && p.summaries.tile_tokens % kMatmulSkinnyBlockRows == 0;
}

// The epilogue finds a column's summary tile as (column · m) >> 40 with m this, instead of a
// division in its chain: exact for every column below 2^26 (the most a row of at most
// kLogitTileMaxTiles tiles has) and tile_tokens <= 4096, since m exceeds 2^40 / tile_tokens by
// less than 1, so the quotient errs by less than 2^-14, less than the 1 / tile_tokens a true
// quotient's fraction stays below 1 by.
constexpr uint64_t matmul_skinny_tile_reciprocal(int64_t tile_tokens) {
  return ((uint64_t{1} << 40) + static_cast<uint64_t>(tile_tokens) - 1) /
         static_cast<uint64_t>(tile_tokens);
}

struct MatmulSkinnyLaunch {
  int m_tiles = 0;               // 1, 2, 4 or 8: 8-row mma tiles of x the kernel is built for
  int64_t n_blocks = 0;          // ceil(n / kMatmulSkinnyBlockRows): column blocks
  int64_t num_chunks = 0;        // ceil(k / kMatmulSkinnyChunkK)
  int splits = 0;                // K splits; > 1 goes through the workspace
  int64_t chunks_per_split = 0;  // every split but the last has exactly this many chunks
  int64_t tiles = 0;             // n_blocks · splits
  int64_t grid = 0;              // persistent blocks: min(tiles, SMs · blocks per SM)
  // Splits may merge in thread-block clusters where matmul_skinny_merges_in_clusters allows (false:
  // always through the workspace; ROOFLINE_SKINNY_CLUSTER=0 and the tests' A/B).
  bool cluster_merge = true;
  // The few-token variant (m <= 4; see matmul_skinny_launch): three blocks per SM, 4 x rows a
  // stage.
  bool few_tokens = false;
  // Stages of the ring each block allocates: the variant's matmul_skinny_stages, or fewer where
  // the launch has at most one block per SM and its blocks stream fewer chunks than that (see
  // matmul_skinny_launch).
  int ring_stages = 0;
  // The kernel's deep-ring variant (kMatmulSkinnyDeepStages stages; see there), set by
  // matmul_skinny_launch for plain launches of one token tile with at most one block per SM whose
  // blocks stream more chunks than the variant requests before its PDL wait.
  bool deep_ring = false;
  // How the RMSNorm prologue variants copy a stage (launches without the prologue ignore it): each
  // warp its own K slice, waiting only for its own copies (true), or the whole block together with
  // a barrier per stage, as the plain variants (false). Both give the same bits; the matmul
  // selection times both (MatmulSkinnyNorm) and sets it, matmul_skinny_launch leaves it true.
  bool norm_warp_slices = true;
};

// The most chunks one block of `l` streams: its tiles (blockIdx.x, + grid, ...) times a split's.
inline int64_t matmul_skinny_block_chunks(const MatmulSkinnyLaunch& l) {
  return l.grid < 1 ? 0 : (l.tiles + l.grid - 1) / l.grid * l.chunks_per_split;
}

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

// The launch for an m × n × k problem on `num_sms` SMs (`no_split`: the RMSNorm prologue, which
// needs every tile to see its rows' whole K, or the SwiGLU or RoPE epilogue, which need a tile's
// paired sums complete; none splits K). In SwiGLU mode a column block pairs 8 gate rows with the
// same 8 up rows, in RoPE mode 8 dims of a head with the 8 dims half a head later: ceil(n / 16)
// blocks all the same. `requested_splits` 0 chooses: no
// split when the column blocks alone give every SM a tile, otherwise as many splits as keep the
// tiles within one per SM (all tiles the same size, all running at once: no block waits on a second
// tile while others idle), within matmul_skinny_max_splits. A requested count (tests, benchmark
// sweeps) is clamped to the same limits. chunks_per_split is then ceil(chunks / splits) and the
// splits recounted, so none is empty (qwen2.5-0.5b's down: 2 splits of 5 chunks on 132 SMs).
//   At m <= 4 with one split, when the tiles fill more than two blocks per SM but no more than
// three (llama3-8b's q|k|v: 384 tiles on 132 SMs), the launch takes the few-token variant: three
// blocks per SM, so every tile runs in one wave — with two, 264 tiles ran first and the other 120
// after them with half the block slots idle. On the H200
// (bench/results/2026-12-01-skinny-few-tokens.md) that q|k|v at m = 1 went from 81.8 to 92.8 % of
// the copy ceiling (with the RMSNorm prologue 73.2 -> 89.3 %) and the llama3-8b bs 1 decode step
// 3.97 -> 3.89 ms. It also takes the variant beyond three tiles per SM where a tile is at most
// kMatmulSkinnyFewTokensShortTileChunks chunks (see there). `few_tokens` overrides the choice
// (tests, A/B runs).
//   The grid fills every block slot (matmul_skinny_blocks_per_sm per SM), or one block per tile
// when there are fewer tiles.
//   The ring: a block puts chunk j of its stream in stage j mod stages, so a block of fewer chunks
// than the variant's stages never touches the rest. Where the grid has at most one block per SM
// (Qwen2.5-0.5B's o and q|k|v at m <= 32: one tile of 2 chunks a block; Qwen3-0.6B's o and down)
// the launch allocates only the stages its blocks fill: half the shared memory for those two, so
// the next kernel's blocks become resident beside them and issue their weights before their PDL
// wait. Such a launch moves too few bytes to keep DRAM busy, so their early copies cost it
// nothing. Launches of more blocks than SMs keep every stage: fitting those too (Qwen3-0.6B's
// q|k|v, 256 blocks, and gate_up) let the next kernel's copies compete with a stream at the
// ceiling, and its bs 1 step got 2.3 % slower. Measured on the H200
// (bench/results/2026-12-03-skinny-ring-fit.md), graph floors: Qwen2.5-0.5B bs 1 -0.4 to -0.8 %,
// Qwen3-0.6B bs 1 -0.6 %, bs 4 -1.7 to -1.9 %; Llama-3-8B (no such launch) level.
inline MatmulSkinnyLaunch matmul_skinny_launch(
    int64_t m, int64_t n, int64_t k, int num_sms, int requested_splits = 0, bool no_split = false,
    MatmulSkinnyFewTokens few_tokens = MatmulSkinnyFewTokens::kAuto) {
  MatmulSkinnyLaunch l;
  const int64_t sms = std::max(num_sms, 1);
  l.m_tiles = matmul_skinny_m_tiles(m);
  l.n_blocks = (n + kMatmulSkinnyBlockRows - 1) / kMatmulSkinnyBlockRows;
  l.num_chunks = (k + kMatmulSkinnyChunkK - 1) / kMatmulSkinnyChunkK;
  int64_t splits = requested_splits;
  if (splits <= 0) splits = l.n_blocks >= sms ? 1 : sms / l.n_blocks;
  splits = std::clamp<int64_t>(splits, 1, no_split ? 1 : matmul_skinny_max_splits(m, n, k));
  l.chunks_per_split = (l.num_chunks + splits - 1) / splits;
  l.splits = static_cast<int>((l.num_chunks + l.chunks_per_split - 1) / l.chunks_per_split);
  l.tiles = l.n_blocks * l.splits;
  l.few_tokens = m <= kMatmulSkinnyFewTokensMaxM && l.splits == 1 &&
                 (few_tokens == MatmulSkinnyFewTokens::kOn ||
                  (few_tokens == MatmulSkinnyFewTokens::kAuto && l.tiles > 2 * sms &&
                   (l.tiles <= 3 * sms || l.num_chunks <= kMatmulSkinnyFewTokensShortTileChunks)));
  l.grid = std::min(l.tiles, sms * matmul_skinny_blocks_per_sm(l.m_tiles, l.few_tokens));
  l.ring_stages = matmul_skinny_stages(l.m_tiles, l.few_tokens);
  if (l.grid <= sms) {
    const int64_t chunks = matmul_skinny_block_chunks(l);
    l.deep_ring = !no_split && l.m_tiles == 1 && !l.few_tokens && chunks > l.ring_stages - 1;
    l.ring_stages = static_cast<int>(
        std::min<int64_t>(l.deep_ring ? kMatmulSkinnyDeepStages : l.ring_stages, chunks));
  }
  return l;
}

// Whether the kernel applies a RoPE epilogue itself with launch `l` on `num_sms` SMs, or writes the
// q|k|v product and leaves the rotation to qkv_rope_cuda: fused only where the launch leaves block
// slots free (fewer tiles than SMs × the variant's blocks per SM). A grid that fills every slot
// keeps the next kernel of a decode step (attention) from becoming resident until its own last
// tiles end, so that kernel's prologue (metadata, block-table reads) no longer overlaps anything,
// and the epilogue's rotation sits on every tile's critical path (+0.6-1.1 us a call): on the H200
// the fused Llama-3-8B qkv (384 tiles on 264 slots at m = 1) made the bs 1 step 1.5-2.5 % slower
// than the product followed by qkv_rope, while Qwen2.5-0.5B's (72 tiles) made its steps 3.5-4.3 %
// faster (bench/results/2026-12-01-qkv-rope-epilogue.md). The few-token variant's three blocks per
// SM leave Llama-3-8B's q|k|v 12 slots free, so it fuses there too: since the weight copies are
// addressed once a tile, that fused launch takes 13.3 us at m = 1 against 15.8 us for the product
// and the qkv_rope kernel, and the bs 1 step 3.77-3.80 ms against 3.81 ms
// (bench/results/2026-12-02-skinny-copy-addressing.md).
inline bool matmul_skinny_fuses_rope(const MatmulSkinnyLaunch& l, int num_sms) {
  return l.tiles <
         int64_t{std::max(num_sms, 1)} * matmul_skinny_blocks_per_sm(l.m_tiles, l.few_tokens);
}

// The most splits of one column block that merge inside a thread-block cluster (the portable
// cluster size).
inline constexpr int kMatmulSkinnyMaxClusterSplits = 8;
// The cluster merge's receive area, after the reduction buffers, in the variants that may split (no
// RMSNorm prologue, not the few-token variant): each block finishes every splits-th output of its
// column block and receives every split's sum of those, [splits][ceil(16·m / splits)] floats, at
// most 16·8·m_tiles + kMatmulSkinnyMaxClusterSplits.
constexpr int64_t matmul_skinny_cluster_recv_bytes(int m_tiles) {
  return (kMatmulSkinnyBlockRows * 8 * int64_t{m_tiles} + kMatmulSkinnyMaxClusterSplits) * 4;
}

// Whether launch `l` merges its splits inside thread-block clusters — one cluster of l.splits
// consecutive blocks per column block, each block's sums pushed to the blocks that finish them
// over distributed shared memory — instead of through the workspace (fp32 partials to L2, a fence,
// an arrival counter, the last block reading them back: three L2 round trips on the launch's
// critical path). It needs 2 to kMatmulSkinnyMaxClusterSplits splits, one tile per block (grid ==
// tiles, so the blocks of a cluster hold the splits of one column block), and every cluster
// resident at once: `max_active_clusters` is how many clusters of l.splits blocks the device runs
// together (clusters sit whole within a GPC, and a second wave of clusters costs more than the
// merge saves, as decode attention measured).
inline bool matmul_skinny_merges_in_clusters(const MatmulSkinnyLaunch& l,
                                             int64_t max_active_clusters) {
  return l.cluster_merge && l.splits >= 2 && l.splits <= kMatmulSkinnyMaxClusterSplits &&
         l.grid == l.tiles && l.n_blocks <= max_active_clusters;
}

// Whether `l` is a launch the kernel can run for m × n × k: the tiles and blocks of the problem,
// every chunk in exactly one non-empty split, a grid of 1 to `tiles` blocks, and the workspace
// limits when it splits. The launcher checks every launch with it (a planned one or a caller's).
inline bool matmul_skinny_launch_valid(const MatmulSkinnyLaunch& l, int64_t m, int64_t n,
                                       int64_t k) {
  if (l.m_tiles != matmul_skinny_m_tiles(m)) return false;
  if (l.n_blocks != (n + kMatmulSkinnyBlockRows - 1) / kMatmulSkinnyBlockRows) return false;
  if (l.num_chunks != (k + kMatmulSkinnyChunkK - 1) / kMatmulSkinnyChunkK) return false;
  if (l.splits < 1 || l.splits > kMatmulSkinnyMaxSplits || l.chunks_per_split < 1) return false;
  if ((l.splits - 1) * l.chunks_per_split >= l.num_chunks) return false;  // an empty split
  if (l.splits * l.chunks_per_split < l.num_chunks) return false;         // chunks left over
  if (l.tiles != l.n_blocks * l.splits || l.grid < 1 || l.grid > l.tiles) return false;
  if (l.few_tokens && (m > kMatmulSkinnyFewTokensMaxM || l.splits != 1)) return false;
  if (l.grid > (int64_t{1} << 31) - 1) return false;
  // The ring: within the variant's stages, and every stage a block's stream touches allocated. The
  // deep ring is the plain one-token-tile variant's only.
  if (l.deep_ring && (l.m_tiles != 1 || l.few_tokens)) return false;
  const int stages =
      l.deep_ring ? kMatmulSkinnyDeepStages : matmul_skinny_stages(l.m_tiles, l.few_tokens);
  if (l.ring_stages < 1 || l.ring_stages > stages ||
      l.ring_stages < std::min<int64_t>(stages, matmul_skinny_block_chunks(l)))
    return false;
  return l.splits == 1 || (l.n_blocks <= kMatmulSkinnyMaxCounters &&
                           l.splits * m * n * 4 <= kMatmulSkinnyPartialBytes);
}

// The workspace a context provides to the launcher: zeroed counters once, at creation; the kernel
// leaves every counter at zero when it finishes, so CUDA-graph replays need no reset.
struct MatmulSkinnyWorkspace {
  float* partials = nullptr;     // kMatmulSkinnyPartialBytes
  uint32_t* counters = nullptr;  // [kMatmulSkinnyMaxCounters]
};

// y = x · Wᵀ (+ epilogue) with `launch` (from matmul_skinny_launch for p's m, n, k, and `no_split`
// = matmul_skinny_no_split(p): such a launch must not split); aborts with
// matmul_skinny_unsupported_reason's message when the kernel cannot run p. Asynchronous on stream.
// CUDA builds only.
void matmul_skinny_cuda(const MatmulParams& p, MatmulEpilogue epilogue,
                        const MatmulSkinnyLaunch& launch, const MatmulSkinnyWorkspace& workspace,
                        CudaStream stream);

// Whether matmul_skinny_cuda merges the splits of `launch` (a plain product: no prologue or
// epilogue that forbids splits) in thread-block clusters on the current device. CUDA builds only.
bool matmul_skinny_cuda_merges_in_clusters(const MatmulSkinnyLaunch& launch);

#if defined(ROOFLINE_PHASE_TRACE)
// The skinny kernel's phase records (phase_trace.h), in trace builds only
// (matmul_skinny_trace_bench): armed, every launch writes one record per block.
PhaseTraceRecorder& matmul_skinny_phase_trace();
#endif

}  // namespace roofline
