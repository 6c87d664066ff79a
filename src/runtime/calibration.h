// Ceiling calibration for `roofline profile`: the device's copy bandwidth and its dense GEMM peak
// (and on a GPU its dependent-kernel handover), measured once in a few hundred milliseconds and
// cached per device, so the distance to the speed of light is measured against this machine
// rather than the H200's defaults.
//
// - CPU: a parallel memcpy of 256 MiB (bandwidth = bytes read + written / time) and the f32 GEMM
//   the CPU backend runs (matmul_cpu, 1024³); best of several repetitions. No handover (a CPU
//   "kernel" is a function call).
// - CUDA: a device-to-device cudaMemcpyAsync of 1 GiB (read + write) and the backend's bf16 GEMM
//   (matmul_cuda, 8192 x 8192 x 8192); best of several, after a warm-up. The handover: a CUDA graph
//   of a chain of PDL kernels, one block an SM, each block reading what every block of the kernel
//   before wrote (bench/results/2026-12-02-boundary-cost/boundary.cu), the median replay over the
//   chain's length; outside [kMinPlausibleHandoverNs, kMaxPlausibleHandoverNs] it is an error.
// The cache is one JSON file of {device name: {bytes_per_s, flops_per_s, handover_ns (GPU only),
// measured}} entries.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "profiler/analysis.h"
#include "roofline/status.h"

namespace roofline {

struct CalibratedCeilings {
  Ceilings ceilings;
  std::string device;    // "cpu (N threads)" or the GPU's name: the cache key
  std::string measured;  // when, UTC, "YYYY-MM-DD HH:MM"
};

// A measured handover outside these bounds is not a handover: the H200's is 1.14 µs, a launch
// without PDL ~1.4 µs, and no GPU of this decade takes 0.2 µs or 50 µs unless something else ran
// on it meanwhile (another process, a clock throttled to idle) or the timing broke.
inline constexpr double kMinPlausibleHandoverNs = 200;
inline constexpr double kMaxPlausibleHandoverNs = 50e3;

// OK for a handover in [kMinPlausibleHandoverNs, kMaxPlausibleHandoverNs]; else an error that
// names the figure, says what it should be and what to do (`what`: where it came from, e.g.
// "measured on NVIDIA H200").
Status check_handover_ns(double handover_ns, const std::string& what);

// device: "cpu", "cuda" or "cuda:N" (as --device). CUDA in a CPU-only build: Unimplemented.
// A GPU's handover is measured too (Ceilings::handover_calibrated set); an implausible one is an
// error (check_handover_ns).
StatusOr<CalibratedCeilings> calibrate_ceilings(const std::string& device);

// The cache key calibrate_ceilings would use for `device`, without measuring.
StatusOr<std::string> ceilings_device_key(const std::string& device);

// $XDG_CACHE_HOME/roofline/ceilings.json, else $HOME/.cache/roofline/ceilings.json; empty when
// neither variable is set.
std::string default_ceilings_cache_path();

// The cached entry for `device_key`; nullopt when the file or the entry does not exist. A file
// that is not the cache's JSON, or an entry with bad figures (a handover_ns outside the plausible
// range included), is an error that names it (delete it to recalibrate). An entry without
// handover_ns (the CPU's, or one cached before handovers were measured) keeps the H200's handover,
// not calibrated.
StatusOr<std::optional<CalibratedCeilings>> load_cached_ceilings(const std::string& path,
                                                                 const std::string& device_key);

// The ceilings to measure against when this run does not calibrate, and a line saying where they
// came from: the cache's entry for `device_key` (a key as ceilings_device_key gives), else the
// H200's measured defaults; an empty cache_path (no HOME) means no cache. One resolution for
// `roofline profile` and `roofline bench`, so both price a handover alike. A cache that cannot be
// read is load_cached_ceilings' error, never the defaults in silence.
StatusOr<std::pair<Ceilings, std::string>> cached_or_default_ceilings(
    const std::string& cache_path, const std::string& device_key);

// Adds or replaces c's entry, keeping the others; creates the directory. handover_ns is written
// only when c's was calibrated.
Status save_cached_ceilings(const std::string& path, const CalibratedCeilings& c);

}  // namespace roofline
