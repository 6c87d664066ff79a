// matmul_skinny_cuda: y[m, n] = x[m, k] · W[n, k]ᵀ (+ bias[n] | + residual[m, n]) for decode's
// m <= 64 rows: a weight-streaming GEMM, bf16 in and out, fp32 accumulation on the tensor cores.
//
// Bound: it must read n·k·2 bytes of weights and does 2·m·n·k FLOPs: at m <= 64 that is <= 64
// FLOP/byte, far below the H200's ~180 FLOP/byte ridge — memory bound; the goal is the 4.28 TB/s
// copy ceiling. x (m·k·2 bytes) is re-read from L2 once per 16-row tile: m / 16 times the weight
// bytes (6 % at m = 1, 50 % at m = 8, 400 % at m = 64: why m >= 8 loses to cuBLASLt today, and
// why the selector measures).
//
// Algorithm: persistent blocks (two per SM at m <= 16, one beyond; three in the few-token variant,
// kFewTokens, whose stages carry 4 rows of x: m <= 4 where two per SM would leave a second wave of
// tiles, see matmul_skinny_launch) take tiles (16 weight rows × one K split) in turn and stream
// them through a ring of matmul_skinny_stages shared-memory stages (2–4), one 512-wide K chunk
// each: the chunk's 16 weight rows (1 KB contiguous from each) and its token rows of x,
// copied with cp.async by all 256 threads (4 of the weights' 1,024 16-byte pieces each, plus x's).
// A thread's four weight copies of a stage are the same piece of rows 4 apart, so their sources
// are worked out once a tile (WeightSource: the row maps of SwiGLU and RoPE, a RoPE tile's
// division) and a stage adds its K offset; its x copies step one pointer 4 token rows at a time.
// At the copy ceiling an SM must run ~16 warp-stages a µs, so a stage's instructions are a real
// share of what it can issue: per-copy address arithmetic cost the H200 Llama-3-8B's fused q|k|v
// + RMSNorm + RoPE at m = 1 15.2 -> 13.3 us, q|k|v at m = 8 73 -> 81 %, gate_up at m = 16 and 32
// 74 -> 92 % and 37 -> 56 % of the copy ceiling
// (bench/results/2026-12-02-skinny-copy-addressing.md). While the 8 warps multiply one stage — each
// an eighth of its K — the others are in flight (96 KB of weights per SM at m <= 8), with one block
// barrier per stage — or, in the RMSNorm prologue's variants, each warp copying and awaiting only
// its own K slice of every stage (kSlices) — and the ring runs on from one tile into the
// next without draining. Nothing in the multiply waits on global memory. Measured on the H200 and
// replaced on the way here: one 256-byte Hopper bulk copy per weight row streamed 0.8 TB/s (the
// copy engine's issue rate for copies that small); reading x from global memory at multiply time
// put an L2 round trip on every stage (1.7 TB/s); 64 rows × 256 bytes per stage capped each block
// at ~24 GB/s whatever the ring's depth (2.2–3.1 TB/s).
//   Programmatic dependent launch: weights are constants, so the weight copies of the ring's first
// stages are issued before griddepcontrol.wait, while the kernel before this one still runs; x is
// what that kernel wrote, so the first stages' x is copied after the wait, all of it in one
// commit group that the first stage waits for with the weights, and every later stage's x travels
// with its weights. (Plain loads there — one stage after another, each a round trip — kept a
// launch's first multiply ~1.1 us after the wait at m = 1 and 1.8-3.2 us at m = 8 or after a
// short wait: the phase trace, bench/results/2026-12-01-skinny-gemm-phase-trace.md.)
// y, the residual and the workspace are touched only after the wait.
//   MMA without ldmatrix: mma.sync m16n8k16 with the weight tile as A (16 weight rows × 16 k per
// warp) and x as B (16 k × 8 tokens). The sum over k does not care in which order k is enumerated
// as long as A and B agree, so we pick the order that makes both fragments plain 16-byte loads:
// lane (g = lane / 4, t = lane % 4) reads W[row g][8t, 8t + 8), W[row g + 8][8t, 8t + 8) and
// x[token g][8t, 8t + 8) of each 32-wide K step of its warp's share of the stage; PTX's logical
// columns {2t, 2t+1} / {2t+8, 2t+9} of the first MMA map to physical 8t + {0,1} / {2,3}, and the
// second MMA's to 8t + {4,5} / {6,7}. Weight rows past n and K past k are zero-filled; token rows
// past m are never written and only reach outputs that are not stored.
//   Reduction: at the end of a tile the 8 warps' accumulators meet in shared memory and are summed
// in warp order (one token tile with the RMSNorm prologue: in two buffers, tile by tile, so that a
// warp need not wait for the last tile's epilogue to be done with its buffer; see
// matmul_skinny_reduce_buffers). With one split the block then writes its 16 × m outputs. With
// several, every tile writes its fp32 partial [split][m][n] (L2-resident) to the context's
// workspace, fences, and bumps the column block's arrival counter; the last tile to arrive sums the
// partials in split order (deterministic) and writes y, then resets the counter to zero, so the
// next launch — or a CUDA-graph replay — starts clean. No second kernel, no second pass over
// memory. Where every block holds one tile and the clusters all fit
// (matmul_skinny_merges_in_clusters), the launch is a thread-block cluster per column block
// instead: every block finishes an equal share of the outputs. It stores its sum of each output
// into the owning block's shared memory over distributed shared memory and arrives on that block's
// mbarrier, waits on its own for the other splits' sums, and adds them in split order (the
// workspace path's order: the same bits) — no L2 round trip between the splits, and no cluster
// barrier on the way out (the one that publishes the mbarriers' initialisation is arrived at
// before the PDL wait).
//
//   RMSNorm prologue (p.norm_weight; kernel variant kNorm): each stage also carries the chunk's
// slice of the norm weight (one more 1 KB row, copied with the weights: a constant). A lane that
// reads its 16 bytes of x for the MMA first adds their squares to its token's running sum, then
// multiplies them by the norm weight's 16 bytes at the same k (bf16x2 multiplies) before they go
// to the tensor cores. At the end of a tile the sums meet like the accumulators (4 lanes, then 8
// warps): the tile has seen its tokens' whole K (a prologue launch never splits), so the epilogue
// scales each sum by its token's 1 / sqrt(mean(x²) + eps) before the bias or residual. No kernel
// for the norm, no pass over x of its own: the squares come from the x the MMAs read anyway.
//   SwiGLU epilogue (p.swiglu; a runtime mode: only the weight rows a tile copies and its epilogue
// change): W is [gate; up], 2I rows. Column block b's 16 rows are gate rows 8b..8b+7 and up rows
// I + 8b..I + 8b + 7, so one tile holds both sums of outputs 8b..8b+7 and stores silu(gate) · up
// directly: no [m, 2I] product in memory, no silu_mul kernel. A SwiGLU launch never splits.
//   RoPE epilogue (p.qkv_rope; a runtime mode like SwiGLU): W is the fused q|k|v projection, heads
// of D = head_dim rows. Column block b's 16 rows are dims i0..i0+7 of head h = b / (D / 16), i0 =
// 8·(b mod (D / 16)), and dims D/2 + i0..D/2 + i0 + 7 of the same head: the pairs that rotate
// together. The epilogue adds the bias, rounds each sum to bf16 as the unfused product is stored,
// rotates q and k heads with qkv_rope's arithmetic (qkv_rope_math.cuh) and stores q to its output,
// k and v into the paged cache at the token's slot (a slot < 0 or past the cache: not stored): the
// same bits as this kernel's product followed by qkv_rope_cuda, without the [m, n] product in
// memory or a kernel of its own (kernel variant kRope). A RoPE launch never splits. The caller
// fuses only where the launch leaves block slots free (matmul_skinny_fuses_rope); otherwise it runs
// the plain product and qkv_rope_cuda. Each token's position and slot reach shared memory by
// cp.async before the PDL wait, so that no thread waits for them before its first copies.
//
//   Logit tile summaries (p.summaries, the LM head; a runtime mode like SwiGLU, in the unsplit
// epilogue only: a launch with them never splits): thread o stores output (token o / 16, column
// row0 + o mod 16), so each half-warp holds one token's 16 outputs of the column block, which lie
// in one tile of the summaries (tile_tokens a multiple of 16: matmul_skinny_fuses_summaries). Each
// lane makes the 32-bit compact word of the bf16 value it stored (logit_tiles.h), one warp
// reduction per half-warp (REDUX.MAX, the other half's lanes giving 0) leaves its largest, and
// the half's first lane merges its word into the tile's with one atomicMax (a word of an older
// epoch loses to it, so the buffer is never cleared); a ballot counts the half-warp's NaN and inf,
// which the first lane adds to the token's row count with a compare-and-swap loop (rows without
// them: nothing). The column's tile comes from a multiply by a reciprocal, not a division. That
// chain is short on purpose: in a launch of short tiles (Qwen2.5-0.5B's head, K = 896: two chunks
// a tile) the other warps wait for the epilogue warp at the next tile's barrier. The former
// chain (a 32-bit division and four 64-bit shuffles) cost +8.8 us on that head at m = 1, all of
// it in that wait (bench/results/2026-12-04-skinny-summaries-chain.md). The step's epoch is read
// after the PDL wait (it may be the kernel before's to write) by cp.async into shared memory, with
// the first stages' x: no register holds it through the stream. An LM head's 8k-9.5k column
// blocks thus leave one 8-byte atomic per token and block (a quarter of y's bytes, to L2) and no
// pass over y of its own.
//
// Numerics: products of bf16 values are exact in fp32; sums in fp32 (tensor-core order within an
// MMA, K order within a tile — at 1-2 token tiles in two interleaved chains of 16 K, added at the
// tile's end — split order across tiles); bias or residual added in fp32; one
// rounding to bf16. The prologue rounds x · norm_weight to bf16 once (the unfused norm rounds
// x / rms · norm_weight once) and applies 1 / rms in fp32 to the sum.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/check.h"
#include "core/cuda_check.h"
#include "ops/common/cuda_async.cuh"
#include "ops/common/cuda_barrier.cuh"
#include "ops/common/cuda_launch.cuh"
#include "ops/common/cuda_mma.cuh"
#include "ops/common/cuda_phase_trace.cuh"
#include "ops/common/env_switch.h"
#include "ops/matmul/matmul_skinny.h"
#include "ops/qkv_rope/qkv_rope_math.cuh"

namespace roofline {

namespace {

constexpr int kWarps = kMatmulSkinnyWarps;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = static_cast<int>(kMatmulSkinnyBlockRows);
constexpr int kChunkK = static_cast<int>(kMatmulSkinnyChunkK);
constexpr int kRowBytes = static_cast<int>(kMatmulSkinnyRowBytes);
constexpr int kPiecesPerRow = kChunkK * 2 / 16;                  // 16-byte pieces of a stage row
constexpr int kWeightCopies = kRows * kPiecesPerRow / kThreads;  // per thread per stage
constexpr int kWarpK = kChunkK / kWarps;                         // each warp's share of a chunk's K
constexpr int kWarpPieces = kWarpK / 8;                          // its 16-byte pieces of a row

static_assert(kWarpK % 32 == 0, "the warps step through their K 32 at a time");
static_assert(kRows == 16, "one 16-row mma tile per tile");
static_assert(kRows * kPiecesPerRow % kThreads == 0, "every thread copies the same count");
static_assert(kRowBytes % 128 == 0, "rows start at the same bank; the swizzle separates them");

// Byte offset of 16-byte piece p of stage row r: odd rows swap the 64-byte halves of each 128-byte
// window (p ^ 4), so rows g and g + 1 of a quarter-warp's reads (pieces 4j..4j+3) never collide.
__device__ __forceinline__ int piece_offset(int r, int p) {
  return r * kRowBytes + ((p ^ ((r & 1) << 2)) << 4);
}

struct SkinnyArgs {
  const __nv_bfloat16* x;       // [m, k]
  const __nv_bfloat16* norm_w;  // [k]: the RMSNorm prologue's weight (kNorm launches only)
  float norm_eps;
  int swiglu_half;                // the SwiGLU epilogue: I (= n / 2, the gate rows); 0: off
  const __nv_bfloat16* w;         // [n, k]
  const __nv_bfloat16* bias;      // [n] or null
  const __nv_bfloat16* residual;  // [m, n] row stride y_row_stride, or null; may equal y
  __nv_bfloat16* y;               // [m, n] row stride y_row_stride
  float* partials;                // [splits, m, n] when splits > 1
  uint32_t* counters;             // [n_blocks] when splits > 1, zero between launches
  int m;
  int n;
  int k;
  int64_t y_row_stride;
  int splits;
  int chunks_per_split;
  int num_chunks;
  int tiles;
  // The ring's stages this launch allocates (MatmulSkinnyLaunch::ring_stages: at most the
  // variant's, and every stage a block's stream touches); the reduction buffers follow them.
  int ring_stages;
  // Whether tiles alternate between the variant's two reduction buffers (it has two:
  // matmul_skinny_reduce_buffers; ROOFLINE_SKINNY_SECOND_BUFFER=0 uses only the first, for A/B).
  bool two_reduce_buffers;
  // The RoPE epilogue (rope_head_dim > 0): y is not written; q goes to q_out [m, rope_heads · D],
  // k and v to the caches [slots, rope_kv_heads, D] at slot_mapping[token].
  int rope_head_dim;
  int rope_heads;
  int rope_kv_heads;
  __nv_bfloat16* q_out;
  __nv_bfloat16* k_cache;
  __nv_bfloat16* v_cache;
  const int32_t* positions;     // [m]
  const int64_t* slot_mapping;  // [m]
  const float* inv_freq;        // [D / 2]
  int64_t num_slots;
  // The launch is one thread-block cluster of `splits` blocks per column block, which merge over
  // distributed shared memory (matmul_skinny_merges_in_clusters).
  bool cluster_merge;
  // The logit tile summaries of y (summary_words set; unsplit launches only): per token, the words
  // of its summary_tiles tiles of summary_tile_tokens columns (a multiple of 16) and its
  // non-finite count, in epoch *summary_epoch (logit_tiles.h).
  unsigned long long* summary_words;      // [m, summary_tiles]
  unsigned long long* summary_nonfinite;  // [m]
  const uint32_t* summary_epoch;
  int summary_tile_tokens;
  int summary_tiles;
  // A column's tile is (column · summary_tile_magic) >> 40 (matmul_skinny_tile_reciprocal): exact
  // for every column below 2^26 and tile_tokens <= 4096, and no division in the epilogue's chain.
  uint64_t summary_tile_magic;
#if defined(ROOFLINE_PHASE_TRACE)
  uint64_t* trace;  // the launch's phase records, or nullptr
#endif
};

// The phase marks of a trace build (matmul_skinny_trace_bench; phase_trace.h), in order.
enum SkinnyMark : int {
  kMarkIssued = 1,   // the weights of the ring's first stages issued (before the PDL wait)
  kMarkWait,         // past the PDL wait
  kMarkTokens,       // the first stages' x copies issued (past the wait)
  kMarkFirstStage,   // the first stage landed (past the loop's first barrier or warp wait)
  kMarkFirstStream,  // the first tile's stages multiplied
  kMarkFirstTile,    // the first tile's epilogue done
  kMarkLastStream,   // the last tile's stages multiplied (blocks of more than one tile)
  kMarkDone,         // the last tile's epilogue done
};

// A block's walk over its chunks: tiles blockIdx.x, + gridDim.x, ..., each a column block and a
// split, each split a run of chunks. The loads and the multiplies walk it in the same order, the
// loads kStages - 1 chunks ahead.
struct Cursor {
  int tile;
  int col_block;
  int split;
  int chunk;
  int chunk_end;

  __device__ void start(const SkinnyArgs& a, int t) {
    tile = t;
    if (t >= a.tiles) return;
    col_block = t / a.splits;
    split = t % a.splits;
    chunk = split * a.chunks_per_split;
    chunk_end = min(chunk + a.chunks_per_split, a.num_chunks);
  }
  __device__ bool valid(const SkinnyArgs& a) const { return tile < a.tiles; }
  // Next chunk; true when it starts a new tile (or ends the walk).
  __device__ bool advance(const SkinnyArgs& a) {
    if (++chunk < chunk_end) return false;
    start(a, tile + static_cast<int>(gridDim.x));
    return true;
  }
};

// The first weight row of a RoPE column block b: dims i0.. of head b / (D / 16), i0 = 8·(b mod
// (D / 16)); its rows 8-15 are D/2 further (see the header).
__device__ __forceinline__ int rope_first_row(const SkinnyArgs& a, int b) {
  const int blocks_per_head = a.rope_head_dim / 16;
  return b / blocks_per_head * a.rope_head_dim + b % blocks_per_head * 8;
}

// A thread's copies of a stage's 16 weight rows: copy j takes stage row r0 + 4j and the same
// 16-byte piece p of each (kWarpSlices: each warp its own K slice of the rows, 4 rows × 128 bytes
// per instruction; otherwise consecutive threads copy consecutive pieces of the stage, 512
// contiguous bytes per instruction; see kSlices).
constexpr int kRowsPerCopy = kThreads / kPiecesPerRow;
static_assert(kRowsPerCopy == 32 / kWarpPieces && kRowsPerCopy * kWeightCopies == kRows,
              "both copy layouts step 4 stage rows a copy");
static_assert(kWeightCopies == 4 && kRows == 16, "copies 0-1 take rows 0-7, copies 2-3 rows 8-15");

template <bool kWarpSlices>
__device__ __forceinline__ int copy_row0() {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  return kWarpSlices ? lane / kWarpPieces : static_cast<int>(threadIdx.x) / kPiecesPerRow;
}
template <bool kWarpSlices>
__device__ __forceinline__ int copy_piece() {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  return kWarpSlices ? static_cast<int>(threadIdx.x) / 32 * kWarpPieces + lane % kWarpPieces
                     : static_cast<int>(threadIdx.x) % kPiecesPerRow;
}

// Where this thread's weight copies of one tile read, worked out once a tile (the division of a
// RoPE column block, the SwiGLU and RoPE row maps) so that a stage's copies cost a few adds each:
// a stage's rows 0-7 are weight rows lo_row.. and its rows 8-15 hi_row.. (plain: row0 + 8; SwiGLU:
// the up rows I + 8b..; RoPE: D/2 further in the head), of which the first lo_valid / hi_valid
// are outputs that exist.
struct WeightSource {
  const __nv_bfloat16* lo;  // row lo_row + r0 at this thread's piece
  const __nv_bfloat16* hi;  // row hi_row + r0 at this thread's piece
  int lo_valid;
  int hi_valid;

  template <bool kRope, bool kWarpSlices>
  __device__ __forceinline__ void start(const SkinnyArgs& a, int col_block) {
    int lo_row, hi_row;
    if (kRope || !a.swiglu_half) {  // stage row r is output col_block·16 + r
      const int out0 = col_block * kRows;
      lo_row = kRope ? rope_first_row(a, col_block) : out0;
      hi_row = lo_row + (kRope ? a.rope_head_dim / 2 : 8);
      lo_valid = a.n - out0;
      hi_valid = a.n - out0 - 8;
    } else {  // SwiGLU: stage rows r and r + 8 are gate and up of output col_block·8 + r
      lo_row = col_block * 8;
      hi_row = a.swiglu_half + lo_row;
      lo_valid = hi_valid = a.swiglu_half - lo_row;
    }
    const int64_t at =
        static_cast<int64_t>(copy_row0<kWarpSlices>()) * a.k + copy_piece<kWarpSlices>() * 8;
    lo = a.w + static_cast<int64_t>(lo_row) * a.k + at;
    hi = a.w + static_cast<int64_t>(hi_row) * a.k + at;
  }
};

// This thread's cp.async of chunk `chunk`'s weight rows into `stage` (see WeightSource). Rows past
// the outputs and K past k are zero-filled.
template <bool kWarpSlices>
__device__ __forceinline__ void load_weights(const SkinnyArgs& a, const WeightSource& src,
                                             int chunk, uint8_t* stage) {
  const int r0 = copy_row0<kWarpSlices>();
  const int p = copy_piece<kWarpSlices>();
  const int64_t k0 = static_cast<int64_t>(chunk) * kChunkK;
  const bool k_valid = k0 + p * 8 < a.k;
  // piece_offset(r0 + 4j, p): the swizzle depends on the row's parity, which 4j keeps.
  const int dst0 = piece_offset(r0, p);
  const int64_t four_rows = static_cast<int64_t>(kRowsPerCopy) * a.k;
#pragma unroll
  for (int j = 0; j < kWeightCopies; ++j) {
    const bool upper = j >= 2;                   // stage rows 8-15
    const int r7 = r0 + kRowsPerCopy * (j & 1);  // the row within its half
    const bool valid = k_valid && r7 < (upper ? src.hi_valid : src.lo_valid);
    const __nv_bfloat16* from = (upper ? src.hi : src.lo) + (j & 1 ? four_rows : 0) + k0;
    cuda::cp_async_16(stage + dst0 + j * kRowsPerCopy * kRowBytes, valid ? from : a.w, valid);
  }
}

// The chunk's slice of the RMSNorm prologue's weight into stage row `row`: one 16-byte piece each
// for the first kPiecesPerRow threads (kWarpSlices: for the first kWarpPieces lanes of each warp,
// its own slice); K past k is zero-filled.
template <bool kWarpSlices>
__device__ __forceinline__ void load_norm_weight(const SkinnyArgs& a, const Cursor& c,
                                                 uint8_t* stage, int row) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (kWarpSlices ? lane >= kWarpPieces : threadIdx.x >= kPiecesPerRow) return;
  const int p = kWarpSlices ? static_cast<int>(threadIdx.x) / 32 * kWarpPieces + lane
                            : static_cast<int>(threadIdx.x);
  const int64_t kk = static_cast<int64_t>(c.chunk) * kChunkK + p * 8;
  const bool valid = kk < a.k;
  cuda::cp_async_16(stage + piece_offset(row, p), valid ? a.norm_w + kk : a.norm_w, valid);
}

// Where this thread's copies of x read, worked out once, before the PDL wait (x itself is read
// only after it): its first token row t0 = copy_row0 at its piece p = copy_piece of the weight
// copies, for the tokens that exist (t0, t0 + 4, ... < m), at chunk 0. A stage's copies then cost
// an add and a compare each, with no parameter read and no division (the tile cursor's) after the
// wait. Working each stage's addresses out from the parameters there, the first stages' x copies
// of Qwen2.5-0.5B's o took 0.45 us to issue after the wait on an H100; this way 0.31 us
// (bench/results/2026-12-06-param-lines.md). A stage holds kTokenRows rows of x (m <= kTokenRows),
// so a thread copies at most kTokenRows / kRowsPerCopy of them: that many predicated copies,
// unrolled, instead of a loop over m (whose unrolled body and remainder were most of the 0.31 us;
// 0.21 us so: bench/results/2026-12-06-x-copies.md).
template <bool kWarpSlices, int kTokenRows>
struct TokenSource {
  static_assert(kTokenRows % kRowsPerCopy == 0, "a stage's x rows are whole copies");
  static constexpr int kCopies = kTokenRows / kRowsPerCopy;
  // Up to 2 token tiles; at 4 and 8 (one first stage, 8 or 16 copies) the loop is shorter code.
  static constexpr int kMaxUnrolledCopies = 4;
  const __nv_bfloat16* from;  // x[t0][p · 8]
  int k_left;                 // k - p · 8: chunk c's piece exists when c · kChunkK < k_left
  int m;
  int64_t four_rows;  // kRowsPerCopy rows of x, in elements
  int to;             // the piece's offset in a stage

  __device__ __forceinline__ void start(const SkinnyArgs& a) {
    const int t0 = copy_row0<kWarpSlices>();
    const int p = copy_piece<kWarpSlices>();
    from = a.x + static_cast<int64_t>(t0) * a.k + p * 8;
    k_left = a.k - p * 8;
    m = a.m;
    four_rows = static_cast<int64_t>(kRowsPerCopy) * a.k;
    to = kRows * kRowBytes + piece_offset(t0, p);  // parity kept by 4 rows
  }

  // This thread's cp.async of chunk `chunk`'s token rows into the stage's x rows (after its kRows
  // weight rows; kWarpSlices: the warp's own K slice of them). K past k is zero-filled; tokens
  // past m are not written.
  __device__ __forceinline__ void load(int chunk, uint8_t* stage) const {
    const int kk = chunk * kChunkK;
    const bool valid = kk < k_left;
    const __nv_bfloat16* src = valid ? from + kk : from;
    const int t0 = copy_row0<kWarpSlices>();
    if constexpr (kCopies <= kMaxUnrolledCopies) {
#pragma unroll
      for (int j = 0; j < kCopies; ++j)
        if (t0 + j * kRowsPerCopy < m)
          cuda::cp_async_16(stage + to + j * kRowsPerCopy * kRowBytes, src + j * four_rows, valid);
    } else {
      uint8_t* dst = stage + to;
      for (int t = t0; t < m; t += kRowsPerCopy, src += four_rows, dst += kRowsPerCopy * kRowBytes)
        cuda::cp_async_16(dst, src, valid);
    }
  }
};

// The logit tile summaries of one or two tokens' 16 outputs of a column block (see the header):
// lane l of this warp holds output (token `token`, column col0 + l mod 16), `valid` (the token is
// one of y's and the column < n) and `stored`, the value it stored. Each half-warp is one token's
// piece of one tile: the two pieces' compact words (logit_tiles.h) are each one warp reduction
// (the other half's lanes give 0), and lanes 0 and 16 merge theirs into the tile's word with one
// atomicMax. The whole warp calls it (the reductions and the ballot name every lane).
__device__ __forceinline__ void summarize_outputs(const SkinnyArgs& a, uint32_t epoch, int token,
                                                  int col0, bool valid, float stored) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int tile = static_cast<int>((static_cast<uint64_t>(col0) * a.summary_tile_magic) >> 40);
  const int index = col0 - tile * a.summary_tile_tokens + lane % 16;
  const uint32_t compact =
      valid ? logit_tile::compact_bf16_word(__bfloat16_as_ushort(__float2bfloat16(stored)),
                                            index)  // exact: stored is bf16
            : 0u;
  const uint32_t low = __reduce_max_sync(0xffffffffu, lane < 16 ? compact : 0u);
  const uint32_t high = __reduce_max_sync(0xffffffffu, lane < 16 ? 0u : compact);
  const unsigned nonfinite = __ballot_sync(0xffffffffu, valid && !sampling::is_finite(stored));
  // Lane 0 or 16 is valid when its token is y's (its column col0 < n: the column block exists).
  if (lane % 16 != 0 || !valid) return;
  const int64_t at = static_cast<int64_t>(token) * a.summary_tiles + tile;
  atomicMax(a.summary_words + at, logit_tile::word_of_compact(epoch, lane == 0 ? low : high));
  const unsigned mine = nonfinite & (0xffffu << lane);
  if (mine != 0) logit_tile::add_nonfinite(a.summary_nonfinite + token, epoch, __popc(mine));
}

// The sum of the squares of 8 bf16 values, in fp32.
__device__ __forceinline__ float sum_of_squares(const uint4& v) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&words[i]));
    s = fmaf(f.x, f.x, s);
    s = fmaf(f.y, f.y, s);
  }
  return s;
}

// 8 bf16 values times 8 others, element by element, each product rounded to bf16.
__device__ __forceinline__ uint4 scale_bf16x8(const uint4& v, const uint4& w) {
  const auto mul = [](uint32_t a, uint32_t b) {
    const __nv_bfloat162 r = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&a),
                                     *reinterpret_cast<const __nv_bfloat162*>(&b));
    return *reinterpret_cast<const uint32_t*>(&r);
  };
  return make_uint4(mul(v.x, w.x), mul(v.y, w.y), mul(v.z, w.z), mul(v.w, w.w));
}

// The ring's stages per token tiles, as a constant device code may use (kDeep: the deep ring of a
// launch with one block per SM, MatmulSkinnyLaunch::deep_ring).
template <int kMTiles, bool kFewTokens, bool kDeep = false>
constexpr int kStagesFor = kDeep ? kMatmulSkinnyDeepStages
                                 : matmul_skinny_stages(kMTiles, kFewTokens);

// The two copy layouts (kSlices, a template argument of the kernel): with warp slices each warp
// copies its own K slice of every stage (weights, x, the norm weight: all it multiplies) and waits
// only for its own copies, with one block barrier per tile instead of one per stage; with block
// copies consecutive threads copy consecutive pieces (512 contiguous bytes per instruction) and a
// barrier per stage makes each stage the block's. The plain variants always copy as a block: there
// slicing lost up to 2 points and made Qwen2.5-0.5B's bs 1 step ~2 % slower. The RMSNorm prologue
// variants (whose warps also sum squares and scale x on the way to the tensor cores) run either,
// as MatmulSkinnyLaunch::norm_warp_slices says, and the matmul selection times both: slices won on
// the H200 when they came (bench/results/2026-12-01-skinny-warp-slices.md: Llama-3-8B's gate_up
// with prologue and SwiGLU at m = 8 83 -> 86 % of the copy ceiling, its q|k|v 61 -> 67 %), while
// on an H100 with today's kernel block copies are faster at m = 1 on every shape measured
// (Qwen2.5-0.5B's LM head 92.8 -> 89.9 us, its gate_up 6.7 -> 6.4 us) and at m = 8 on Llama-3-8B's
// (gate_up 79.9 -> 77.5 us) but not on Qwen2.5-0.5B's gate_up (8.0 -> 8.3 us)
// (bench/results/2026-12-05-norm-copies.md).

// kMTiles: 8-token mma tiles of x (1, 2, 4, 8: m rounded up to 8 · a power of two); kNorm: the
// RMSNorm prologue; kRope: the RoPE epilogue (a variant of its own, so that the others compile as
// they did before it existed); kFewTokens: m <= kMatmulSkinnyFewTokensMaxM (kMTiles 1), three
// blocks per SM, and a stage holds 4 rows of x: lane group g reads row g mod 4 as its mma column's
// token (columns 4-7 repeat tokens 0-3, rows past m hold stale shared memory; neither is stored);
// kSlices: warp slices rather than block copies (kNorm only, see above). The two layouts multiply
// the same products in the same order: the same bits. kDeep: the deep ring (kMatmulSkinnyDeepStages
// stages, one block per SM; plain one-token-tile launches only, MatmulSkinnyLaunch::deep_ring), so
// that a block's whole stream of up to kMatmulSkinnyDeepStages - 1 chunks is requested before the
// PDL wait; the same products in the same order as the shallow ring.
template <int kMTiles, bool kNorm, bool kRope, bool kFewTokens, bool kSlices, bool kDeep = false>
__global__ void __launch_bounds__(kThreads,
                                  kDeep ? 1 : matmul_skinny_blocks_per_sm(kMTiles, kFewTokens))
    matmul_skinny_kernel(const __grid_constant__ SkinnyArgs a) {
  static_assert(!kFewTokens || kMTiles == 1, "the few-token variant has one token tile");
  static_assert(!kDeep || (kMTiles == 1 && !kNorm && !kRope && !kFewTokens),
                "the deep ring is the plain one-token-tile variant's");
  constexpr int kStages = kStagesFor<kMTiles, kFewTokens, kDeep>;
  constexpr int kTokens = 8 * kMTiles;
  constexpr int kTokenRows =  // x's rows in a stage
      kFewTokens ? static_cast<int>(kMatmulSkinnyFewTokensMaxM) : kTokens;
  constexpr int kStageBytes =
      static_cast<int>(matmul_skinny_stage_rows(kMTiles, kFewTokens)) * kRowBytes;
  constexpr int kNormRow = kRows + kTokenRows;
  static_assert(kStages >= 2, "the ring needs two stages");
  extern __shared__ __align__(128) uint8_t ring[];
  // The warps' accumulators at the end of a tile, after the ring's allocated stages (a block uses
  // no others): [warp][row][token]; then their tokens' sums of squares (kNorm): [warp][token].
  float* const reds = reinterpret_cast<float*>(ring + a.ring_stages * kStageBytes);
  constexpr int kRedBuffers = kSlices ? matmul_skinny_reduce_buffers(kMTiles, kNorm) : 1;
  constexpr int kRedFloats = static_cast<int>(matmul_skinny_reduce_bytes(kMTiles) / 4);
  static_assert(kRedBuffers == 1 || kSlices, "a second buffer serves warps that walk slices");
  // The variants whose launches may split, and so merge in clusters (a prologue, RoPE or
  // few-token launch never splits).
  constexpr bool kMaySplit = !kNorm && !kRope && !kFewTokens;
  // The cluster merge's receive area after the reduction buffers ([split][ceil(16·m / splits)]),
  // and the mbarrier on which the cluster's other blocks arrive once their sums are in it.
  float* const recv = reds + kRedBuffers * kRedFloats;
  __shared__ uint64_t s_merge_bar;
  __shared__ bool is_last;

  cuda::PhaseTrace trace(cuda::phase_trace_records(a));
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;

  // The weights of the ring's first kStages - 1 stages, before the PDL wait: one commit group per
  // stage. (Asking L2 for the rest of the first tile here as well, by bulk prefetch, made every
  // decode step slower on the H200: bench/results/2026-12-01-l2-prefetch-and-key-patch.md.)
  Cursor load;
  load.start(a, static_cast<int>(blockIdx.x));
  const Cursor first = load;
  WeightSource source;  // the loads' tile
  if (load.valid(a)) source.start<kRope, kSlices>(a, load.col_block);
  TokenSource<kSlices, kTokenRows> tokens;
  tokens.start(a);
  // The chunks of the ring's first stages (-1: none), for their x copies after the wait.
  int first_chunks[kStages - 1];
  // A clustered launch: this block's merge barrier expects the cluster's other splits, and a
  // relaxed cluster barrier arrival publishes its initialisation (fence.mbarrier_init orders it)
  // and that the block has started, as distributed shared memory requires, long before any block
  // stores into another's (the epilogue waits on that barrier). First, before any copy: a releasing
  // arrival after the ring's weight copies waited for them to land, 1.5 us on Qwen2.5-0.5B's down.
  if (kMaySplit && a.cluster_merge) {  // launch-uniform
    if (threadIdx.x == 0) {
      cuda::mbarrier_init(&s_merge_bar, static_cast<unsigned>(a.splits - 1));
      cuda::fence_mbarrier_init_cluster();
    }
    cuda::cluster_arrive_relaxed();
  }
  // The RoPE epilogue's step inputs, each token's position and slot, in shared memory for every
  // tile's epilogue: uploaded by the host, not written by the kernel before, so copied before the
  // PDL wait, in the first stage's commit group (landed, and visible to the block after the
  // barrier that opens each tile's epilogue). By cp.async: a plain load stored to shared memory
  // held its thread — warp 0, whose copies the first stage waits for — until the load returned.
  __shared__ int s_position[kRope ? kMatmulSkinnyMaxM : 1];
  __shared__ int64_t s_slot[kRope ? kMatmulSkinnyMaxM : 1];
  // The logit tile summaries' epoch (see the header), copied after the PDL wait.
  __shared__ uint32_t s_epoch;
  if (kRope && static_cast<int>(threadIdx.x) < a.m) {
    cuda::cp_async_small<4>(&s_position[threadIdx.x], a.positions + threadIdx.x);
    cuda::cp_async_small<8>(&s_slot[threadIdx.x], a.slot_mapping + threadIdx.x);
  }
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    first_chunks[s] = load.valid(a) ? load.chunk : -1;
    if (load.valid(a)) {
      load_weights<kSlices>(a, source, load.chunk, ring + s * kStageBytes);
      if constexpr (kNorm) load_norm_weight<kSlices>(a, load, ring + s * kStageBytes, kNormRow);
      if (load.advance(a) && load.valid(a)) source.start<kRope, kSlices>(a, load.col_block);
    }
    cuda::cp_async_commit();
  }
  trace.mark(kMarkIssued);
  // x, y, the residual and the workspace may belong to the kernel before this one. Every line of
  // the parameters is cached by then (the summaries' and the cluster merge's were read first after
  // the wait).
  cuda::touch_params(a);
  cuda::pdl_wait();
  trace.mark(kMarkWait);
  cuda::pdl_launch_dependents();
  {
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s)
      if (first_chunks[s] >= 0) tokens.load(first_chunks[s], ring + s * kStageBytes);
    // Landed with the first stage (thread 0 waits for all its groups there), visible to the block
    // after the barrier that opens each tile's epilogue.
    if (a.summary_words != nullptr && threadIdx.x == 0)
      cuda::cp_async_small<4>(&s_epoch, a.summary_epoch);
    cuda::cp_async_commit();
  }
  trace.mark(kMarkTokens);

  // This lane's 16 bytes of a 32-wide K step of the warp's share in weight rows g and g + 8
  // (same parity, same swizzle) and in token row g of each token tile.
  const auto piece_of = [&](int k32) { return (warp * kWarpK + k32) / 8 + t; };
  const auto w_at = [&](int k32) { return piece_offset(g, piece_of(k32)); };
  const auto x_at = [&](int mt, int k32) {
    return kRows * kRowBytes +
           piece_offset(kFewTokens ? g % kTokenRows : mt * 8 + g, piece_of(k32));
  };
  const auto norm_at = [&](int k32) { return piece_offset(kNormRow, piece_of(k32)); };

  Cursor c = first;
  int i = 0;
  int tiles_begun = 0;
  while (c.valid(a)) {
    if (++tiles_begun == 2) trace.mark(kMarkFirstTile);
    const bool first_tile = tiles_begun == 1;
    // Two accumulator chains per token tile where registers allow (1-2 tiles): the MMAs of each
    // k32 step's first and second 16 K go to acc and acc2, summed once after the tile's stream,
    // so a warp's chain of dependent MMAs is half as long (a tile of 2 chunks was 8 in a row).
    constexpr bool kTwoChains = kMTiles <= 2;
    float acc[kMTiles][4];
    float acc2[kTwoChains ? kMTiles : 1][4];
    float squares[kMTiles];  // kNorm: this lane's share of token mt·8 + g's sum of x²
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      squares[mt] = 0.0f;
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][e] = 0.0f;
    }
#pragma unroll
    for (int mt = 0; mt < (kTwoChains ? kMTiles : 1); ++mt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc2[mt][e] = 0.0f;
    const int col_block = c.col_block;
    const int split = c.split;
    // The RoPE epilogue's constants for this thread's pair (threadIdx.x mod 8) of the tile: its
    // frequency and bias, loaded now so that their latency hides under the tile's stream.
    // Its weight row (rope_first_row + pair) is dim rope_row % D of head rope_row / D.
    float rope_freq = 0.0f, rope_bias1 = 0.0f, rope_bias2 = 0.0f;
    int rope_row = 0;
    if constexpr (kRope) {
      rope_row = rope_first_row(a, col_block) + static_cast<int>(threadIdx.x % 8);
      rope_freq = a.inv_freq[rope_row % a.rope_head_dim];
      if (a.bias) {
        rope_bias1 = __bfloat162float(a.bias[rope_row]);
        rope_bias2 = __bfloat162float(a.bias[rope_row + a.rope_head_dim / 2]);
      }
    }
    // The plain epilogue's bias and residual for this thread's first output of the tile (the one
    // it finishes in an unsplit or clustered launch; see below), read now so that their L2 round
    // trip hides under the tile's stream instead of following its sums. (x and the residual may
    // be the kernel before's; the wait above covers them. y may be the residual: no output of this
    // tile is written before its epilogue.)
    const int first_out = a.splits == 1     ? static_cast<int>(threadIdx.x)
                          : a.cluster_merge ? static_cast<int>(threadIdx.x) * a.splits + split
                                            : -1;
    float first_bias = 0.0f, first_residual = 0.0f;
    if (!kRope && !a.swiglu_half && first_out >= 0 && first_out < a.m * kRows &&
        col_block * kRows + first_out % kRows < a.n) {
      const int col = col_block * kRows + first_out % kRows;
      if (a.bias) first_bias = __bfloat162float(a.bias[col]);
      if (a.residual)
        first_residual = __bfloat162float(
            a.residual[static_cast<int64_t>(first_out / kRows) * a.y_row_stride + col]);
    }
    bool tile_done = false;
    while (!tile_done) {
      // Stage i has landed for this thread (the first stage: every group so far, the first
      // stages' weights and then all their x); the barrier makes it everyone's, and frees the
      // slot of stage i - 1 (every warp is past it) for the load kStages - 1 chunks ahead.
      if (i == 0) {
        cuda::cp_async_wait<0>();
      } else {
        cuda::cp_async_wait<kStages - 2>();
      }
      if constexpr (kSlices) {
        __syncwarp();  // the warp's own slice of the stage
      } else {
        __syncthreads();
      }
      if (i == 0) trace.mark(kMarkFirstStage);
      if (load.valid(a)) {
        uint8_t* slot = ring + ((i + kStages - 1) % kStages) * kStageBytes;
        load_weights<kSlices>(a, source, load.chunk, slot);
        if constexpr (kNorm) load_norm_weight<kSlices>(a, load, slot, kNormRow);
        tokens.load(load.chunk, slot);
        if (load.advance(a) && load.valid(a)) source.start<kRope, kSlices>(a, load.col_block);
      }
      cuda::cp_async_commit();

      const uint8_t* stage = ring + (i % kStages) * kStageBytes;
#pragma unroll
      for (int k32 = 0; k32 < kWarpK; k32 += 32) {
        const uint4 lo = *reinterpret_cast<const uint4*>(stage + w_at(k32));                  // g
        const uint4 hi = *reinterpret_cast<const uint4*>(stage + w_at(k32) + 8 * kRowBytes);  // +8
        const uint32_t a0[4] = {lo.x, hi.x, lo.y, hi.y};
        const uint32_t a1[4] = {lo.z, hi.z, lo.w, hi.w};
        uint4 nv = make_uint4(0, 0, 0, 0);
        if constexpr (kNorm) nv = *reinterpret_cast<const uint4*>(stage + norm_at(k32));
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          uint4 xv = *reinterpret_cast<const uint4*>(stage + x_at(mt, k32));
          if constexpr (kNorm) {
            squares[mt] += sum_of_squares(xv);
            xv = scale_bf16x8(xv, nv);
          }
          cuda::mma_bf16(acc[mt], a0, xv.x, xv.y);
          if constexpr (kTwoChains) {
            cuda::mma_bf16(acc2[mt], a1, xv.z, xv.w);
          } else {
            cuda::mma_bf16(acc[mt], a1, xv.z, xv.w);
          }
        }
      }
      ++i;
      tile_done = c.advance(a) || !c.valid(a);
    }
    if constexpr (kTwoChains) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][e] += acc2[mt][e];
    }
    if (first_tile) {
      trace.mark(kMarkFirstStream);
    } else {
      trace.mark(kMarkLastStream);
    }

    // C fragment: acc[mt][e] is (weight row g + 8·(e / 2), token mt·8 + 2t + e % 2). The warps'
    // sums meet in shared memory; thread o then owns output (token o / 16, row o % 16), so
    // consecutive threads store consecutive columns. With warp slices and no barrier per stage, a
    // warp may get here while another still reads the last tile's sums in its epilogue: with one
    // buffer it waits here for that; with two (matmul_skinny_reduce_buffers) the tiles alternate,
    // and the barrier below, which every thread reaches only after its part of the last epilogue,
    // keeps a warp from writing this buffer again before the epilogue that reads it is done.
    // (Launches with the prologue never split: the split and cluster paths below see buffer 0.)
    const bool two_buffers = kRedBuffers == 2 && a.two_reduce_buffers;  // launch-uniform
    float* const red = reds + (two_buffers ? (tiles_begun & 1) * kRedFloats : 0);
    float* const red_squares = red + kWarps * kRows * kTokens;
    if (kSlices && !two_buffers && !first_tile) __syncthreads();
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        red[(warp * kRows + g + 8 * (e / 2)) * kTokens + mt * 8 + 2 * t + e % 2] = acc[mt][e];
    if constexpr (kNorm) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        float sq = squares[mt];
        sq += __shfl_xor_sync(0xffffffffu, sq, 1);
        sq += __shfl_xor_sync(0xffffffffu, sq, 2);
        if (t == 0) red_squares[warp * kTokens + mt * 8 + g] = sq;
      }
    }
    __syncthreads();
    const int row0 = col_block * kRows;
    // The tile's sum for weight row `row` (0..15) and `token`, over the warps.
    const auto row_sum = [&](int token, int row) {
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += red[(w * kRows + row) * kTokens + token];
      if constexpr (kNorm) {  // times the token's 1 / rms
        float sq = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) sq += red_squares[w * kTokens + token];
        sum *= rsqrtf(sq / static_cast<float>(a.k) + a.norm_eps);
      }
      return sum;
    };
    const auto warp_sum = [&](int o) { return row_sum(o / kRows, o % kRows); };
    if (a.swiglu_half) {  // outputs 8b..8b+7: gate in rows 0-7, up in rows 8-15; never split
      for (int o = threadIdx.x; o < a.m * 8; o += kThreads) {
        const int token = o / 8;
        const int col = col_block * 8 + o % 8;
        if (col >= a.swiglu_half) continue;
        const float gate = row_sum(token, o % 8);
        const float up = row_sum(token, o % 8 + 8);
        a.y[static_cast<int64_t>(token) * a.y_row_stride + col] =
            __float2bfloat16(gate / (1.0f + __expf(-gate)) * up);
      }
      continue;
    }
    if constexpr (kRope) {  // dims i0..i0+7 in rows 0-7, D/2 + i0.. in rows 8-15; never split
      const int d = a.rope_head_dim;
      const int half = d / 2;
      const int head = rope_row / d;
      const int i = rope_row % d;
      const int qk_heads = a.rope_heads + a.rope_kv_heads;
      for (int o = threadIdx.x; o < a.m * 8; o += kThreads) {  // o mod 8 == threadIdx.x mod 8
        const int token = o / 8;
        // The product's one rounding (the bias added in fp32 first), as the plain epilogue stores
        // it for qkv_rope.
        float x1 = row_sum(token, o % 8), x2 = row_sum(token, o % 8 + 8);
        if (a.bias) {
          x1 = __fadd_rn(x1, rope_bias1);
          x2 = __fadd_rn(x2, rope_bias2);
        }
        x1 = __bfloat162float(__float2bfloat16(x1));
        x2 = __bfloat162float(__float2bfloat16(x2));
        __nv_bfloat16* dst;
        if (head < a.rope_heads) {
          dst = a.q_out + (static_cast<int64_t>(token) * a.rope_heads + head) * d;
        } else {
          const int64_t slot = s_slot[token];
          if (slot < 0 || slot >= a.num_slots) continue;  // padding: no KV
          const int kv = head < qk_heads ? head - a.rope_heads : head - qk_heads;
          dst = (head < qk_heads ? a.k_cache : a.v_cache) +
                (slot * a.rope_kv_heads + kv) * static_cast<int64_t>(d);
        }
        float o1 = x1, o2 = x2;  // v is stored as the product; q and k rotate
        if (head < qk_heads) {
          float c, s;
          cuda::rope_cos_sin(static_cast<float>(s_position[token]), rope_freq, c, s);
          cuda::rope_rotate(x1, x2, c, s, o1, o2);
        }
        dst[i] = __float2bfloat16(o1);
        dst[half + i] = __float2bfloat16(o2);
      }
      continue;
    }
    // Output o = token · kRows + (col - row0): its bias and residual come from the tile's start
    // when it is this thread's first_out. Returns the value stored (the summaries describe y as
    // stored).
    const auto epilogue = [&](int o, int col, float sum) {
      const int token = o / kRows;
      const bool preloaded = o == first_out;
      // Not contracted into an FMA with the prologue's scale: the RoPE epilogue adds the same way,
      // so fused and unfused give the same bits.
      if (a.bias) sum = __fadd_rn(sum, preloaded ? first_bias : __bfloat162float(a.bias[col]));
      const int64_t at = static_cast<int64_t>(token) * a.y_row_stride + col;
      if (a.residual) sum += preloaded ? first_residual : __bfloat162float(a.residual[at]);
      const __nv_bfloat16 stored = __float2bfloat16(sum);
      a.y[at] = stored;
      return __bfloat162float(stored);
    };
    if (a.splits == 1) {
      if (a.summary_words == nullptr) {
        for (int o = threadIdx.x; o < a.m * kRows; o += kThreads) {
          const int col = row0 + o % kRows;
          if (col < a.n) epilogue(o, col, warp_sum(o));
        }
      } else {
        // Whole warps walk the outputs, as the summaries' warp reductions need (the loop's
        // condition is warp-uniform: o - lane is the warp's first output).
        for (int o = threadIdx.x; o - lane < a.m * kRows; o += kThreads) {
          const int col = row0 + o % kRows;
          const bool valid = o < a.m * kRows && col < a.n;
          const float stored = valid ? epilogue(o, col, warp_sum(o)) : 0.0f;
          summarize_outputs(a, s_epoch, o / kRows, row0, valid, stored);
        }
      }
      continue;
    }
    if (kMaySplit && a.cluster_merge) {  // block-uniform: this cluster is the column block's splits
      // Block `split` (its rank: one tile per block, clusters of consecutive blocks) finishes
      // outputs split, split + splits, ...: every block pushes its sum of output o into rank
      // o mod splits's receive area, row `split`, and arrives on that rank's merge barrier; then
      // waits for the others' and sums the splits in split order (the workspace path's order: the
      // same bits). One-way stores and no block barrier across the cluster on the way out: the pull
      // merge (a cluster barrier, remote loads, a second barrier to keep every block's sums alive
      // until read) put two barriers and a round trip on each launch's tail.
      const int per_rank = (a.m * kRows + a.splits - 1) / a.splits;
      cuda::cluster_wait();  // every block started, its merge barrier initialised (see above)
      constexpr int kPerThread = (kRows * kTokens + kThreads - 1) / kThreads;
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        const int o = static_cast<int>(threadIdx.x) + j * kThreads;
        if (o >= a.m * kRows) break;
        const int owner = o % a.splits;
        float* const at = recv + split * per_rank + o / a.splits;
        if (owner == split) {
          *at = warp_sum(o);
        } else {
          cuda::cluster_store_f32(at, static_cast<unsigned>(owner), warp_sum(o));
        }
      }
      __syncthreads();  // the block's stores, ordered before the arrivals that release them
      if (static_cast<int>(threadIdx.x) < a.splits && static_cast<int>(threadIdx.x) != split)
        cuda::mbarrier_arrive_remote(&s_merge_bar, threadIdx.x);
      cuda::mbarrier_wait_cluster(&s_merge_bar, 0);  // the other splits' sums are here
      for (int o = static_cast<int>(threadIdx.x) * a.splits + split; o < a.m * kRows;
           o += kThreads * a.splits) {
        const int col = row0 + o % kRows;
        if (col >= a.n) continue;
        float sum = 0.0f;
        for (int sp = 0; sp < a.splits; ++sp) sum += recv[sp * per_rank + o / a.splits];
        epilogue(o, col, sum);
      }
      continue;
    }
    float* my_partial = a.partials + static_cast<int64_t>(split) * a.m * a.n;
    for (int o = threadIdx.x; o < a.m * kRows; o += kThreads) {
      const int col = row0 + o % kRows;
      if (col < a.n) __stcg(my_partial + static_cast<int64_t>(o / kRows) * a.n + col, warp_sum(o));
    }
    // Release: every thread's partial is visible device-wide before the tile announces itself.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
      const uint32_t arrived = atomicAdd(a.counters + col_block, 1u);
      is_last = arrived == static_cast<uint32_t>(a.splits - 1);
    }
    __syncthreads();
    if (!is_last) continue;  // block-uniform
    // Acquire: the other splits' partials (read from L2, never from a stale L1 line).
    __threadfence();
    for (int o = threadIdx.x; o < a.m * kRows; o += kThreads) {
      const int token = o / kRows;
      const int col = row0 + o % kRows;
      if (col >= a.n) continue;
      float sum = 0.0f;
      for (int sp = 0; sp < a.splits; ++sp)
        sum += __ldcg(a.partials + (static_cast<int64_t>(sp) * a.m + token) * a.n + col);
      epilogue(o, col, sum);
    }
    // Every split has arrived, so no tile of this launch touches the counter again.
    if (threadIdx.x == 0) a.counters[col_block] = 0;
  }
  if (tiles_begun == 1) trace.mark(kMarkFirstTile);
  trace.mark(kMarkDone);
  cuda::cp_async_wait_all();  // (only empty groups remain; nothing may be in flight at exit)
  trace.finish();
}

// A variant's dynamic shared memory past its ring: the warps' reduction buffers, then (a variant
// without the prologue and not few-token) the cluster merge's receive area — unused by the RoPE
// variants, which never split (544 bytes at one token tile).
template <int kMTiles, bool kNorm, bool kFewTokens>
constexpr int kTailSmemFor = static_cast<int>(
    matmul_skinny_reduce_buffers(kMTiles, kNorm) * matmul_skinny_reduce_bytes(kMTiles) +
    (!kNorm && !kFewTokens ? matmul_skinny_cluster_recv_bytes(kMTiles) : 0));
// A variant's dynamic shared memory: its ring, then the tail.
template <int kMTiles, bool kNorm, bool kFewTokens, bool kDeep = false>
constexpr int kSmemFor = static_cast<int>(matmul_skinny_stage_rows(kMTiles, kFewTokens) *
                                          kMatmulSkinnyRowBytes *
                                          kStagesFor<kMTiles, kFewTokens, kDeep>) +
                         kTailSmemFor<kMTiles, kNorm, kFewTokens>;
static_assert(kSmemFor<1, false, false> == matmul_skinny_smem_bytes(1) +
                                               matmul_skinny_reduce_bytes(1) +
                                               matmul_skinny_cluster_recv_bytes(1),
              "the shallow ring's allocation is the variant's");

// Allows the variant that much dynamic shared memory, once per process.
template <int kMTiles, bool kNorm, bool kRope, bool kFewTokens, bool kSlices, bool kDeep = false>
void configure_variant() {
  static const bool configured = [] {
    ROOFLINE_CUDA_CHECK(cudaFuncSetAttribute(
        matmul_skinny_kernel<kMTiles, kNorm, kRope, kFewTokens, kSlices, kDeep>,
        cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemFor<kMTiles, kNorm, kFewTokens, kDeep>));
    return true;
  }();
  (void)configured;
}

// Whether the variant runs `launch` in clusters on the current device (never the few-token
// variant: it does not split).
template <int kMTiles, bool kNorm, bool kRope, bool kFewTokens, bool kSlices, bool kDeep = false>
bool variant_merges_in_clusters(const MatmulSkinnyLaunch& launch) {
  if (kFewTokens || launch.splits < 2 || launch.splits > kMatmulSkinnyMaxClusterSplits)
    return false;
  // The occupancy query sees the variant's shared memory.
  configure_variant<kMTiles, kNorm, kRope, kFewTokens, kSlices, kDeep>();
  // ROOFLINE_SKINNY_CLUSTER=0 merges every split through the workspace (A/B runs).
  return matmul_skinny_merges_in_clusters(
      launch, cuda::max_active_clusters<
                  matmul_skinny_kernel<kMTiles, kNorm, kRope, kFewTokens, kSlices, kDeep>, kThreads,
                  kSmemFor<kMTiles, kNorm, kFewTokens, kDeep>, kMatmulSkinnyMaxClusterSplits>(
                  launch.splits, "ROOFLINE_SKINNY_CLUSTER"));
}

// ROOFLINE_SKINNY_RING_FIT=0 allocates every stage of the ring whatever the plan's ring_stages
// (A/B runs); 1 or unset follows the plan.
bool ring_fit() {
  static const bool on =
      env_switch("ROOFLINE_SKINNY_RING_FIT", "every ring stage", "the stages the plan fits");
  return on;
}

// ROOFLINE_SKINNY_SECOND_BUFFER=0 makes the variants with two reduction buffers use one (A/B
// runs: the allocation stays); 1 or unset follows matmul_skinny_reduce_buffers.
bool two_reduce_buffers() {
  static const bool on =
      env_switch("ROOFLINE_SKINNY_SECOND_BUFFER", "one reduction buffer", "a second where it fits");
  return on;
}

template <int kMTiles, bool kNorm, bool kRope, bool kFewTokens, bool kSlices, bool kDeep = false>
void launch_variant_sliced(const SkinnyArgs& args, const MatmulSkinnyLaunch& launch,
                           cudaStream_t stream) {
  constexpr auto kKernel = matmul_skinny_kernel<kMTiles, kNorm, kRope, kFewTokens, kSlices, kDeep>;
  constexpr int kStageBytes =
      static_cast<int>(matmul_skinny_stage_rows(kMTiles, kFewTokens) * kMatmulSkinnyRowBytes);
  configure_variant<kMTiles, kNorm, kRope, kFewTokens, kSlices, kDeep>();
  SkinnyArgs a = args;
  a.ring_stages = ring_fit() ? launch.ring_stages : kStagesFor<kMTiles, kFewTokens, kDeep>;
  a.two_reduce_buffers = two_reduce_buffers();
  // A prologue variant's allocation whatever its layout (block copies use the first of the two
  // reduction buffers): both layouts then fit the same blocks per SM, and the plan's ring fits
  // either.
  const int smem = a.ring_stages * kStageBytes + kTailSmemFor<kMTiles, kNorm, kFewTokens>;
  a.cluster_merge =
      variant_merges_in_clusters<kMTiles, kNorm, kRope, kFewTokens, kSlices, kDeep>(launch);
  cuda::launch_pdl_clustered(kKernel, dim3(static_cast<unsigned>(launch.grid)), dim3(kThreads),
                             static_cast<size_t>(smem), stream,
                             a.cluster_merge ? static_cast<unsigned>(launch.splits) : 1u, a);
}

// The prologue variants in the copy layout the launch names (MatmulSkinnyLaunch::
// norm_warp_slices); the plain variants always copy as a block.
template <int kMTiles, bool kNorm, bool kRope, bool kFewTokens>
void launch_variant(const SkinnyArgs& args, const MatmulSkinnyLaunch& launch, cudaStream_t stream) {
  if constexpr (kMTiles == 1 && !kNorm && !kRope && !kFewTokens) {
    if (launch.deep_ring) {
      launch_variant_sliced<1, false, false, false, false, true>(args, launch, stream);
      return;
    }
  }
  if (kNorm && launch.norm_warp_slices) {
    launch_variant_sliced<kMTiles, kNorm, kRope, kFewTokens, kNorm>(args, launch, stream);
  } else {
    launch_variant_sliced<kMTiles, kNorm, kRope, kFewTokens, false>(args, launch, stream);
  }
}

template <int kMTiles, bool kNorm, bool kRope>
void launch_rope_variant(const SkinnyArgs& a, const MatmulSkinnyLaunch& launch,
                         cudaStream_t stream) {
  // The few-token variant exists for one token tile only.
  if constexpr (kMTiles == 1) {
    if (launch.few_tokens) {
      launch_variant<kMTiles, kNorm, kRope, true>(a, launch, stream);
      return;
    }
  }
  launch_variant<kMTiles, kNorm, kRope, false>(a, launch, stream);
}

template <int kMTiles, bool kNorm>
void launch_norm_variant(const SkinnyArgs& a, const MatmulSkinnyLaunch& launch,
                         cudaStream_t stream) {
  if (a.rope_head_dim > 0) {
    launch_rope_variant<kMTiles, kNorm, true>(a, launch, stream);
  } else {
    launch_rope_variant<kMTiles, kNorm, false>(a, launch, stream);
  }
}

template <int kMTiles>
void launch_skinny(const SkinnyArgs& a, const MatmulSkinnyLaunch& launch, cudaStream_t stream) {
  if (a.norm_w != nullptr) {
    launch_norm_variant<kMTiles, true>(a, launch, stream);
  } else {
    launch_norm_variant<kMTiles, false>(a, launch, stream);
  }
}

}  // namespace

#if defined(ROOFLINE_PHASE_TRACE)
PhaseTraceRecorder& matmul_skinny_phase_trace() {
  static PhaseTraceRecorder recorder;
  return recorder;
}
#endif

bool matmul_skinny_cuda_merges_in_clusters(const MatmulSkinnyLaunch& launch) {
  switch (launch.m_tiles) {
    case 1:
      return launch.deep_ring
                 ? variant_merges_in_clusters<1, false, false, false, false, true>(launch)
                 : variant_merges_in_clusters<1, false, false, false, false>(launch);
    case 2:
      return variant_merges_in_clusters<2, false, false, false, false>(launch);
    case 4:
      return variant_merges_in_clusters<4, false, false, false, false>(launch);
    case 8:
      return variant_merges_in_clusters<8, false, false, false, false>(launch);
    default:
      return false;
  }
}

void matmul_skinny_cuda(const MatmulParams& p, MatmulEpilogue epilogue,
                        const MatmulSkinnyLaunch& launch, const MatmulSkinnyWorkspace& workspace,
                        CudaStream stream) {
  const char* unsupported = matmul_skinny_unsupported_reason(p, epilogue);
  ROOFLINE_CHECK_MSG(unsupported == nullptr, unsupported);
  ROOFLINE_CHECK(p.y != nullptr);
  ROOFLINE_CHECK_MSG(matmul_skinny_launch_valid(launch, p.m, p.n, p.k),
                     "the skinny launch was planned for another problem");
  ROOFLINE_CHECK(launch.splits == 1 ||
                 (workspace.partials != nullptr && workspace.counters != nullptr));
  ROOFLINE_CHECK_MSG(!matmul_skinny_no_split(p) || (launch.splits == 1 && !launch.deep_ring),
                     "the skinny matmul's RMSNorm prologue, SwiGLU and RoPE epilogues and logit "
                     "tile summaries need an unsplit launch without the deep ring "
                     "(matmul_skinny_launch with no_split = true)");
  const bool summarized = p.summaries.words != nullptr;
  if (summarized) {
    const char* no_summaries = matmul_summaries_epilogue_reason(p);
    ROOFLINE_CHECK_MSG(no_summaries == nullptr, no_summaries);
    ROOFLINE_CHECK_MSG(matmul_skinny_fuses_summaries(p),
                       "the skinny matmul writes logit tile summaries of tile_tokens a multiple "
                       "of 16 only (summarize_logit_tiles_cuda writes the others)");
  }

  SkinnyArgs a;
  a.x = static_cast<const __nv_bfloat16*>(p.x);
  a.norm_w = static_cast<const __nv_bfloat16*>(p.norm_weight);
  a.norm_eps = p.norm_eps;
  a.swiglu_half = p.swiglu ? static_cast<int>(p.n / 2) : 0;
  a.w = static_cast<const __nv_bfloat16*>(p.w);
  a.bias = epilogue == MatmulEpilogue::kBias ? static_cast<const __nv_bfloat16*>(p.bias) : nullptr;
  a.residual = epilogue == MatmulEpilogue::kResidual ? static_cast<const __nv_bfloat16*>(p.residual)
                                                     : nullptr;
  a.y = static_cast<__nv_bfloat16*>(p.y);
  a.partials = workspace.partials;
  a.counters = workspace.counters;
  a.m = static_cast<int>(p.m);
  a.n = static_cast<int>(p.n);
  a.k = static_cast<int>(p.k);
  a.y_row_stride = p.y_row_stride;
  a.splits = launch.splits;
  a.chunks_per_split = static_cast<int>(launch.chunks_per_split);
  a.num_chunks = static_cast<int>(launch.num_chunks);
  a.tiles = static_cast<int>(launch.tiles);
  a.rope_head_dim = 0;
  a.cluster_merge = false;  // launch_variant decides
  a.summary_words = reinterpret_cast<unsigned long long*>(p.summaries.words);
  a.summary_nonfinite = reinterpret_cast<unsigned long long*>(p.summaries.nonfinite);
  a.summary_epoch = p.summaries.epoch;
  a.summary_tile_tokens = summarized ? static_cast<int>(p.summaries.tile_tokens) : 1;
  a.summary_tiles = summarized ? static_cast<int>(logit_tiles(p.n, p.summaries.tile_tokens)) : 0;
  a.summary_tile_magic = matmul_skinny_tile_reciprocal(a.summary_tile_tokens);
  if (p.qkv_rope) {
    const QkvRopeParams& r = p.rope;
    ROOFLINE_CHECK_MSG(r.q_out != nullptr && r.k_cache != nullptr && r.v_cache != nullptr &&
                           r.positions != nullptr && r.slot_mapping != nullptr &&
                           r.inv_freq != nullptr,
                       "the skinny matmul's RoPE epilogue needs q_out, both caches, positions, the "
                       "slot map and inv_freq");
    ROOFLINE_CHECK(r.block_size > 0 && r.num_blocks >= 0);
    a.rope_head_dim = static_cast<int>(r.head_dim);
    a.rope_heads = static_cast<int>(r.num_heads);
    a.rope_kv_heads = static_cast<int>(r.num_kv_heads);
    a.q_out = static_cast<__nv_bfloat16*>(r.q_out);
    a.k_cache = static_cast<__nv_bfloat16*>(r.k_cache);
    a.v_cache = static_cast<__nv_bfloat16*>(r.v_cache);
    a.positions = r.positions;
    a.slot_mapping = r.slot_mapping;
    a.inv_freq = r.inv_freq;
    a.num_slots = r.num_blocks * r.block_size;
  }

#if defined(ROOFLINE_PHASE_TRACE)
  a.trace = matmul_skinny_phase_trace().next(static_cast<int>(launch.grid));
#endif
  switch (launch.m_tiles) {
    case 1:
      launch_skinny<1>(a, launch, stream);
      break;
    case 2:
      launch_skinny<2>(a, launch, stream);
      break;
    case 4:
      launch_skinny<4>(a, launch, stream);
      break;
    case 8:
      launch_skinny<8>(a, launch, stream);
      break;
    default:
      ROOFLINE_CHECK_MSG(false, "skinny matmul: m_tiles must be 1, 2, 4 or 8");
  }
  ROOFLINE_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace roofline
