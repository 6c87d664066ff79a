// Asynchronous global -> shared copies shared by the CUDA kernels of src/ops: cp.async (sm_80+),
// 16-byte copies that hold no registers while in flight, committed in groups and awaited by
// count; and the bulk tensor copy (TMA, sm_90): one thread asks the copy engine for a whole box of
// a tensor described by a tensor map, and the copy completes bytes on an mbarrier. Include only
// from .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace roofline::cuda {

// 16 bytes global -> shared without registers; valid == false zero-fills (nothing is read). Both
// addresses 16-byte aligned. Bypasses L1 (.cg): the data is read once.
__device__ __forceinline__ void cp_async_16(void* smem_dst, const void* gmem_src, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src),
               "r"(src_bytes)
               : "memory");
}

// cp_async_16 to a shared-space address (__cvta_generic_to_shared of the slot, computed once): in a
// loop, the generic form can make the compiler rebuild the shared window's base (S2UR of
// SR_CgaCtaId and its uniform arithmetic) at every copy, which it did in sampling's pass 1.
__device__ __forceinline__ void cp_async_16_to(uint32_t smem_dst, const void* gmem_src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_dst), "l"(gmem_src)
               : "memory");
}

// 16 bytes from a shared-space address into registers (after the cp.async that filled it landed).
__device__ __forceinline__ uint4 ld_shared_16(uint32_t smem_src) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(smem_src)
               : "memory");
  return v;
}

// 4 bytes from a shared-space address.
__device__ __forceinline__ uint32_t ld_shared_4(uint32_t smem_src) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(smem_src) : "memory");
  return v;
}

// 4 or 8 bytes global -> shared without registers, through L1 (.ca: the only form for copies under
// 16 bytes): for a kernel's small step inputs (positions, slots), so that a thread issuing them
// does not stall on their arrival the way a load stored to shared memory does. Both addresses
// aligned to the size. Complete with the thread's commit group, like cp_async_16.
template <int kBytes>
__device__ __forceinline__ void cp_async_small(void* smem_dst, const void* gmem_src) {
  static_assert(kBytes == 4 || kBytes == 8, "cp.async copies 4, 8 or 16 bytes");
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst), "l"(gmem_src), "n"(kBytes)
               : "memory");
}

// Closes the group of this thread's cp.async issued since the last commit (possibly empty).
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most kPending of this thread's committed groups are still in flight; the data
// of the others is then visible to this thread (other threads need a barrier as well).
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

// One arrival on an mbarrier (its count includes it) that also raises the phase's expected
// transaction bytes by `bytes`: the phase completes once the arrivals are in and that many bytes
// of bulk copies have landed.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, unsigned bytes) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(addr), "r"(bytes)
               : "memory");
}

// The box of a rank-3 tensor map (`map`: the generic address of a CUtensorMap, a __grid_constant__
// kernel parameter) at element coordinates (c0, c1, c2), innermost first, into shared memory at
// smem_dst (aligned as the map's swizzle needs: 1024 bytes for 128-byte swizzling); its bytes
// complete on `bar`. Out-of-range elements arrive as zeros. Issued by one thread.
__device__ __forceinline__ void tma_load_3d(void* smem_dst, const void* map, int c0, int c1, int c2,
                                            uint64_t* bar) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(b)
      : "memory");
}

// Orders the generic-proxy accesses of shared memory that this thread made, or acquired from
// others through a barrier (ordinary loads and stores, cp.async's writes, an mbarrier's
// initialisation), before its later async-proxy ones (bulk copies, wgmma's operand reads).
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

}  // namespace roofline::cuda
