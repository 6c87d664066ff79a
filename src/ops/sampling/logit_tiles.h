// Logit tile summaries: what an LM head leaves beside its logits so that the sampler
// (sample_rows_tiles_cuda, sampling.h) can find a row's best tokens without reading the row again.
// Per row and per tile of `tile_tokens` consecutive tokens, one 64-bit word: the tile's largest
// finite logit and its first position; per row, one word counting its non-finite logits.
//
// The words are built so that a GEMM epilogue can write them with one atomicMax per piece of a
// tile its threads hold (16 columns of a skinny GEMM's tile, a warp's columns of a wide one),
// without a pass of its own and without zeroing the buffer first:
//   bits 63..44  the step's epoch (1 .. kLogitTileEpochs - 1): a word of another epoch is stale;
//   bits 43..12  sampling::order_key of the tile's largest finite logit (-0 read as +0); 0 when
//                the piece (or the tile) holds no finite logit;
//   bits 11..0   kLogitTileMaxTokens - 1 - its position in the tile (0 with key 0),
// so the largest word of an epoch is its largest value at its first position, and every word of
// a newer epoch beats every word of an older one. The writer bumps the epoch every step; when the
// epoch wraps (every 2^20 - 1 steps) the caller zeroes the words once, since an old word of a
// large epoch would then beat the new ones.
//   The row's non-finite count is epoch << 32 | count: a writer that finds non-finite logits adds
// its count (a compare-and-swap that restarts the count when the word is stale, which is rare:
// only rows with NaN or inf); a stale word reads as a count of 0.
#pragma once

#include <cstdint>

#include "core/cuda_stream.h"
#include "core/dtype.h"
#include "core/host_device.h"
#include "ops/sampling/sampling_math.h"

namespace roofline {

// Tokens per tile: at most this (a position fits the word's 12 bits).
inline constexpr int64_t kLogitTileMaxTokens = 4096;
// Tiles per row, at most: the sampler keeps a row's tile maxima on chip (64 KB).
inline constexpr int64_t kLogitTileMaxTiles = 16384;
// Epochs are 1 .. kLogitTileEpochs - 1 (0 is the zeroed buffer's).
inline constexpr uint32_t kLogitTileEpochs = 1u << 20;

inline constexpr int64_t logit_tiles(int64_t vocab, int64_t tile_tokens) {
  return (vocab + tile_tokens - 1) / tile_tokens;
}

// Where a writer leaves a step's summaries and where the sampler reads them (device memory for
// the CUDA ops, host memory for the CPU twins).
struct LogitTileSummaries {
  uint64_t* words = nullptr;        // [num_rows, logit_tiles(vocab, tile_tokens)]
  uint64_t* nonfinite = nullptr;    // [num_rows]: epoch << 32 | non-finite logits of the row
  const uint32_t* epoch = nullptr;  // the step's epoch, read at run time (CUDA-graph safe)
  int64_t tile_tokens = 0;          // 1 .. kLogitTileMaxTokens
};

namespace logit_tile {

inline constexpr int kEpochShift = 44;
inline constexpr int kKeyShift = 12;
inline constexpr uint64_t kIndexMask = uint64_t{kLogitTileMaxTokens} - 1;

// The word of one logit `v` at `index` in its tile (every finite logit's key is > 0).
ROOFLINE_HD uint64_t value_word(uint32_t epoch, float v, int index) {
  const uint64_t base = static_cast<uint64_t>(epoch) << kEpochShift;
  if (!sampling::is_finite(v)) return base;
  const uint32_t key = sampling::order_key(v == 0.0f ? 0.0f : v);
  return base | (static_cast<uint64_t>(key) << kKeyShift) |
         (kIndexMask - static_cast<uint64_t>(index));
}
// The word of a bf16 logit (its `bits`) in 32 bits, for a writer that reduces a piece of a tile
// before its one atomicMax (a warp reduction of 32-bit values is one instruction): bits 27..12 the
// bf16 value's 16-bit order key (the upper half of its fp32 sampling::order_key, from which the
// lower half follows), bits 11..0 as the word's; 0 for a non-finite logit. Compact words order as
// their words do, and word_of_compact(epoch, compact_bf16_word(bits, index)) is
// value_word(epoch, the bf16 value, index).
ROOFLINE_HD uint32_t compact_bf16_word(uint16_t bits, int index) {
  if ((bits & 0x7f80u) == 0x7f80u) return 0u;      // inf or NaN
  const uint32_t b = bits == 0x8000u ? 0u : bits;  // -0 read as +0
  const uint32_t key16 = (b & 0x8000u) ? (~b & 0xffffu) : (b | 0x8000u);
  return (key16 << kKeyShift) | static_cast<uint32_t>(kIndexMask - static_cast<uint64_t>(index));
}
ROOFLINE_HD uint64_t word_of_compact(uint32_t epoch, uint32_t compact) {
  const uint64_t base = static_cast<uint64_t>(epoch) << kEpochShift;
  if (compact == 0u) return base;
  const uint32_t key16 = compact >> kKeyShift;
  // A positive value's fp32 key is its bits with the sign set (lower half 0); a negative one's is
  // its bits inverted (lower half all ones).
  const uint32_t key = (key16 << 16) | ((key16 & 0x8000u) ? 0u : 0xffffu);
  return base | (static_cast<uint64_t>(key) << kKeyShift) | (compact & kIndexMask);
}
ROOFLINE_HD uint32_t epoch_of(uint64_t word) { return static_cast<uint32_t>(word >> kEpochShift); }
// The tile's largest key (0: no finite logit).
ROOFLINE_HD uint32_t key_of(uint64_t word) { return static_cast<uint32_t>(word >> kKeyShift); }
ROOFLINE_HD int index_of(uint64_t word) {
  return static_cast<int>(kIndexMask - (word & kIndexMask));
}
ROOFLINE_HD uint64_t nonfinite_word(uint32_t epoch, uint32_t count) {
  return (static_cast<uint64_t>(epoch) << 32) | count;
}
// The row's count in `epoch` (0 for a stale word).
ROOFLINE_HD uint32_t nonfinite_count(uint64_t word, uint32_t epoch) {
  return static_cast<uint32_t>(word >> 32) == epoch ? static_cast<uint32_t>(word) : 0u;
}

#if defined(__CUDACC__)
// Adds `count` non-finite logits to a row's count word (device memory) in `epoch`, restarting a
// stale word's count: the compare-and-swap loop of the GPU writers (the skinny GEMM's epilogue,
// summarize_logit_tiles_cuda), where several blocks may add to one row at once. Out of line: only
// rows with NaN or inf call it, and the GEMM epilogue that may do so keeps its registers.
__device__ __noinline__ inline void add_nonfinite(unsigned long long* row, uint32_t epoch,
                                                  uint32_t count) {
  unsigned long long seen = __ldcg(row);
  for (;;) {
    const unsigned long long want = nonfinite_word(epoch, nonfinite_count(seen, epoch) + count);
    const unsigned long long was = atomicCAS(row, seen, want);
    if (was == seen) return;
    seen = was;
  }
}
#endif

}  // namespace logit_tile

// Why `s` cannot describe rows of `vocab` logits (nullptr when it can): the words and counts set,
// an epoch pointer, 1 <= tile_tokens <= kLogitTileMaxTokens and at most kLogitTileMaxTiles tiles.
inline const char* logit_tiles_unsupported_reason(const LogitTileSummaries& s, int64_t vocab) {
  if (s.words == nullptr || s.nonfinite == nullptr || s.epoch == nullptr)
    return "logit tile summaries need their words, row counts and epoch";
  if (s.tile_tokens < 1 || s.tile_tokens > kLogitTileMaxTokens)
    return "logit tile summaries: tile_tokens must be in [1, 4096]";
  if (vocab < 1 || logit_tiles(vocab, s.tile_tokens) > kLogitTileMaxTiles)
    return "logit tile summaries: at most 16384 tiles a row (a larger tile_tokens)";
  return nullptr;
}

// The summaries of [num_rows, vocab] logits (dtype kF32 or kBF16, host memory, row stride
// `row_stride` elements) in epoch *out.epoch (host memory): every tile's word and every row's
// count written (not combined with what the buffers held). What an LM-head epilogue leaves, and
// the oracle its tests compare with. Arguments outside the limits above abort (the caller's bug).
void summarize_logit_tiles_cpu(const void* logits, DType dtype, int64_t num_rows, int64_t vocab,
                               int64_t row_stride, const LogitTileSummaries& out);

// The same summaries on the GPU (logit_tiles_cuda.cu): logits, out.words and out.nonfinite in
// device memory (the words 8-byte aligned), the epoch read there at run time, so a CUDA graph
// replays it for each step's epoch. Every tile's word is written whole (the oracle's, bit for
// bit); a row's count word is left as it was when the row holds no non-finite logit (it reads as
// a count of 0 when stale; see nonfinite_count), else it becomes the oracle's. What the GEMMs that
// cannot write the summaries in their epilogue run after them (matmul.h). Asynchronous on
// `stream`, no allocation or synchronisation; arguments outside the limits above abort.
void summarize_logit_tiles_cuda(const void* logits, DType dtype, int64_t num_rows, int64_t vocab,
                                int64_t row_stride, const LogitTileSummaries& out,
                                CudaStream stream);

}  // namespace roofline
