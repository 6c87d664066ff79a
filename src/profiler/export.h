// Pictures and machine-readable forms of a profile (issue 9's exports), beside
// chrome_trace_json in analysis.h:
// - roofline_svg: each op kind a point at its arithmetic intensity (FLOPs per byte of the cost
//   model) and attained throughput (its FLOPs over its measured time), under the two ceilings
//   (bandwidth x intensity, and peak); ops that do no arithmetic are listed with their attained
//   bandwidth instead, since they have no place on a FLOP axis.
// - timeline_svg: one step's device intervals, one row per stream, coloured by op kind, so idle
//   gaps between kernels show as white space.
// - report_json: every number of a ProfileReport, for scripts.
// All three are self-contained text (no external fonts, scripts or styles).
#pragma once

#include <string>
#include <vector>

#include "profiler/analysis.h"

namespace roofline {

std::string roofline_svg(const ProfileReport& report, const std::vector<CallModel>& calls,
                         const Ceilings& ceilings);

// The events of step `step` (all events when no event has that step).
std::string timeline_svg(const std::vector<TraceEvent>& events, int step);

// Every number of `report`; with `capture`, also a "capture" object: the CaptureSummary's fields
// (analysis.h), "overhead" (what tracing added, as a fraction of the untraced time: of the window
// when sampled, else of a step) and "step_overhead" (a traced step against an untraced one), both
// null where nothing untraced was measured.
std::string report_json(const ProfileReport& report, const Ceilings& ceilings,
                        const CaptureSummary* capture = nullptr);

}  // namespace roofline
