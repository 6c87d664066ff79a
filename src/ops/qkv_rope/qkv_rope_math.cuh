// The arithmetic of rotate-half RoPE on the GPU, shared by qkv_rope_cuda and the skinny matmul's
// RoPE epilogue (matmul_skinny_cuda.cu), so that the fused and the unfused form of the qkv
// projection give the same bits. It is the CPU twin's (qkv_rope_cpu.cc): angle = position ·
// inv_freq[i] in one f32 multiply, cos and sin by the accurate sincosf (positions reach 32k and
// beyond, where the fast __sinf loses all accuracy), and each product rounded before the add.
#pragma once

#include <cuda_runtime.h>

namespace roofline::cuda {

// cos and sin of the angle of pair i at `position` (a token position converted to f32).
__device__ __forceinline__ void rope_cos_sin(float position, float inv_freq, float& c, float& s) {
  sincosf(position * inv_freq, &s, &c);
}

// (x1·c − x2·s, x2·c + x1·s) with each product rounded (no FMA): dims i and i + head_dim / 2.
__device__ __forceinline__ void rope_rotate(float x1, float x2, float c, float s, float& o1,
                                            float& o2) {
  o1 = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
  o2 = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
}

}  // namespace roofline::cuda
