// CUDA silu_mul kernel variants, selectable at run time so one benchmark binary times them all
// and the GPU test checks every one, and the pure host heuristics that shape their grids (tested
// on the CPU in silu_mul_cuda_test.cc). silu_mul_cuda uses
// kSiluMulVariants[kSiluMulDefaultVariant].
//
// Two layouts:
// - rows: threadIdx.x / blockIdx.x walk the 16-byte packs of a row, blockIdx.y the tokens,
//   `packs_per_thread` tokens per thread (the same column of consecutive tokens).
// - flat: the [num_tokens, intermediate / N] packs flattened into one index range, each thread
//   `packs_per_thread` packs spaced blockDim apart (each load coalesced across the warp), a 1D
//   grid-stride loop. Every thread has all its 2 x packs_per_thread loads (gate and up) in flight
//   before the first use, and no block is partly idle at a row's end. Needs the pack count to fit
//   in int32 (it divides by the row length in 32 bits); larger tensors take the rows layout.
#pragma once

#include <cstdint>

#include "ops/silu_mul/silu_mul.h"

namespace roofline {

struct SiluMulVariant {
  const char* name;
  bool flat;             // flat layout, else rows
  int packs_per_thread;  // rows: 2 or 4 tokens; flat: 2, 4 or 8 packs
  int threads;           // per block: 256 or 512
};

// Predicted ranking at 8192 x 14336 bf16 (705 MB, floor 165 us), before measurement. ptxas
// gives rows2 / flat2 54 registers, rows4 89, flat4 87, flat8 153 (bf16 converted to f32 on load
// doubles what a pack holds), so every variant keeps about the same ~64 KB of 16-byte loads in
// flight per SM (4 blocks x 256 x 4 loads; 2 x 256 x 8; 1 x 256 x 16): the differences come from
// the tail and index arithmetic, not depth. So, weakly:
//  1. flat4x256: no row-end blocks, 32-bit index math, 8 loads issued back to back. ~82 %.
//  2. rows4x256, flat2x256, rows2x256 (old default, 80.5 %): within ~2 % of each other.
//  3. flat4x512, flat8x256: one or two resident blocks per SM, so a block's barrier-free but
//     serial load -> compute -> store phases are not overlapped by other blocks: worst.
// expf and the IEEE division cost ~25 instructions per element: ~half the floor's time in issue
// slots at this shape, hidden only with enough warps.
inline constexpr SiluMulVariant kSiluMulVariants[] = {
    {"rows2x256", false, 2, 256}, {"rows4x256", false, 4, 256}, {"flat2x256", true, 2, 256},
    {"flat4x256", true, 4, 256},  {"flat8x256", true, 8, 256},  {"flat4x512", true, 4, 512},
};
inline constexpr int kSiluMulNumVariants =
    static_cast<int>(sizeof(kSiluMulVariants) / sizeof(kSiluMulVariants[0]));
// Measured on the H200 (2026-11-30), % of the 4.28 TB/s copy ceiling at 8192 x 14336 /
// 8192 x 4096: rows2x256 82.0 / 73.1, rows4x256 53.0 / 47.3, flat2x256 79.7 / 70.9, flat4x256
// 52.0 / 47.3, flat8x256 30.4 / 28.5, flat4x512 49.7 / 45.3. The prediction (equal depth, so
// equal speed) was wrong: the 4- and 8-pack variants lose ~35 %, so occupancy, not loads in
// flight per SM, limits them. The default is the measured best, the original layout.
inline constexpr int kSiluMulDefaultVariant = 0;  // rows2x256

// Whether variant v runs the flat layout for `total_packs` packs (else it falls back to rows with
// the same packs per thread, capped at 4 tokens).
constexpr bool silu_mul_runs_flat(const SiluMulVariant& v, int64_t total_packs) {
  return v.flat && total_packs <= int64_t{0x7fffffff};
}

// Blocks of the flat layout: every thread gets packs_per_thread packs (the last block partly),
// at least one block.
constexpr int64_t silu_mul_flat_blocks(const SiluMulVariant& v, int64_t total_packs) {
  const int64_t per_block = int64_t{v.threads} * v.packs_per_thread;
  const int64_t blocks = (total_packs + per_block - 1) / per_block;
  return blocks < 1 ? 1 : blocks;
}

// As silu_mul_cuda, with kernel variant kSiluMulVariants[variant] (0 <= variant <
// kSiluMulNumVariants).
void silu_mul_cuda_variant(const SiluMulParams& p, int variant, CudaStream stream);

}  // namespace roofline
