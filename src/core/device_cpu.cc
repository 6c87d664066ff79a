// The CPU-only build's answer to device queries.
#include "core/device.h"

namespace roofline {

bool built_with_cuda() { return false; }

StatusOr<std::vector<DeviceInfo>> list_cuda_devices() {
  return unimplemented(
      "this roofline was built without CUDA: configure with `cmake --preset cuda`");
}

}  // namespace roofline
