// The CPU-only build's CuptiTracer: there is no device activity to record.
#include <chrono>

#include "profiler/cupti_tracer.h"

namespace roofline {

int64_t CuptiTracer::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

StatusOr<std::unique_ptr<CuptiTracer>> CuptiTracer::start() {
  return unimplemented("device tracing needs a CUDA build: configure with `cmake --preset cuda`");
}

CuptiTracer::~CuptiTracer() = default;
CuptiTracer::Records CuptiTracer::take() { return {}; }
void CuptiTracer::set_recording(bool on) { recording_ = on; }
Status CuptiTracer::set_api_recording(bool on) {
  api_recording_ = on;
  return ok_status();
}
Status CuptiTracer::detach() {
  attached_ = false;
  return ok_status();
}
Status CuptiTracer::attach() {
  return unimplemented("device tracing needs a CUDA build: configure with `cmake --preset cuda`");
}

}  // namespace roofline
