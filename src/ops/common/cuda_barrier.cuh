// Block-level synchronisation for warp-specialised kernels (sm_90): mbarriers in shared memory
// (a producer's copies complete a phase, consumers wait on its parity), named barriers (a subset
// of the block's warps syncs or only arrives), and the register reallocation between warpgroups
// (setmaxnreg); the grid-level arrival count of kernels whose last block merges the others'
// partials; and the cluster barrier, distributed-shared-memory loads and stores and the bulk copy
// between blocks' shared memories of clustered launches.
// Include only from .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace roofline::cuda {

__device__ __forceinline__ unsigned barrier_addr(const uint64_t* bar) {
  return static_cast<unsigned>(__cvta_generic_to_shared(bar));
}

// An mbarrier whose phase completes after `count` arrivals. One thread initialises; a block-wide
// barrier must follow before any other thread uses it.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(barrier_addr(bar)), "r"(count)
               : "memory");
}

// One arrival, releasing this thread's prior writes (and, after a wgmma wait, its operand reads)
// to whoever waits on the phase.
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(barrier_addr(bar))
               : "memory");
}

// One arrival once every cp.async this thread has issued so far has landed (.noinc: the
// barrier's count includes it). The thread does not wait.
__device__ __forceinline__ void cp_async_mbarrier_arrive(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(barrier_addr(bar))
               : "memory");
}

// Waits until the phase of parity `parity` has completed. A fresh barrier is in phase 0, so
// waiting on parity 1 returns at once (the "previous" phase): a producer's first wait for an
// empty slot passes.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "wait_loop:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_loop;\n}\n" ::"r"(barrier_addr(bar)),
      "r"(parity)
      : "memory");
}

// Named barrier `id` (1 ... 15; 0 is __syncthreads) over `threads` threads (a multiple of 32):
// sync waits for all of them, arrive counts this warp and goes on.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Hands registers back to / takes them from the SM's pool, per warpgroup (every warp of the
// warpgroup executes it). kRegs: a multiple of 8 in [24, 256].
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// The arrival of one block of a group whose last block merges the group's partials (split-K
// style, no second kernel). Called by one thread after a block barrier that ordered the block's
// writes: one acquire-release atomic on the group's counter publishes them (the release is
// cumulative over what the barrier ordered before it) and, in the last of `total` blocks, acquires
// every other block's; a barrier after it hands that on to the block's threads. The last block
// resets the counter to zero, so the next launch (or a CUDA-graph replay) starts clean. Returns
// whether this is the last block. (A fence in every thread, then a relaxed atomic, cost a second
// round trip to L2 per block.)
__device__ __forceinline__ bool arrive_last_of(unsigned* counter, unsigned total) {
  unsigned before;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n"
               : "=r"(before)
               : "l"(counter)
               : "memory");
  const bool last = before == total - 1;
  if (last) *counter = 0u;
  return last;
}

// Thread-block clusters (sm_90): a barrier over every thread of every block of the cluster,
// releasing each thread's prior writes (shared memory included) to the threads that wait on it,
// and a load from another block's shared memory (distributed shared memory) at the address that
// `local` has in this block's.
__device__ __forceinline__ void cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
#endif
}

// The two halves of cluster_sync, for a thread that only signals (arrive; `relaxed`: it publishes
// no writes) or signals early and waits later. A thread arrives once per phase; one that arrives
// and exits does not hold the barrier up (barrier.cluster.wait waits for the non-exited threads).
__device__ __forceinline__ void cluster_arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_arrive_relaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
#endif
}

__device__ __forceinline__ uint32_t cluster_smem_addr(const void* local, unsigned rank) {
  uint32_t remote = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote)
               : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(local))), "r"(rank));
#endif
  return remote;
}

__device__ __forceinline__ float cluster_load_f32(const float* local, unsigned rank) {
  float v = 0.0f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n"
               : "=f"(v)
               : "r"(cluster_smem_addr(local, rank))
               : "memory");
#endif
  return v;
}

// Stores into another block's shared memory (the address `local` has in this block's).
__device__ __forceinline__ void cluster_store_f32(float* local, unsigned rank, float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(cluster_smem_addr(local, rank)), "f"(v)
               : "memory");
#endif
}
__device__ __forceinline__ void cluster_store_f32x4(float* local, unsigned rank, float4 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(cluster_smem_addr(local, rank)),
      "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
      : "memory");
#endif
}

// A bulk copy by the copy engine from this block's shared memory (`src`) into block `rank`'s, at
// the address `dst` has in this block's, completing `bytes` on block `rank`'s mbarrier at the
// address `bar` has in this block (its owner raised the expected bytes before, e.g. ahead of a
// cluster barrier the issuer waited on). Addresses 16-byte aligned, bytes a multiple of 16. The
// threads that wrote `src` fence it first (fence_proxy_async_shared), and `src` must stay as it is
// until the receiver has waited (e.g. until a later cluster barrier). Issued by one thread.
__device__ __forceinline__ void cluster_bulk_copy(void* dst, unsigned rank, const void* src,
                                                  unsigned bytes, uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, "
      "[%3];\n" ::"r"(cluster_smem_addr(dst, rank)),
      "r"(static_cast<uint32_t>(__cvta_generic_to_shared(src))), "r"(bytes),
      "r"(cluster_smem_addr(bar, rank))
      : "memory");
#endif
}

// An mbarrier that other blocks of the cluster arrive on: its initialisation made visible to them
// (they must then learn of it through a release-acquire, e.g. a cluster barrier), one arrival on
// block `rank`'s barrier at the address `bar` has in this block, releasing at cluster scope what
// this thread's writes and a block barrier before it ordered, and a wait that acquires them.
__device__ __forceinline__ void fence_mbarrier_init_cluster() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mbarrier_arrive_remote(uint64_t* bar, unsigned rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(
                   cluster_smem_addr(bar, rank))
               : "memory");
#endif
}
__device__ __forceinline__ void mbarrier_wait_cluster(uint64_t* bar, unsigned parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n.reg .pred done;\n"
      "wait_loop:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_loop;\n}\n" ::"r"(barrier_addr(bar)),
      "r"(parity)
      : "memory");
#endif
}

}  // namespace roofline::cuda
