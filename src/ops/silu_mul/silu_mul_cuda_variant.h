// CUDA silu_mul kernel variants, selectable at run time so one benchmark binary times them all
// and the GPU test checks every one, and the pure host heuristics that shape their grids (tested
// on the CPU in silu_mul_cuda_test.cc). silu_mul_cuda uses
// kSiluMulVariants[kSiluMulDefaultVariant].
//
// Two layouts:
// - rows: threadIdx.x / blockIdx.x walk the 16-byte packs of a row, blockIdx.y the tokens,
//   `packs_per_thread` (2) tokens per thread (the same column of consecutive tokens).
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
  int packs_per_thread;  // rows: tokens; flat: packs (2: the kernels instantiated)
  int threads;           // per block (256: the kernels instantiated)
  // bf16 only: silu from the hardware exp2 and reciprocal (__expf, __fdividef; 2 MUFU + 3 FMA-pipe
  // instructions instead of ~20 for expf and the IEEE division). Its f32 result is within a few
  // f32 ulp of the accurate one, so the bf16 output equals the CPU twin's or sits one bf16 ulp
  // away where the exact value lies on a rounding boundary. f32 activations always take the
  // accurate path (the f32 tolerance is 2e-6 relative).
  bool fast_math;
};

// Measured on the H200 (2026-11-30, first run), % of the 4.28 TB/s copy ceiling at 8192 x 14336 /
// 8192 x 4096, accurate math: rows2x256 82.0 / 73.1, rows4x256 53.0 / 47.3, flat2x256 79.7 / 70.9,
// flat4x256 52.0 / 47.3, flat8x256 30.4 / 28.5, flat4x512 49.7 / 45.3. The prediction then (equal
// loads in flight per SM, so equal speed) was wrong: the 4- and 8-pack variants lost ~35 %; those
// four are retired. ptxas gives rows2 54 registers: 4 blocks of 256 per SM, half occupancy, and
// per element expf + IEEE division cost ~20 FMA-pipe instructions: ~70 us of issue at 8192 x
// 14336 against the 165 us floor, overlapped with memory by only 32 warps per SM.
// Prediction for the fast-math variants: ~8 instructions per element (convert, exp2, add, rcp,
// 2 mul, pack) and fewer registers (more resident blocks): compute stops competing with the
// loads, so rows2x256_fast >= 85 % at 8192 x 14336; flat2x256_fast within 2 % of it.
// Measured (H200, 2026-11-30, second run), 8192 x 14336 / 8192 x 4096: rows2x256 81.7 / 72.6 %,
// flat2x256 79.3 / 71.0 %, rows2x256_fast 96.7 / 86.3 %, flat2x256_fast 95.3 / 84.8 %. The
// prediction held: instruction issue, not bytes in flight, held the accurate kernel back.
inline constexpr SiluMulVariant kSiluMulVariants[] = {
    {"rows2x256", false, 2, 256, false},
    {"flat2x256", true, 2, 256, false},
    {"rows2x256_fast", false, 2, 256, true},
    {"flat2x256_fast", true, 2, 256, true},
};
inline constexpr int kSiluMulNumVariants =
    static_cast<int>(sizeof(kSiluMulVariants) / sizeof(kSiluMulVariants[0]));
inline constexpr int kSiluMulDefaultVariant = 2;  // rows2x256_fast: the measured best

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
