// What profile_decode (roofline/profile.h) and the engine's live-traffic profile
// (Engine::start_profile) share: where the ceilings come from, and the analysis and exports of a
// set of timed calls.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "profiler/analysis.h"
#include "profiler/export.h"
#include "roofline/profile.h"
#include "roofline/status.h"

namespace roofline {

// InvalidArgument, naming the override as `names` spell them (the flags, or the server's fields),
// unless both are finite and not negative (0: none). NaN would otherwise pass a "< 0" test and be
// dropped unsaid, and infinity makes every roofline 0.
struct CeilingOverrideNames {
  const char* bandwidth = "--bandwidth-gbps";
  const char* peak = "--peak-tflops";
};
Status check_ceiling_overrides(double bandwidth_gbps, double peak_tflops,
                               CeilingOverrideNames names = {});

// The ceilings and a line saying where they came from: calibrate measures this machine now (and
// caches it), else the cached calibration of `device`, else the H200's measured ones; a positive
// bandwidth_gbps / peak_tflops overrides either.
StatusOr<std::pair<Ceilings, std::string>> profile_ceilings(const std::string& device,
                                                            bool calibrate, double bandwidth_gbps,
                                                            double peak_tflops);

// Analyses `events` against `models` (one per call index) under `ceilings` and fills out's
// ceilings, device time per step, report, JSON, trace and pictures (the timeline shows
// timeline_step). With `capture`, the JSON also says how the profile was captured.
void analyse_into(const std::vector<TraceEvent>& events, const std::vector<CallModel>& models,
                  const Ceilings& ceilings, int timeline_step, ProfileResult* out,
                  const CaptureSummary* capture = nullptr);

}  // namespace roofline
