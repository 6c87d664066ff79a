// Analysis of a device trace against the roofline: how busy the device was, where it sat idle, how
// much communication hid under compute, which kernels took more than their share, and how far the
// step is from the speed of light, split into per-op excess and idle time.
//
// The profiler sits below graph, so its inputs are plain structs: TraceEvent is one device interval
// (from CUPTI activity records, already joined to plan calls by NVTX range), CallModel is the
// analytic cost of one plan call (graph's call_cost, copied out by the caller).
//
// The central identity, exact up to rounding:
//   measured_step_ns = ideal_step_ns + Σ per_op excess_ns + launch_gap_ns + other_gap_ns
//                      + unattributed_ns
// To make it hold, busy time is attributed to calls so that every busy nanosecond belongs to
// exactly one place: at each instant the active compute kernels share it equally; with no compute
// active the active copies share it; with neither, the active communication. Communication hidden
// under compute therefore costs its call nothing — it did not lengthen the step.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace roofline {

// One interval of device activity.
struct TraceEvent {
  enum class Kind { kCompute, kCommunication, kMemcpy };

  std::string name;  // kernel name, or "memcpy HtoD", "ncclAllReduce", ...
  std::string op;    // op kind of the plan call, e.g. "matmul"; empty when not joined
  int64_t start_ns = 0;
  int64_t end_ns = 0;  // end_ns <= start_ns: zero length, left out of busy time and windows
  int stream = 0;
  Kind kind = Kind::kCompute;
  int step = 0;
  int call_index = -1;  // plan call it belongs to; -1 (or out of range): none, "unattributed"
};

// Analytic cost of plan call i (index = TraceEvent::call_index) for one step.
struct CallModel {
  std::string name;
  std::string op;
  double bytes = 0;  // fewest bytes the call must read + write in device memory
  double flops = 0;
};

// The least time one more kernel adds to a chain of kernels that each wait for everything the one
// before wrote (programmatic dependent launch: the grid's completion, its writes made visible, the
// next grid released, one L2 round trip), measured on the H200 with no other work: 1.14 µs
// (bench/results/2026-12-02-boundary-cost.md).
inline constexpr double kH200HandoverNs = 1140;

// Roofs of the device; the defaults are the H200's measured copy bandwidth, dense bf16 peak and
// kernel handover.
struct Ceilings {
  double bytes_per_s = 4.28e12;
  double flops_per_s = 783e12;
  // What one dependent kernel handover costs (kH200HandoverNs); 0: not known (the CPU), and the
  // report leaves the handover floor out.
  double handover_ns = kH200HandoverNs;
  // handover_ns was measured on this GPU (`roofline profile --calibrate`, or its cache) rather
  // than taken from the H200's: the report says which.
  bool handover_calibrated = false;
};

struct AnalysisOptions {
  // Idle stretches shorter than this are laid on the CPU not submitting fast enough (launch
  // latency); longer ones are syncs, host work or waiting for requests.
  double launch_gap_threshold_ns = 20e3;
  // Steps to analyse (e.g. leave out warm-up); empty: every step in the trace. The call models
  // describe one step, so the analysed steps should share one shape (e.g. decode steps).
  std::vector<int> steps;
};

struct ProfileReport {
  int num_steps = 0;  // analysed steps that have events

  // A step's window runs from its first event's start to its last event's end; totals are summed
  // over the analysed steps. Busy time is the union of all events, not the sum.
  double total_ns = 0;
  double busy_ns = 0;
  double busy_fraction = 0;
  std::vector<double> step_busy_fraction;  // one per analysed step, by ascending step number

  // Idle stretches of the device (no event of any stream running) inside the step windows.
  double gap_ns = 0;
  // (bucket upper bound in µs, number of idle stretches no longer than it and longer than the
  // previous bound); bounds 1, 2, 5, 10, 20, 50, 100, +inf.
  std::vector<std::pair<double, int64_t>> gap_histogram;
  // Idle stretches shorter than the launch-gap threshold, summed. Counted on the device-wide union
  // rather than per stream: a short pause of one stream covered by another did not cost time.
  double small_gap_ns = 0;

  // Communication: union of communication events, the part of it under some compute kernel, and
  // their ratio (0 when there is no communication).
  double comm_ns = 0;
  double comm_hidden_ns = 0;
  double comm_overlap_fraction = 0;

  struct KernelRow {
    std::string name;
    std::string op;  // op of the first event with this name
    int64_t calls = 0;
    // Busy time attributed to it: its durations, less where it overlapped an earlier kernel of its
    // stream (launched early by programmatic dependent launch, it waited), split with other
    // streams' kernels where they overlap. Summed over kernels it is the busy time.
    double total_ns = 0;
    double share = 0;  // of the busy time
    // Share the cost model expects: each call's ideal time, split among the kernels it launched
    // in proportion to their measured time, over the ideal time of all steps. 0 for kernels not
    // joined to a call.
    double expected_share = 0;
    bool unexpected = false;  // share > 1.5 × expected_share and share > 2 %
  };
  std::vector<KernelRow> top_kernels;  // every kernel name, by total time, longest first

  // Speed of light, per step (measured times are averaged over the analysed steps).
  struct SolRow {
    std::string name;  // call name (per_call) or op kind (per_op)
    std::string op;
    double measured_ns = 0;  // busy time attributed to it (see the file comment)
    double ideal_ns = 0;     // max(bytes / bandwidth, flops / peak)
    double excess_ns = 0;    // measured - ideal; negative when faster than the model claims
  };
  std::vector<SolRow> per_call;  // every modelled call, by excess, largest first
  std::vector<SolRow> per_op;    // summed per op kind, by excess, largest first

  // Compute kernels a step (averaged over the analysed steps) and the least time a chain of that
  // many dependent kernels takes, whatever they compute: kernels_per_step × Ceilings::handover_ns.
  // Not a term of the identity above (bytes can stream during a handover): what only fewer
  // kernels, not faster ones, remove from a latency-bound step.
  double kernels_per_step = 0;
  double handover_floor_ns = 0;
  bool handover_calibrated = false;  // Ceilings::handover_calibrated of the analysis

  double ideal_step_ns = 0;     // Σ ideal over all modelled calls
  double measured_step_ns = 0;  // total_ns / num_steps
  double launch_gap_ns = 0;     // small_gap_ns / num_steps
  double other_gap_ns = 0;      // longer idle stretches per step
  double unattributed_ns = 0;   // busy time per step of events joined to no call
};

ProfileReport analyze(const std::vector<TraceEvent>& events, const std::vector<CallModel>& calls,
                      const Ceilings& ceilings, const AnalysisOptions& options);

// A compact text table: busy %, gaps, overlap, top kernels (flagged), the distance to the speed of
// light ranked by op, and a closing "measured X ms vs roofline Y ms: Z % of the speed of light".
std::string format_report(const ProfileReport& report);

// The least time `kernels` dependent kernels take at handover_ns a handover, against a measured
// step of step_ns, as `roofline profile`'s report and `roofline bench` say it: "as a chain of
// dependent kernels they take at least X ms (Y % of the measured step) at Z us a handover (the
// H200's, measured | measured on this GPU)". Kernels and handover_ns must be positive.
std::string handover_floor_text(double kernels, double handover_ns, bool handover_calibrated,
                                double step_ns);

// `roofline bench`'s roofline line, after "roofline       ": the step's analytic `bytes` at the
// H200's copy ceiling (Ceilings{}.bytes_per_s, the figure the goals are set against) and the share
// of the measured step (step_ms) that is; then, where `roofline profile --calibrate` has cached
// this GPU's own copy ceiling (own_bytes_per_s > 0), the same at that ceiling; else, on a GPU whose
// name (device_key, ceilings_device_key's; empty: unknown, nothing said) does not name an H200,
// that the H200's figure is not this GPU's and how to measure its own. bytes and step_ms must be
// positive.
std::string bench_roofline_text(double bytes, double step_ms, const std::string& device_key,
                                double own_bytes_per_s);

// The capture's cost, as `roofline profile` prints it: "capture overhead: T ms per step with
// CUPTI, U ms before CUPTI was loaded: +X %", and, when X exceeds kCaptureOverheadBudget, a second
// line that says what the excess does to the figures below it and why: with CUDA graphs CUPTI
// timestamps every graph-launched kernel in software on GPUs before Blackwell (its hardware
// kernel tracing is Blackwell-only), so each kernel's time and the gaps around it carry that cost;
// the untraced step is the figure to compare.
inline constexpr double kCaptureOverheadBudget = 0.03;
std::string capture_overhead_text(double traced_ms_per_step, double untraced_ms_per_step,
                                  bool cuda_graphs);

// Sampled tracing (`roofline profile` with CUDA graphs): CUPTI is attached for each traced step
// alone and detached after it; untraced replays of the step's graph between traced steps keep the
// tracing's cost within a budget of the window's untraced time.
//
// How many replays of `replay_ms` each to run now so that extra_ms / untraced_ms <= budget, where
// extra_ms is what tracing has added so far (each traced step's wall time with attach and detach,
// less the untraced step) and untraced_ms the untraced time so far (the traced steps' untraced
// equivalents and the replays run). 0 when already within; budget and replay_ms must be positive.
int64_t untraced_replays_for_budget(double extra_ms, double untraced_ms, double replay_ms,
                                    double budget);

// How a profile was captured and what the capture cost: `roofline profile`'s capture lines
// (capture_text) and report_json's "capture" object (export.h).
struct CaptureSummary {
  std::string method;  // "cupti" (GPU) or "host clock" (CPU)
  bool cuda_graphs = false;
  bool sampled = false;  // CUPTI attached for each traced step alone, replays between
  int64_t traced_steps = 0;
  int steps_joined = 0;
  int64_t steps_unmatched = 0;
  int64_t dropped_records = 0;
  double ms_per_step = 0;           // a traced step, host wall time
  double ms_per_step_untraced = 0;  // the same step untraced; 0: not measured (CPU)
  double ms_per_step_graph_floor = 0;
  // Sampled only: the replays run between traced steps, and the whole window (traced steps,
  // attach / detach, replays) with what tracing added to it (see untraced_replays_for_budget).
  int64_t untraced_replays = 0;
  double window_ms = 0;
  double window_extra_ms = 0;
  double overhead_budget = kCaptureOverheadBudget;
};
// Sampled: "capture overhead: sampled ...: the window took W ms, E ms (+X %) more than untraced
// (budget B %)", then what a traced step itself costs, and, when that exceeds the budget, that the
// kernel times and gaps below carry it (they are the traced steps'). Traced consecutively:
// capture_overhead_text. Nothing untraced measured (the CPU's host clock): "".
std::string capture_text(const CaptureSummary& c);

// Chrome / Perfetto trace-event JSON: {"traceEvents": [{"ph": "X", "ts": µs, "dur": µs, "pid": 0,
// "tid": stream, "args": {"op", "call_index", "step"}}, ...]}, one event per input, in input order.
std::string chrome_trace_json(const std::vector<TraceEvent>& events);

}  // namespace roofline
