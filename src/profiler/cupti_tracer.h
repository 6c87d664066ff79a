// CuptiTracer: records device activity through CUPTI for `roofline profile` — every kernel
// (including those replayed inside CUDA graphs), memcpy and memset, and, for join.h's learning
// step, the runtime / driver API calls that launched them. Timestamps come from the host steady
// clock (registered as CUPTI's timestamp source), so host and device times compare directly.
//
// CUPTI is process-wide: one tracer at a time. Records accumulate in CUPTI's buffers until take().
// In a build without CUDA, start() returns an error.
//
// Attached, CUPTI costs every graph-launched kernel about a microsecond of software timestamping
// before Blackwell, and a share of that even with every kind disabled (measured on the H200: a
// graph of 200 short kernels 310 us clean, 560 us traced, 380 us attached with recording off).
// Only detaching (cuptiFinalize) makes the process run clean again; graphs launched while it was
// attached run clean afterwards too. So sampled tracing attaches for a traced step and detaches
// after it (bench/results/2026-12-01-sampled-tracing.md).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "profiler/join.h"
#include "roofline/status.h"

namespace roofline {

class CuptiTracer {
 public:
  struct Records {
    std::vector<DeviceActivity> activity;
    std::vector<HostApiCall> api;
    int64_t dropped = 0;  // records CUPTI could not store (buffers full): the trace is incomplete
  };

  static StatusOr<std::unique_ptr<CuptiTracer>> start();
  ~CuptiTracer();  // stops recording
  CuptiTracer(const CuptiTracer&) = delete;
  CuptiTracer& operator=(const CuptiTracer&) = delete;

  // Flushes CUPTI's buffers and returns every record completed since start() or the last take().
  Records take();
  // Stops (off) or resumes (on) recording device activity, e.g. to time the same steps without
  // the tracer. Off also stops API records.
  void set_recording(bool on);
  // Host API records (runtime and driver calls: launch times, correlation ids, event-record
  // markers), off after start(): they cost host time on every launch, so only join.h's learning
  // step turns them on.
  Status set_api_recording(bool on);

  // Flushes CUPTI's records into the tracer (take() still returns them) and detaches CUPTI from
  // the process, so that what runs until attach() runs as if no profiler were loaded. Call it with
  // no device work in flight (CUPTI's own rule for detaching). Detaching costs the host a few to
  // ~20 ms (measured on the H200). API recording is off afterwards.
  Status detach();
  // Attaches CUPTI again after detach() and resumes recording device activity.
  Status attach();
  bool attached() const { return attached_; }

  // The clock of every record: host steady clock, nanoseconds.
  static int64_t now_ns();

 private:
  CuptiTracer() = default;
  bool recording_ = false;
  bool api_recording_ = false;
  bool attached_ = false;
};

}  // namespace roofline
