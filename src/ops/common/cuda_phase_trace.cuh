// cuda::PhaseTrace: a kernel's phase marks (phase_trace.h has the record layout and the analysis).
// Where ROOFLINE_PHASE_TRACE is not defined — every library build — it is an empty object whose
// calls compile to nothing. Where it is, one thread of each block of a traced launch (records !=
// nullptr; thread 0 unless told) keeps %clock64 at each mark in registers and writes its record at
// finish() (PhaseTraceThrough: stores each mark at once); marks must use constant indices, and
// finish() must run on every path out of the kernel. Include only from
// .cu files.
#pragma once

#include <cstdint>

#include "ops/common/phase_trace.h"

namespace roofline::cuda {

#if defined(ROOFLINE_PHASE_TRACE)
// kWriteThrough: every mark is stored to the record at once, its address recomputed from the
// launch's record space and the block index each time (nothing held across the kernel: for
// kernels with no registers to spare, e.g. a wgmma consumer near its budget), instead of twelve
// clocks waiting in registers for finish(). The record space is zeroed by the caller, so marks not
// reached read 0 either way.
template <bool kWriteThrough>
class BasicPhaseTrace {
 public:
  // records: the launch's record space (PhaseTraceRecorder::next; a kernel parameter), or
  // nullptr: untraced. owner: the thread (threadIdx.x, with y = z = 0) that records.
  __device__ explicit BasicPhaseTrace(uint64_t* records, unsigned owner = 0) {
    if constexpr (kWriteThrough) {
      records_ = records;
      owner_ = owner;
      if (uint64_t* r = record()) {
        r[0] = globaltimer();
        r[kPhaseTraceHeaderWords] = clock64();
      }
    } else {
      if (records == nullptr || !is_owner(owner)) return;
      record_ = records + block_index() * kPhaseTraceWords;
      start_ns_ = globaltimer();
      clock_[0] = clock64();
#pragma unroll
      for (int i = 1; i < kPhaseTraceMarks; ++i) clock_[i] = 0;
    }
  }
  __device__ void mark(int i) {
    if constexpr (kWriteThrough) {
      if (uint64_t* r = record()) r[kPhaseTraceHeaderWords + i] = clock64();
    } else {
      if (record_ != nullptr) clock_[i] = clock64();
    }
  }
  // Mark i once `dep` (a load's result) has arrived: a volatile store of it issues first, and it
  // waits for the value. Forces a wait the kernel may otherwise defer: a trace build's timeline.
  // The last value stored stays in the record's sink word (phase_trace_occupancy reads it as the
  // block's work units).
  __device__ void mark_after(int i, uint32_t dep) {
    uint64_t* r = kWriteThrough ? record() : record_;
    if (r == nullptr) return;
    *reinterpret_cast<volatile uint64_t*>(r + kPhaseTraceSinkWord) = dep;
    mark(i);
  }
  __device__ void finish() {
    uint64_t* r = kWriteThrough ? record() : record_;
    if (r == nullptr) return;
    const uint64_t end = globaltimer();
    uint32_t sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    r[1] = end;
    r[2] = sm;
    if constexpr (kWriteThrough) {
      records_ = nullptr;
    } else {
      r[0] = start_ns_;
#pragma unroll
      for (int i = 0; i < kPhaseTraceMarks; ++i) r[kPhaseTraceHeaderWords + i] = clock_[i];
      record_ = nullptr;
    }
  }

 private:
  __device__ static uint64_t globaltimer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  __device__ static bool is_owner(unsigned owner) {
    return threadIdx.x == owner && threadIdx.y == 0 && threadIdx.z == 0;
  }
  __device__ static uint64_t block_index() {
    return blockIdx.x + uint64_t{gridDim.x} * (blockIdx.y + uint64_t{gridDim.y} * blockIdx.z);
  }
  // Write-through: this block's record in the owner, else nullptr.
  __device__ uint64_t* record() const {
    return records_ != nullptr && is_owner(owner_) ? records_ + block_index() * kPhaseTraceWords
                                                   : nullptr;
  }
  uint64_t* records_ = nullptr;  // write-through
  unsigned owner_ = 0;
  uint64_t* record_ = nullptr;  // registers
  uint64_t start_ns_ = 0;
  uint64_t clock_[kWriteThrough ? 1 : kPhaseTraceMarks];
};
#else
template <bool kWriteThrough>
class BasicPhaseTrace {
 public:
  __device__ explicit BasicPhaseTrace(uint64_t*, unsigned = 0) {}
  __device__ void mark(int) {}
  __device__ void mark_after(int, uint32_t) {}
  __device__ void finish() {}
};
#endif
using PhaseTrace = BasicPhaseTrace<false>;
using PhaseTraceThrough = BasicPhaseTrace<true>;

// A kernel argument block's record space: its `trace` member (present only in trace builds), or
// nullptr.
template <typename Args>
__device__ __forceinline__ uint64_t* phase_trace_records([[maybe_unused]] const Args& a) {
#if defined(ROOFLINE_PHASE_TRACE)
  return a.trace;
#else
  return nullptr;
#endif
}

}  // namespace roofline::cuda
