// Asynchronous global -> shared copies (cp.async, sm_80+) shared by the CUDA kernels of src/ops:
// 16-byte copies that hold no registers while in flight, committed in groups and awaited by
// count. Include only from .cu files.
#pragma once

#include <cuda_runtime.h>

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

}  // namespace roofline::cuda
