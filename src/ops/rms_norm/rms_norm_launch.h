// The launch shape of the CUDA rms_norm kernels: pure host heuristics (tested on the CPU in
// rms_norm_test.cc and rms_norm_cuda_test.cc) shared by the launcher's dispatch and its tests.
//
// A group of `threads` threads (whole warps) normalises one row; a block holds `rows_per_block`
// such groups. Each thread owns `items` packs of `vector_width` elements spaced `threads` apart and
// keeps them in registers between the sum of squares and the scaling, so every element is read
// from memory once. Blocks are at most 256 threads, so every kernel is compiled for 256 threads
// and may keep up to 255 registers per thread without spilling. Rows too long to fit in
// `max_threads` x `max_items` packs take the two-pass variant (items == 0), which re-reads the
// row (from L2: one row is at most a few hundred KB).
#pragma once

#include <cstdint>

namespace roofline {

struct RmsNormLaunchShape {
  int threads = 0;  // per row, a multiple of 32 in [32, kRmsNormMaxThreads]
  int items = 0;    // packs per thread held in registers: 1, 2, 4 or 8; 0: two-pass, not held
};

// 256 threads: small blocks keep many rows in flight per SM and barriers cheap, and 4 packs per
// thread (up to 8 loads of 16 bytes in flight in the fused form) stays well inside the registers.
inline constexpr int kRmsNormMaxThreads = 256;
// Rows up to which a block prefetches its weight into L1 before waiting for the kernel before it
// (decode batches; see rms_norm_kernel).
inline constexpr int64_t kRmsNormPrefetchRows = 64;
inline constexpr int kRmsNormMaxItems = 4;

// The fewest packs per thread (registers) that fit the row into `max_threads` threads, at most
// `max_items` (a power of two <= 8) each; two passes otherwise.
constexpr RmsNormLaunchShape rms_norm_launch_shape(int64_t hidden, int vector_width,
                                                   int max_threads = kRmsNormMaxThreads,
                                                   int max_items = kRmsNormMaxItems) {
  const int64_t packs = (hidden + vector_width - 1) / vector_width;
  for (int items = 1; items <= max_items; items *= 2) {
    const int64_t threads = ((packs + items - 1) / items + 31) / 32 * 32;
    if (threads <= max_threads) return {static_cast<int>(threads), items};
  }
  return {max_threads, 0};
}

// A kernel variant, selectable at run time (rms_norm_cuda_variant.h) so one benchmark binary
// times them all: threads per row (the most; fewer for short rows), rows per block, the packs per
// thread allowed before falling back to two passes, and whether the grid is persistent (SM count
// x resident blocks per SM, grid-stride over rows) or one block per row group.
struct RmsNormVariant {
  const char* name;
  int threads_per_row;  // 32, 64, 128 or 256; threads_per_row * rows_per_block <= 256
  int rows_per_block;   // 1, 2 or 4
  int max_items;        // 4 or 8
  bool persistent;
};

// Predicted ranking at 8192 x 4096 bf16 (fused form, 268 MB, floor 63 us), before measurement,
// from ptxas's registers (fused bf16 kernel) and the 16-byte loads each SM then keeps in flight:
//  1. row128: 4 packs per thread, 73 registers: 7 blocks x 128 threads x 8 loads = 115 KB per SM.
//  2. row256 (the old default, 79-83 %): 2 packs, 48 registers: 5 x 256 x 4 loads = 82 KB.
//  3. rows2x128: 4 packs but 110 registers (ptxas keeps more addresses live with two rows per
//     block): 2 blocks x 256 x 8 = 65 KB.
//  4. rows2x64 / rows4x64: 8 packs, 218 registers: 256 threads per SM x 16 loads = 65 KB, and a
//     long serial reduction per row: the worst.
//  5. *_persistent: the grid-stride loop serialises a block's rows (load -> reduce -> store, no
//     prefetch of the next row), so it only saves block launches, which the hardware scheduler
//     hides already: within noise of its non-persistent twin.
inline constexpr RmsNormVariant kRmsNormVariants[] = {
    {"row256", 256, 1, 4, false},
    {"row128", 128, 1, 4, false},
    {"rows2x128", 128, 2, 4, false},
    {"rows2x64", 64, 2, 8, false},
    {"rows4x64", 64, 4, 8, false},
    {"row256_persistent", 256, 1, 4, true},
    {"rows2x128_persistent", 128, 2, 4, true},
};
inline constexpr int kRmsNormNumVariants =
    static_cast<int>(sizeof(kRmsNormVariants) / sizeof(kRmsNormVariants[0]));
// Measured on the H200 (2026-11-30, bench/results/2026-11-30-cuda-backend.md), 8192 x 4096 bf16,
// % of the 4.28 TB/s copy ceiling, plain / fused residual form: row256 73.8 / 85.9, row128
// 78.2 / 84.2, rows2x128 74.6 / 87.0, rows2x64 69.2 / 66.9, rows4x64 65.9 / 64.9,
// row256_persistent 75.2 / 79.6, rows2x128_persistent 71.7 / 81.6. The prediction got the
// fused form's order wrong: the extra registers of two rows per block cost less than the
// second row's loads in flight gain. Defaults are the measured best of each form.
inline constexpr int kRmsNormDefaultVariant = 1;          // row128, for rms_norm
inline constexpr int kRmsNormResidualDefaultVariant = 2;  // rows2x128, for rms_norm_residual

// The shape a variant gives a row of `hidden` elements in packs of `vector_width`. 8 packs per
// thread only for packs of 8 (bf16 16-byte: 8 x 4 registers held); f32 16-byte packs stop at 4;
// the one-element fallback path at 2 (ptxas spilled 8 bytes at 4 with bf16 held as storage), and
// each takes two passes beyond.
constexpr RmsNormLaunchShape rms_norm_variant_shape(const RmsNormVariant& v, int64_t hidden,
                                                    int vector_width) {
  const int cap = vector_width == 8 ? 8 : vector_width == 1 ? 2 : 4;
  const int max_items = v.max_items < cap ? v.max_items : cap;
  return rms_norm_launch_shape(hidden, vector_width, v.threads_per_row, max_items);
}

}  // namespace roofline
