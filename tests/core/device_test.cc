// Device queries: in a CUDA build on a GPU host, the device must be a real GPU with sane
// properties; without a GPU (CI) the test says so and skips; a CPU build answers Unimplemented.
#include "core/device.h"

#include <gtest/gtest.h>

namespace roofline {
namespace {

TEST(Device, QueryMatchesBuild) {
  auto devices = list_cuda_devices();
  if (!built_with_cuda()) {
    EXPECT_EQ(devices.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(devices.status().message().find("--preset cuda"), std::string::npos);
    GTEST_SKIP() << "CPU-only build: no CUDA device query";
  }
  ASSERT_TRUE(devices.ok()) << devices.status().to_string();
  if (devices->empty()) GTEST_SKIP() << "built with CUDA but no GPU is visible on this machine";
  for (const DeviceInfo& d : *devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.sm_count, 0);
    EXPECT_GT(d.l2_bytes, 0);
    EXPECT_GT(d.total_memory_bytes, int64_t{1} << 30);
    std::printf("device %d: %s, sm_%d%d, %d SMs, %.0f MB L2, %.1f GiB\n", d.index, d.name.c_str(),
                d.compute_major, d.compute_minor, d.sm_count, d.l2_bytes / 1e6,
                d.total_memory_bytes / 1073741824.0);
  }
}

}  // namespace
}  // namespace roofline
