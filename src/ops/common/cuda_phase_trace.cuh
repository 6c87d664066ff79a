// cuda::PhaseTrace: a kernel's phase marks (phase_trace.h has the record layout and the analysis).
// Where ROOFLINE_PHASE_TRACE is not defined — every library build — it is an empty object whose
// calls compile to nothing. Where it is, thread 0 of each block of a traced launch (records !=
// nullptr) keeps %clock64 at each mark in registers and writes its record at finish(); marks must
// use constant indices, and finish() must run on every path out of the kernel. Include only from
// .cu files.
#pragma once

#include <cstdint>

#include "ops/common/phase_trace.h"

namespace roofline::cuda {

#if defined(ROOFLINE_PHASE_TRACE)
class PhaseTrace {
 public:
  // records: the launch's record space (PhaseTraceRecorder::next), or nullptr: untraced.
  __device__ explicit PhaseTrace(uint64_t* records) {
    if (records == nullptr || threadIdx.x != 0 || threadIdx.y != 0 || threadIdx.z != 0) return;
    const uint64_t block =
        blockIdx.x + uint64_t{gridDim.x} * (blockIdx.y + uint64_t{gridDim.y} * blockIdx.z);
    record_ = records + block * kPhaseTraceWords;
    start_ns_ = globaltimer();
    clock_[0] = clock64();
#pragma unroll
    for (int i = 1; i < kPhaseTraceMarks; ++i) clock_[i] = 0;
  }
  __device__ void mark(int i) {
    if (record_ != nullptr) clock_[i] = clock64();
  }
  // Mark i once `dep` (a load's result) has arrived: a volatile store of it issues first, and it
  // waits for the value. Forces a wait the kernel may otherwise defer: a trace build's timeline.
  __device__ void mark_after(int i, uint32_t dep) {
    if (record_ == nullptr) return;
    *reinterpret_cast<volatile uint64_t*>(record_ + kPhaseTraceSinkWord) = dep;
    clock_[i] = clock64();
  }
  __device__ void finish() {
    if (record_ == nullptr) return;
    const uint64_t end = globaltimer();
    uint32_t sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    record_[0] = start_ns_;
    record_[1] = end;
    record_[2] = sm;
#pragma unroll
    for (int i = 0; i < kPhaseTraceMarks; ++i) record_[kPhaseTraceHeaderWords + i] = clock_[i];
    record_ = nullptr;
  }

 private:
  __device__ static uint64_t globaltimer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  uint64_t* record_ = nullptr;
  uint64_t start_ns_ = 0;
  uint64_t clock_[kPhaseTraceMarks];
};
#else
class PhaseTrace {
 public:
  __device__ explicit PhaseTrace(uint64_t*) {}
  __device__ void mark(int) {}
  __device__ void mark_after(int, uint32_t) {}
  __device__ void finish() {}
};
#endif

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
