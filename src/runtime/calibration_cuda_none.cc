// The CPU-only build's answer to a CUDA calibration.
#include "runtime/calibration.h"

namespace roofline {

namespace {
constexpr const char* kNoCuda =
    "this roofline was built without CUDA: configure with `cmake --preset cuda`";
}  // namespace

StatusOr<std::string> cuda_device_name(int) { return unimplemented(kNoCuda); }
StatusOr<CalibratedCeilings> calibrate_cuda_ceilings(int) { return unimplemented(kNoCuda); }

}  // namespace roofline
