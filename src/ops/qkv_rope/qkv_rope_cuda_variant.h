// CUDA qkv_rope kernel variants, selectable at run time so one benchmark binary times them all and
// the GPU test checks every one. qkv_rope_cuda uses kQkvRopeVariants[kQkvRopeDefaultVariant].
// Both apply to the vector kernel (head_dim 32/64/128/256, 16-byte aligned); the generic kernel
// is the same for both.
//
// - token_per_block: one block per token; a block issues its loads, computes the token's cos /
//   sin, rotates and stores, then exits. Measured on the H200 (2026-11-30): 67.3 % of the
//   4.28 TB/s copy ceiling at 8192 tokens, llama3-8b heads.
// - ring: resident blocks walk the tokens; each thread copies its packs of the tokens two ahead
//   into a shared-memory ring with cp.async (no registers held while in flight).
//   Why: a first "pipelined" form (next token's loads held in registers) measured 64.6 % without
//   and 67.3 % with the q/k norm (token_per_block: 68.4 / 52.4 %). ptxas explains both: at 384
//   threads, 44 registers give token_per_block 3 resident blocks per SM, 57 gave pipelined 2, and
//   with the norm 59 vs 50 registers swap them. Resident tokens per SM, not the shape of the
//   loop, set the speed: each token moves 24.5 KB, 0.75 us per SM at 4.28 TB/s, and a token's
//   latency (load, position -> sincos -> barrier, rotate, store) is ~3 us, so ~4 tokens per SM
//   must be in flight. Prediction for ring: 3 blocks x (1 + 2 tokens ahead) in flight without
//   spending registers: >= 75 % with and without the norm.
//   Measured (H200, 2026-11-30, two runs of the same build): ring 78.4 / 73.8 % without the norm,
//   71.6 / 69.3 % with it; token_per_block 68.5 / 64.9 % and 52.6 / 51.0 %. Ring is faster in
//   every case and is the default; it sits at the 75 % target, within the runs' ~5 % spread.
#pragma once

#include "ops/qkv_rope/qkv_rope.h"

namespace roofline {

struct QkvRopeVariant {
  const char* name;
  bool ring;
};

inline constexpr QkvRopeVariant kQkvRopeVariants[] = {
    {"token_per_block", false},
    {"ring", true},
};
inline constexpr int kQkvRopeNumVariants =
    static_cast<int>(sizeof(kQkvRopeVariants) / sizeof(kQkvRopeVariants[0]));
inline constexpr int kQkvRopeDefaultVariant = 1;  // ring: the measured best

// As qkv_rope_cuda, with kernel variant kQkvRopeVariants[variant].
void qkv_rope_cuda_variant(const QkvRopeParams& p, int variant, CudaStream stream);

}  // namespace roofline
