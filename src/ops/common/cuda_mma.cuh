// Warp-level tensor-core building blocks (sm_80+ mma.sync, ldmatrix, movmatrix) shared by the
// attention kernels of src/ops: bf16 operands, f32 accumulators, fragments in the layouts the PTX
// ISA gives for m16n8k16 (A: rows lane/4 and +8, columns 2·(lane%4) and +8; B: rows 2·(lane%4)
// and +8, column lane/4; C: rows lane/4 and +8, columns 2·(lane%4), +1), and their softmax
// exponent. Include only from .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace roofline::cuda {

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Four 8×8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row)));
}

// The inverse of ldmatrix_x4 (sm_90): four 8×8 b16 matrices from fragments (lane t holds row t / 4,
// columns 2·(t % 4) and + 1 of matrix i in r[i]: the m16n8 C layout packed to b16 pairs) into
// shared memory; lanes 8i..8i+7 give the row addresses of matrix i. The stores follow the
// generic proxy's ordering, as st.shared does.
__device__ __forceinline__ void stmatrix_x4(void* row, uint32_t r0, uint32_t r1, uint32_t r2,
                                            uint32_t r3) {
  asm volatile(
      "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_addr(row)),
      "r"(r0), "r"(r1), "r"(r2), "r"(r3)
      : "memory");
}

// The same, each matrix transposed on the way (columns of shared memory become fragment rows).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row)));
}

// c[16×8] += a[16×16] · b[16×8], bf16 in, f32 accumulate.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two f32 -> one register of two bf16, the first in the low half (the lower column).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Transposes an 8×8 b16 matrix held as a fragment (lane: row lane/4, columns 2·(lane%4), +1)
// across the warp, in registers.
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

// 2^x in one MUFU.EX2 (relative error ~2^-22, -inf -> 0): the attention kernels' softmax weights.
// exp2f (ex2.approx.f32 without .ftz) adds a compare and two predicated multiplies per call to
// keep denormal results; a weight below 2^-126 beside a row maximum of 1 is nothing to the row's
// sum or to a bf16 probability, so it flushes to 0.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace roofline::cuda
