// What the CUDA devices of this machine are: read from the driver, never hard-coded (SM count,
// L2 size and shared-memory limits drive split and tile heuristics). In a CPU-only build the
// query returns Unimplemented with the way to get a CUDA build.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "roofline/status.h"

namespace roofline {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int sm_count = 0;
  int64_t total_memory_bytes = 0;
  int64_t l2_bytes = 0;
  int64_t shared_memory_per_block_optin_bytes = 0;
  int memory_clock_khz = 0;
  int memory_bus_width_bits = 0;
};

// True when roofline was built with ROOFLINE_CUDA.
bool built_with_cuda();

// The visible CUDA devices; an empty list when the build has CUDA but the machine has no GPU.
StatusOr<std::vector<DeviceInfo>> list_cuda_devices();

}  // namespace roofline
