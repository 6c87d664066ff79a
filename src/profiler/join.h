// Joining raw device activity (CUPTI kernel, copy and set records) to plan calls and steps.
//
// CUPTI reports each device interval with the correlation id of the host API call that launched
// it; a kernel replayed inside a CUDA graph carries the id of the graph launch, so one id then
// covers a whole step. The join therefore works by order rather than by id:
// 1. One eager step with a marker (cudaEventRecordWithFlags, which only the CUDA backend's call
//    timing calls: its other events, and every other library's, are cudaEventRecord and are not
//    markers) before and after every plan call shows which
//    activities each call launches, in device order: learn_call_sequence turns it into the call
//    index of each activity of a step (-1 for activity outside every call: input upload, logits
//    download). Only this step needs the host API records (their cost per launch is what makes
//    tracing expensive, so the tracer records them for this step alone).
// 2. Every measured step (eager or replayed) runs the same activities in the same order on one
//    stream, and each step ends with a synchronous copy of its logits, so its device activity lies
//    inside the host time span of its step() call. join_steps splits the activity into steps by
//    device start time and gives the k-th activity of each name in a step, in device order, the
//    call of the k-th activity of that name in the learned sequence. Matching per name rather
//    than by position keeps steps joined when activities of different names start in another
//    order than in the learning step (kernels of a programmatic-dependent-launch chain overlap,
//    and two that start within the timer's resolution may swap). A step whose count of some
//    kernel of the learning step differs from it is left unattributed, counted, and the first
//    one described; copies and sets counted differently (a graph replay uploads its inputs in
//    other pieces than an eager step) and kernels the learning step did not run (a decode graph's
//    sampling kernel) only stay outside every call.
// Host and device times share one clock (the CUPTI tracer registers the host steady clock as its
// timestamp source), in nanoseconds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/analysis.h"

namespace roofline {

// One device interval as CUPTI reports it.
struct DeviceActivity {
  std::string name;  // kernel name, or "memcpy HtoD" / "memcpy DtoH" / "memset"
  TraceEvent::Kind kind = TraceEvent::Kind::kCompute;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int stream = 0;
  uint32_t correlation = 0;  // of the host API call that launched it
};

// What a kernel record is to the analysis: NCCL's kernels (ncclKernel_*, ncclDevKernel_*: their
// collectives and point-to-point copies) are communication, whose overlap with compute the report
// measures; every other kernel is compute.
TraceEvent::Kind kernel_kind(const std::string& name);

// One host API call (runtime or driver) that CUPTI recorded.
struct HostApiCall {
  uint32_t correlation = 0;
  int64_t start_ns = 0;
  // cudaEventRecordWithFlags: the plan-call brackets of the learning step (only the CUDA
  // backend's call timing records its events that way; see learn_call_sequence).
  bool is_marker = false;
};

// The host time span of one step's call: its device activity runs inside it.
struct StepWindow {
  int step = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

struct CallSequence {
  std::vector<int> call_index;     // per activity of a step, in device order; -1: outside calls
  std::vector<std::string> names;  // the activity names, to check a measured step against
  std::vector<TraceEvent::Kind> kinds;  // kernel (compute) or copy / set, per activity
  int64_t markers = 0;  // the markers the learning step's window held (what a refusal reports)
};

// The learning step: activities launched inside `window`, ordered on the device, each assigned
// the plan call whose markers enclose its launch. The window's markers, in host order, are one
// at the step's start, then one before and one after each of the num_calls calls (what the CUDA
// backend records when call timing is on): 2 · num_calls + 1. Any other count: an empty sequence.
// The count is why the markers are an API of their own: a step also records events of its own
// (the pinned staging's, the outputs' copy), and a bracket must not be confused with them.
CallSequence learn_call_sequence(const std::vector<DeviceActivity>& activity,
                                 const std::vector<HostApiCall>& api, const StepWindow& window,
                                 int num_calls);

struct JoinResult {
  std::vector<TraceEvent> events;  // every activity of the joined steps, with step and call
  int steps_joined = 0;
  int steps_unmatched = 0;  // activity count or names differ from the sequence: call_index -1
  // The first unmatched step, in words: its activity count against the sequence's and the first
  // name whose count differs ("" when every step joined).
  std::string first_mismatch;
  int64_t activities_outside_steps = 0;  // started outside every window (left out)
};

JoinResult join_steps(const std::vector<DeviceActivity>& activity,
                      const std::vector<StepWindow>& steps, const CallSequence& sequence);

// The activity left after the first `launches` CUDA-graph launches recorded (a warm-up before the
// traced step). Every kernel of one graph launch carries that launch's correlation id, and ids
// grow with the host's API calls, so the warm-up's launches are the `launches` smallest ids among
// the kernels, and everything launched after them has a larger id. Fewer kernel ids than that:
// nothing is left.
std::vector<DeviceActivity> after_graph_launches(std::vector<DeviceActivity> activity,
                                                 int launches);

}  // namespace roofline
