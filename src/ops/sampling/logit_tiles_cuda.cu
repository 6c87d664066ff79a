// summarize_logit_tiles_cuda (logit_tiles.h): the tile summaries of [num_rows, vocab] f32 or bf16
// logits in one pass over them — what the LM heads whose GEMM cannot write the summaries in its
// epilogue run after it (cuBLASLt, the wide kernel, and the skinny kernel where a tile is not whole
// 16-column blocks: matmul.h).
//
// Algorithm, short tiles (a power of two of 16-byte packs, at most 32: tiles of 8 to 256 bf16 or 4
// to 128 f32, rows 16-byte aligned — the LM heads' case): see summarize_short_tiles_kernel; a warp
// per 32-pack segment of a row, a tile's word made in shuffles and stored whole.
// Algorithm, every other tile: a block takes a run of whole tiles of one row (kBlockTokens tokens
// of them, or one tile when tiles are longer), so it owns their words: it builds them in shared
// memory and stores them with plain stores, the oracle's words bit for bit whatever the buffer held
// (no global atomics for the words, and no reliance on the epoch to beat what was there). Its
// threads read the run in packs of 16 bytes (8 bf16 or 4 f32), consecutive threads consecutive
// packs, counted from the row's start: one 16-byte load each where rows are 16-byte aligned,
// element loads otherwise (and for the row's last pack when it would run past the row). A pack may
// span tiles (tile_tokens 37: two; tile_tokens 1: eight): the thread walks its elements in order
// and keeps, per tile, the largest finite value and its first position (a strict > keeps the first
// of equal values, and -0 == +0 as the words' keys have it), then makes the tile's word once. Every
// tile but the pack's last goes to its shared word by atomicMax (a tile the pack ends, or one
// inside it: few such, on distinct words); the pack's last tiles, non-decreasing across the warp's
// lanes, meet in a segmented max over shuffles, and the first lane of each tile's run of lanes
// merges it: one shared atomic per tile and warp step, where a tile of 128 bf16 spans 16 lanes'
// packs. Each thread counts its non-finite values; the block sums them and, where the sum is not 0,
// one thread adds it to the row's count word (logit_tile::add_nonfinite: several blocks share a
// row).
//
// Numerics: none; integer keys of the stored values (logit_tile::value_word).
//
// Bound: memory. Reads num_rows · vocab elements once and writes 8 bytes per tile: the LM head of
// Llama-3-8B at m = 64 (128256 bf16 a row, tiles of 128) reads 16.4 MB and writes 0.5 MB, 4.0 us at
// the 4.28 TB/s copy ceiling (less where the GEMM just left y in L2). Measured on the H200 with the
// general kernel, the LM head took 14-17 us longer with it
// (bench/results/2026-12-04-sampling-tiles-epilogue.md); the short-tile kernel's figure is in
// bench/results/2026-12-04-sampling-wide-summaries.md. Per element, a load, a conversion, a
// finiteness test and a compare; per pack, a few shuffles.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/check.h"
#include "core/cuda_check.h"
#include "ops/common/cuda_launch.cuh"
#include "ops/common/cuda_vector.cuh"
#include "ops/common/env_switch.h"
#include "ops/sampling/logit_tiles.h"

namespace roofline {

namespace {

constexpr int kThreads = 256;
// Tokens a block summarises (whole tiles; one tile when tiles are longer): 8 KB of bf16, two
// 16-byte loads in flight per thread; the words of its at most kBlockTokens tiles (tile_tokens 1)
// take 32 KB of shared memory, which still leaves seven blocks on an SM.
constexpr int kBlockTokens = 4096;
static_assert(kBlockTokens >= kLogitTileMaxTokens, "a block holds at least one whole tile");
constexpr int kNoTile = INT_MAX;  // the tile of a lane without a pack: after every real one

struct TilesArgs {
  int64_t row_stride;  // elements
  int num_rows;
  int vocab;
  int tile_tokens;
  int tiles;                      // per row
  int tile_shift;                 // log2(tile_tokens) where that is a power of two, else -1
  int block_tiles;                // tiles per block (the last block of a row may have fewer)
  unsigned long long* words;      // [num_rows, tiles]
  unsigned long long* nonfinite;  // [num_rows]
  const uint32_t* epoch;
};

// The word of a tile part whose largest finite value is `best` at `index` (index < 0: none).
__device__ __forceinline__ unsigned long long part_word(uint32_t epoch, float best, int index) {
  return index < 0 ? static_cast<unsigned long long>(epoch) << logit_tile::kEpochShift
                   : logit_tile::value_word(epoch, best, index);
}

// Blocks (x: runs of block_tiles tiles of a row; y: rows, gridDim.y at a time) over logits of
// storage T in packs of kVec elements; kAligned: a row's packs are 16-byte aligned.
template <typename T, int kVec, bool kAligned>
__global__ void __launch_bounds__(kThreads)
    summarize_logit_tiles_kernel(const typename T::Storage* logits,
                                 const __grid_constant__ TilesArgs a) {
  __shared__ unsigned long long s_words[kBlockTokens];
  __shared__ unsigned s_nonfinite;
  // The logits are the GEMM's before this kernel; the epoch may be a kernel's too.
  cuda::touch_values(logits);
  cuda::touch_params(a);
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  const uint32_t epoch = *a.epoch;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int t0 = static_cast<int>(blockIdx.x) * a.block_tiles;
  const int block_tiles = min(a.block_tiles, a.tiles - t0);
  const int c0 = t0 * a.tile_tokens;  // the block's columns [c0, c1)
  const int c1 = min(c0 + block_tiles * a.tile_tokens, a.vocab);
  const int q0 = c0 / kVec;  // its packs [q0, q1): every one holds a column of [c0, c1)
  const int q1 = (c1 + kVec - 1) / kVec;
  const int steps = (q1 - q0 + kThreads - 1) / kThreads;  // block-uniform: the shuffles' loop

  for (int row = static_cast<int>(blockIdx.y); row < a.num_rows; row += gridDim.y) {
    // Every tile gets at least one part's word (its columns lie in the block's packs): 0 is below
    // them all.
    for (int i = static_cast<int>(threadIdx.x); i < block_tiles; i += kThreads) s_words[i] = 0;
    if (threadIdx.x == 0) s_nonfinite = 0;
    __syncthreads();
    const typename T::Storage* x = logits + row * a.row_stride;
    unsigned nonfinite = 0;
    for (int step = 0; step < steps; ++step) {
      const int q = q0 + step * kThreads + static_cast<int>(threadIdx.x);
      int tile = kNoTile;  // the tile of this pack's last part, and that part's word
      unsigned long long word = 0;
      if (q < q1) {
        const int first = q * kVec;
        float v[kVec];
        if (kAligned && first + kVec <= a.vocab) {
          cuda::load_f32<T, kVec>(x + first, v);
        } else {
#pragma unroll
          for (int e = 0; e < kVec; ++e)
            v[e] = first + e < a.vocab ? T::to_f32(x[first + e]) : 0.0f;
        }
        const int begin = max(first, c0);
        tile = begin / a.tile_tokens;
        int index = begin - tile * a.tile_tokens;  // of the next column in its tile
        float best = 0.0f;
        int best_index = -1;
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          if (first + e < c0 || first + e >= c1) continue;
          if (index == a.tile_tokens) {  // a new tile: the part before it is done
            atomicMax(&s_words[tile - t0], part_word(epoch, best, best_index));
            ++tile;
            index = 0;
            best_index = -1;
          }
          if (!sampling::is_finite(v[e])) {
            ++nonfinite;
          } else if (best_index < 0 || v[e] > best) {
            best = v[e];
            best_index = index;
          }
          ++index;
        }
        word = part_word(epoch, best, best_index);
      }
      // The lanes' last parts, in tile order: a segmented max toward the first lane of each tile.
#pragma unroll
      for (int offset = 1; offset < 32; offset <<= 1) {
        const int other_tile = __shfl_down_sync(0xffffffffu, tile, offset);
        const unsigned long long other = __shfl_down_sync(0xffffffffu, word, offset);
        if (lane + offset < 32 && other_tile == tile && other > word) word = other;
      }
      const int previous_tile = __shfl_up_sync(0xffffffffu, tile, 1);
      if (tile != kNoTile && (lane == 0 || previous_tile != tile))
        atomicMax(&s_words[tile - t0], word);
    }
    nonfinite = __reduce_add_sync(0xffffffffu, nonfinite);
    if (lane == 0 && nonfinite != 0) atomicAdd(&s_nonfinite, nonfinite);
    __syncthreads();
    unsigned long long* out = a.words + static_cast<int64_t>(row) * a.tiles + t0;
    for (int i = static_cast<int>(threadIdx.x); i < block_tiles; i += kThreads) out[i] = s_words[i];
    if (threadIdx.x == 0 && s_nonfinite != 0)
      logit_tile::add_nonfinite(a.nonfinite + row, epoch, s_nonfinite);
    __syncthreads();  // the next row's start clears what this one still reads
  }
}

// Warps of the short-tile kernel: a warp takes kSegmentsPerWarp segments of 32 packs of one row
// each, all their loads issued before any is used.
constexpr int kShortTileWarps = kThreads / 32;
constexpr int kSegmentsPerWarp = 4;

// Whether the short-tile kernel takes tiles of `tile_tokens` over packs of kVec: a tile is a power
// of two of whole packs, at most a warp's 32, so each of a row's 32-pack segments holds whole
// tiles only.
bool short_tiles(int64_t tile_tokens, int vec) {
  if (tile_tokens % vec != 0) return false;
  const int64_t packs = tile_tokens / vec;
  return packs <= 32 && (packs & (packs - 1)) == 0;
}

// The largest of 8 bf16 values (a 16-byte pack) and its first position, where all 8 are finite
// (false otherwise: the caller walks them one by one). Packed bf16x2 instructions, about a third
// of the per-element walk's: the NaN-propagating max and min of the halves (NaN carries through,
// and an infinity would be an extreme) say whether all are finite; then the halves equal to the
// largest give the first position (IEEE equality: -0 == +0, as the words' keys have it).
__device__ __forceinline__ bool finite_pack_best(const uint4& raw, float& best, int& position) {
  const auto half2 = [](uint32_t bits) {
    __nv_bfloat162 h;
    memcpy(&h, &bits, 4);
    return h;
  };
  const __nv_bfloat162 a0 = half2(raw.x), a1 = half2(raw.y), a2 = half2(raw.z), a3 = half2(raw.w);
  const __nv_bfloat162 hi = __hmax2_nan(__hmax2_nan(a0, a1), __hmax2_nan(a2, a3));
  const __nv_bfloat162 lo = __hmin2_nan(__hmin2_nan(a0, a1), __hmin2_nan(a2, a3));
  const float h0 = __low2float(hi), h1 = __high2float(hi);
  if (!(sampling::is_finite(h0) && sampling::is_finite(h1) &&
        sampling::is_finite(__low2float(lo)) && sampling::is_finite(__high2float(lo))))
    return false;
  best = fmaxf(h0, h1);
  const __nv_bfloat162 b2 = __float2bfloat162_rn(best);  // exact: best is a bf16 value
  // Element 2k is word k's low half (bit 0 of its mask), 2k + 1 its high half (bit 16).
  unsigned mask = (__heq2_mask(a0, b2) & 0x00010001u) | (__heq2_mask(a1, b2) & 0x00010001u) << 2 |
                  (__heq2_mask(a2, b2) & 0x00010001u) << 4 |
                  (__heq2_mask(a3, b2) & 0x00010001u) << 6;
  mask = (mask & 0xffffu) | (mask >> 15);  // bit e: element e equals the largest
  position = __ffs(static_cast<int>(mask)) - 1;
  return true;
}

// The largest of the compact words (logit_tiles.h) of a tile's run of `tile_lanes` lanes (a power
// of two, at most 32, the same in every lane): one warp reduction (REDUX) for a whole warp, two
// for half-warps, 32-bit xor shuffles for shorter runs.
__device__ __forceinline__ uint32_t tile_max(uint32_t compact, int tile_lanes, int lane) {
  if (tile_lanes == 32) return __reduce_max_sync(0xffffffffu, compact);
  if (tile_lanes == 16) {
    const uint32_t low = __reduce_max_sync(0xffffffffu, lane < 16 ? compact : 0u);
    const uint32_t high = __reduce_max_sync(0xffffffffu, lane < 16 ? 0u : compact);
    return lane < 16 ? low : high;
  }
  for (int offset = tile_lanes / 2; offset > 0; offset >>= 1)
    compact = max(compact, __shfl_xor_sync(0xffffffffu, compact, offset));
  return compact;
}

// The short-tile kernel (tiles of a power of two of packs, at most 32: 8 to 256 bf16 or 4 to 128
// f32; rows 16-byte aligned): lane l of a warp holds pack l of a 32-pack segment of one row,
// consecutive lanes consecutive packs, so a tile is a run of tile_tokens / kVec lanes and its word
// is their max, stored whole by the run's first lane. No shared memory and no block barrier: each
// warp streams 4 segments (16 bytes a lane each in flight) and is done. A segment's non-finite
// values are summed over the warp, and added to the row's count where not 0. kCompact (bf16): a
// lane's pack becomes one 32-bit compact word and the tile's max one or two warp reductions;
// otherwise (f32, and bf16 with ROOFLINE_SUMMARIES_COMPACT=0) 64-bit words over xor shuffles. The
// forty-sixth session measured the 64-bit form at 14 us under ncu for the 16 MB of Llama-3-8B's
// logits at m = 64, bound by instructions (12 an element before the packed finiteness test, the
// 64-bit shuffles a large share, bench/results/2026-12-04-sampling-wide-summaries.md); the
// general kernel above, a block per 4096 tokens with its words in shared memory, took ~14 us too.
// No division in the loop: a tile is a shift of the column, a segment's row a step past the warp's
// first (one 64-bit division a warp).
template <typename T, int kVec, bool kCompact>
__global__ void __launch_bounds__(kThreads)
    summarize_short_tiles_kernel(const typename T::Storage* logits,
                                 const __grid_constant__ TilesArgs a, int row_segments,
                                 int64_t segments) {
  static_assert(!kCompact || std::is_same_v<T, cuda::Bf16>, "compact words are bf16's");
  cuda::touch_values(logits, row_segments, segments);
  cuda::touch_params(a);
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  const uint32_t epoch = *a.epoch;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kShortTileWarps + threadIdx.x / 32;
  const int tile_lanes = a.tile_tokens / kVec;
  using Pack = cuda::Pack<typename T::Storage, kVec>;
  static_assert(sizeof(Pack) == sizeof(uint4), "a pack is 16 bytes");
  // The warp's segments: consecutive, from row `row0`'s segment `in_row0` on (one 64-bit division
  // a warp, not one per segment).
  const int64_t segment0 = warp * kSegmentsPerWarp;
  const int row0 = static_cast<int>(segment0 / row_segments);
  const int in_row0 = static_cast<int>(segment0 - static_cast<int64_t>(row0) * row_segments);
  // The packs as raw 16-byte words until they are used (as Packs, the compiler unpacked each
  // one's elements before the next load went out, so waited for it).
  uint4 raw[kSegmentsPerWarp];
  int row[kSegmentsPerWarp];
  int first[kSegmentsPerWarp];  // the lane's first column, or -1 without a pack
  // Every lane's whole pack is loaded unconditionally (from the row's start where the lane has
  // none), all kSegmentsPerWarp of them before any is used: a load under a branch, used inside
  // it, would wait for its data before the next segment's load goes out.
#pragma unroll
  for (int i = 0; i < kSegmentsPerWarp; ++i) {
    int in_row = in_row0 + i;  // past row0's end on short rows: the rows after it
    row[i] = row0;
    while (in_row >= row_segments) {
      in_row -= row_segments;
      ++row[i];
    }
    first[i] = in_row * 32 * kVec + lane * kVec;
    const bool whole = segment0 + i < segments && first[i] + kVec <= a.vocab;
    if (segment0 + i >= segments || first[i] >= a.vocab) first[i] = -1;
    raw[i] = *reinterpret_cast<const uint4*>(
        whole ? logits + static_cast<int64_t>(row[i]) * a.row_stride + first[i] : logits);
  }
  // The row's last pack where it runs past the row: its elements one by one (rare: vocab % kVec).
#pragma unroll
  for (int i = 0; i < kSegmentsPerWarp; ++i) {
    if (first[i] < 0 || first[i] + kVec <= a.vocab) continue;
    const typename T::Storage* x = logits + static_cast<int64_t>(row[i]) * a.row_stride + first[i];
    Pack pack;
    for (int e = 0; e < kVec; ++e) pack.v[e] = first[i] + e < a.vocab ? x[e] : x[0];
    memcpy(&raw[i], &pack, sizeof(Pack));
  }
#pragma unroll
  for (int i = 0; i < kSegmentsPerWarp; ++i) {
    if (segment0 + i >= segments) break;  // warp-uniform
    unsigned nonfinite = 0;
    const int tile = first[i] >> a.tile_shift;
    const int index = first[i] & (a.tile_tokens - 1);
    Pack pack;
    memcpy(&pack, &raw[i], sizeof(Pack));
    unsigned long long word = 0;
    if constexpr (kCompact) {
      // The pack's compact word: its largest finite value at its first position (0: none).
      uint32_t compact = 0;
      float best = 0.0f;
      int position = 0;
      if (first[i] >= 0 && first[i] + kVec <= a.vocab && finite_pack_best(raw[i], best, position)) {
        compact = logit_tile::compact_bf16_word(__bfloat16_as_ushort(__float2bfloat16(best)),
                                                index + position);  // exact: best is bf16
      } else if (first[i] >= 0) {  // rare: non-finite values, or the row's last, partial pack
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          if (first[i] + e >= a.vocab) break;
          nonfinite += (pack.v[e] & 0x7f80u) == 0x7f80u;
          compact = max(compact, logit_tile::compact_bf16_word(pack.v[e], index + e));
        }
      }
      word = logit_tile::word_of_compact(epoch, tile_max(compact, tile_lanes, lane));
    } else {
      // The 64-bit form: the pack's largest finite value and its first position as a word, then
      // the max over the tile's lanes in xor shuffles.
      float best = 0.0f;
      int best_index = -1;
      bool packed = false;  // the pack's best found by finite_pack_best
      if constexpr (std::is_same_v<T, cuda::Bf16>) {
        // A whole pack of finite bf16 values (nearly every one): packed instructions.
        int position = 0;
        packed =
            first[i] >= 0 && first[i] + kVec <= a.vocab && finite_pack_best(raw[i], best, position);
        if (packed) best_index = index + position;
      }
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        if (packed || first[i] < 0 || first[i] + e >= a.vocab) break;
        const float v = T::to_f32(pack.v[e]);
        if (!sampling::is_finite(v)) {
          ++nonfinite;
        } else if (best_index < 0 || v > best) {
          best = v;
          best_index = index + e;
        }
      }
      word = first[i] < 0 ? 0ull : part_word(epoch, best, best_index);
      for (int offset = tile_lanes / 2; offset > 0; offset >>= 1) {
        const unsigned long long other = __shfl_xor_sync(0xffffffffu, word, offset);
        word = other > word ? other : word;
      }
    }
    if (first[i] >= 0 && lane % tile_lanes == 0)
      a.words[static_cast<int64_t>(row[i]) * a.tiles + tile] = word;
    nonfinite = __reduce_add_sync(0xffffffffu, nonfinite);
    if (lane == 0 && nonfinite != 0)
      logit_tile::add_nonfinite(a.nonfinite + row[i], epoch, nonfinite);
  }
}

template <typename T, int kVec, bool kAligned>
void launch_summarize(const void* logits, const TilesArgs& a, cudaStream_t stream) {
  if (kAligned && short_tiles(a.tile_tokens, kVec)) {
    const int row_segments = (a.vocab + 32 * kVec - 1) / (32 * kVec);
    const int64_t segments = static_cast<int64_t>(a.num_rows) * row_segments;
    const int64_t per_block = int64_t{kShortTileWarps} * kSegmentsPerWarp;
    const int64_t blocks = (segments + per_block - 1) / per_block;
    ROOFLINE_CHECK_MSG(blocks <= INT_MAX, "logit tiles: too many rows for one launch");
    // bf16 in compact words unless ROOFLINE_SUMMARIES_COMPACT=0 (A/B runs), read once.
    static const bool compact =
        env_switch("ROOFLINE_SUMMARIES_COMPACT", "64-bit words", "32-bit compact words for bf16");
    auto* kernel = summarize_short_tiles_kernel<T, kVec, false>;
    if constexpr (std::is_same_v<T, cuda::Bf16>) {
      if (compact) kernel = summarize_short_tiles_kernel<T, kVec, true>;
    }
    cuda::launch_pdl(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, stream,
                     static_cast<const typename T::Storage*>(logits), a, row_segments, segments);
    return;
  }
  const int blocks_per_row = (a.tiles + a.block_tiles - 1) / a.block_tiles;
  const dim3 grid(static_cast<unsigned>(blocks_per_row),
                  static_cast<unsigned>(std::min(a.num_rows, 65535)));
  cuda::launch_pdl(summarize_logit_tiles_kernel<T, kVec, kAligned>, grid, dim3(kThreads), 0, stream,
                   static_cast<const typename T::Storage*>(logits), a);
}

}  // namespace

void summarize_logit_tiles_cuda(const void* logits, DType dtype, int64_t num_rows, int64_t vocab,
                                int64_t row_stride, const LogitTileSummaries& out,
                                CudaStream stream) {
  const char* unsupported = logit_tiles_unsupported_reason(out, vocab);
  ROOFLINE_CHECK_MSG(unsupported == nullptr, unsupported);
  ROOFLINE_CHECK_MSG(dtype == DType::kF32 || dtype == DType::kBF16,
                     "logit tiles: f32 or bf16 logits");
  ROOFLINE_CHECK_MSG(row_stride >= vocab, "logit tiles: row_stride must be >= vocab");
  ROOFLINE_CHECK_MSG(num_rows >= 0 && num_rows <= INT_MAX, "logit tiles: 0 to 2^31 - 1 rows");
  if (num_rows == 0) return;
  ROOFLINE_CHECK(logits != nullptr);
  ROOFLINE_CHECK_MSG(cuda::is_aligned(out.words, 8) && cuda::is_aligned(out.nonfinite, 8),
                     "logit tiles: the summary words must be 8-byte aligned");
  TilesArgs a;
  a.row_stride = row_stride;
  a.num_rows = static_cast<int>(num_rows);
  a.vocab = static_cast<int>(vocab);  // at most kLogitTileMaxTiles · kLogitTileMaxTokens = 2^26
  a.tile_tokens = static_cast<int>(out.tile_tokens);
  a.tiles = static_cast<int>(logit_tiles(vocab, out.tile_tokens));
  a.tile_shift = -1;  // C++17 here: no std::countr_zero
  if ((out.tile_tokens & (out.tile_tokens - 1)) == 0)
    for (a.tile_shift = 0; (int64_t{1} << a.tile_shift) < out.tile_tokens;) ++a.tile_shift;
  a.block_tiles = static_cast<int>(std::max<int64_t>(1, kBlockTokens / out.tile_tokens));
  a.words = reinterpret_cast<unsigned long long*>(out.words);
  a.nonfinite = reinterpret_cast<unsigned long long*>(out.nonfinite);
  a.epoch = out.epoch;
  // The one dispatch point: dtype, then whether the rows' packs are 16-byte aligned.
  cuda::dispatch_activation(dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = cuda::kVec16<T>;
    const int64_t row_bytes = row_stride * static_cast<int64_t>(sizeof(typename T::Storage));
    if (cuda::is_aligned(logits, 16) && row_bytes % 16 == 0) {
      launch_summarize<T, kVec, true>(logits, a, stream);
    } else {
      launch_summarize<T, kVec, false>(logits, a, stream);
    }
  });
  ROOFLINE_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace roofline
