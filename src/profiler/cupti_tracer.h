// CuptiTracer: records device activity through CUPTI for `roofline profile` — every kernel
// (including those replayed inside CUDA graphs), memcpy and memset, and, for join.h's learning
// step, the runtime / driver API calls that launched them. Timestamps come from the host steady
// clock (registered as CUPTI's timestamp source), so host and device times compare directly.
//
// CUPTI is process-wide: one tracer at a time. Start it before the CUDA graphs to be profiled are
// instantiated. Records accumulate in CUPTI's buffers until take(). In a build without CUDA,
// start() returns an error.
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

  // The clock of every record: host steady clock, nanoseconds.
  static int64_t now_ns();

 private:
  CuptiTracer() = default;
  bool recording_ = false;
  bool api_recording_ = false;
};

}  // namespace roofline
