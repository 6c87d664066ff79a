// roofline's profiler as a library call: what `roofline profile` prints, for a program.
//
// Example:
//   roofline::ProfileOptions options;
//   options.model.dummy_weights = "llama3-8b";
//   options.model.device = "cuda";
//   auto result = roofline::profile_decode(options);
//   if (result.ok()) std::puts(result->report.c_str());
//
// It loads the model on a fresh runner, prefills `batch` sequences of `context` tokens, warms up,
// and profiles `steps` decode steps. On the GPU CUPTI records every kernel, copy and set
// (CUDA-graph replays included), joined to the plan calls through one eager learning step; the
// same steps run first in a runner of their own without the tracer to measure its cost, and with
// CUDA graphs the traced steps are sampled (CUPTI attached for each alone, untraced graph replays
// between them) so that the window stays within overhead_budget; on the CPU every plan call is
// timed with the host clock. The events are analysed against the plan's analytic costs (busy share,
// idle gaps, top kernels, each op's distance to the speed of light) and exported as text, JSON, a
// Chrome / Perfetto trace and two SVG pictures.
#pragma once

#include <cstdint>
#include <string>

#include "roofline/model.h"
#include "roofline/status.h"

namespace roofline {

struct ProfileOptions {
  ModelOptions model;
  int64_t batch = 1;      // [1, 4096]
  int64_t context = 512;  // tokens per sequence before the profiled steps (>= 1)
  int64_t steps = 8;      // profiled decode steps, [1, 100000]
  // The ceilings: calibrate measures this machine now (copy bandwidth, GEMM peak and, on a GPU,
  // the dependent-kernel handover) and caches the result; otherwise the cached calibration of this
  // device, else the H200's measured ones. A positive value overrides either.
  bool calibrate = false;
  double bandwidth_gbps = 0;
  double peak_tflops = 0;
  // GPU with CUDA graphs: the most tracing may add to the profiled window, as a fraction of its
  // untraced time, [0, 1]. CUPTI is attached for each traced step alone and detached after it, and
  // untraced replays of the step's graph between traced steps keep the window within this. 0: the
  // steps are traced one after another, CUPTI attached throughout (the window then costs what a
  // traced step costs). Eager steps are always traced one after another.
  double overhead_budget = 0.03;
};

struct ProfileResult {
  std::string model;    // "dummy llama3-8b" or the model path
  std::string backend;  // e.g. "cuda:0 (NVIDIA H200)"
  int64_t warmup_steps = 0;
  double bytes_per_s = 0;  // the ceilings used
  double flops_per_s = 0;
  std::string ceilings_source;  // where they came from
  bool gpu = false;
  bool cuda_graphs = false;  // GPU: steps ran as graph replays
  int steps_joined = 0;      // GPU: steps whose kernels were joined to plan calls
  int64_t steps_unmatched = 0;
  std::string join_mismatch;    // the first unmatched step, in words ("" when all joined)
  int64_t dropped_records = 0;  // GPU: CUPTI records lost (the trace is then incomplete)
  double ms_per_step = 0;       // host wall time per profiled step
  // GPU: the same steps in a runner made and run before CUPTI was loaded (0 on the CPU).
  double ms_per_step_untraced = 0;
  // GPU with CUDA graphs: the step's graph replayed back to back without the tracer (median ms a
  // replay); ms_per_step_untraced minus this is what the host adds between steps. 0 otherwise.
  double ms_per_step_graph_floor = 0;
  // GPU, sampled tracing (see overhead_budget): the window the traced steps were spread over.
  bool sampled = false;
  int64_t untraced_replays = 0;  // of the step's graph between the traced steps
  double window_ms = 0;          // traced steps, CUPTI's attach / detach, the replays
  double window_extra_ms = 0;    // what tracing added to the window (its untraced time: the rest)
  double overhead_budget = 0;
  // GPU: what the capture cost, in the words `roofline profile` prints ("" on the CPU).
  std::string capture_report;
  double device_ms_per_step = 0;  // what the analysed events cover per step
  std::string report;             // the text report
  std::string report_json;        // the report as JSON
  std::string trace_json;         // Chrome / Perfetto trace (ui.perfetto.dev)
  std::string roofline_svg;       // each op against the two ceilings
  std::string timeline_svg;       // the last step
};

// InvalidArgument, naming the flag, for options out of range (the model options' own ranges
// included: check_model_options): what profile_decode refuses before it loads anything.
Status check_profile_options(const ProfileOptions& options);

// check_profile_options' errors; the model's and the device's otherwise.
StatusOr<ProfileResult> profile_decode(const ProfileOptions& options);

}  // namespace roofline
