// Ceiling calibration for `roofline profile`: the device's copy bandwidth and its dense GEMM peak,
// measured once in a few hundred milliseconds and cached per device, so the distance to the speed
// of light is measured against this machine rather than the H200's defaults.
//
// - CPU: a parallel memcpy of 256 MiB (bandwidth = bytes read + written / time) and the f32 GEMM
//   the CPU backend runs (matmul_cpu, 1024³); best of several repetitions.
// - CUDA: a device-to-device cudaMemcpyAsync of 1 GiB (read + write) and the backend's bf16 GEMM
//   (matmul_cuda, 8192 x 8192 x 8192); best of several, after a warm-up.
// The cache is one JSON file of {device name: {bytes_per_s, flops_per_s, measured}} entries.
#pragma once

#include <optional>
#include <string>

#include "profiler/analysis.h"
#include "roofline/status.h"

namespace roofline {

struct CalibratedCeilings {
  Ceilings ceilings;
  std::string device;    // "cpu (N threads)" or the GPU's name: the cache key
  std::string measured;  // when, UTC, "YYYY-MM-DD HH:MM"
};

// device: "cpu", "cuda" or "cuda:N" (as --device). CUDA in a CPU-only build: Unimplemented.
StatusOr<CalibratedCeilings> calibrate_ceilings(const std::string& device);

// The cache key calibrate_ceilings would use for `device`, without measuring.
StatusOr<std::string> ceilings_device_key(const std::string& device);

// $XDG_CACHE_HOME/roofline/ceilings.json, else $HOME/.cache/roofline/ceilings.json; empty when
// neither variable is set.
std::string default_ceilings_cache_path();

// The cached entry for `device_key`; nullopt when the file or the entry does not exist. A file
// that is not the cache's JSON is an error that names it (delete it to recalibrate).
StatusOr<std::optional<CalibratedCeilings>> load_cached_ceilings(const std::string& path,
                                                                 const std::string& device_key);
// Adds or replaces c's entry, keeping the others; creates the directory.
Status save_cached_ceilings(const std::string& path, const CalibratedCeilings& c);

}  // namespace roofline
