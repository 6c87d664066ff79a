// Trace analysis: one sweep over each step's interval boundaries yields busy time, idle stretches,
// hidden communication and the attribution of busy time to calls, so that the distance identity in
// analysis.h holds by construction rather than by coincidence.
#include "profiler/analysis.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

namespace roofline {
namespace {

// Histogram bucket upper bounds in µs; the last catches everything longer.
constexpr double kGapBucketsUs[] = {1,  2,  5,   10,
                                    20, 50, 100, std::numeric_limits<double>::infinity()};
// A kernel is flagged when it takes this many times its expected share, and at least kMinShare:
// below that, a slow kernel cannot move the step much.
constexpr double kUnexpectedRatio = 1.5;
constexpr double kMinShare = 0.02;

int64_t duration_ns(const TraceEvent& e) { return std::max<int64_t>(0, e.end_ns - e.start_ns); }

double ideal_ns(const CallModel& c, const Ceilings& roof) {
  const double mem = roof.bytes_per_s > 0 ? c.bytes / roof.bytes_per_s : 0;
  const double math = roof.flops_per_s > 0 ? c.flops / roof.flops_per_s : 0;
  return std::max(mem, math) * 1e9;
}

// Adds one idle stretch to the histogram.
void add_gap(std::vector<std::pair<double, int64_t>>& histogram, int64_t gap_ns) {
  const double gap_us = static_cast<double>(gap_ns) / 1e3;
  for (auto& [bound_us, count] : histogram) {
    if (gap_us <= bound_us) {
      ++count;
      return;
    }
  }
}

// Result of sweeping one step.
struct StepSweep {
  int64_t window_ns = 0;
  int64_t busy_ns = 0;
  int64_t comm_ns = 0;
  int64_t comm_hidden_ns = 0;
  int64_t small_gap_ns = 0;
};

// Sweeps the events of one step (indices into `events`), adding each event's attributed busy time
// to `attributed` and each idle stretch to `histogram`.
StepSweep sweep_step(const std::vector<TraceEvent>& events, const std::vector<size_t>& indices,
                     double launch_gap_threshold_ns, std::vector<double>& attributed,
                     std::vector<std::pair<double, int64_t>>& histogram) {
  StepSweep out;
  // (time, is_start, event): at equal times ends come first, so back-to-back kernels never
  // look concurrent.
  struct Boundary {
    int64_t time;
    bool is_start;
    size_t event;
  };
  std::vector<Boundary> boundaries;
  boundaries.reserve(indices.size() * 2);
  int64_t first = std::numeric_limits<int64_t>::max();
  int64_t last = std::numeric_limits<int64_t>::min();
  for (size_t i : indices) {
    const TraceEvent& e = events[i];
    // A zero-length event is an instant: it neither keeps the device busy nor stretches the
    // window (and its end, sorted before its start, would close an event never opened).
    if (duration_ns(e) == 0) continue;
    const int64_t end = e.start_ns + duration_ns(e);
    first = std::min(first, e.start_ns);
    last = std::max(last, end);
    boundaries.push_back({e.start_ns, true, i});
    boundaries.push_back({end, false, i});
  }
  if (boundaries.empty()) return out;
  out.window_ns = last - first;
  std::sort(boundaries.begin(), boundaries.end(), [](const Boundary& a, const Boundary& b) {
    if (a.time != b.time) return a.time < b.time;
    return a.is_start < b.is_start;
  });

  // Active events per kind; few at a time (about one per stream), so plain vectors.
  std::vector<size_t> compute, copies, comm, stream_owners;
  auto active_of = [&](TraceEvent::Kind kind) -> std::vector<size_t>& {
    switch (kind) {
      case TraceEvent::Kind::kCompute:
        return compute;
      case TraceEvent::Kind::kMemcpy:
        return copies;
      case TraceEvent::Kind::kCommunication:
        return comm;
    }
    return compute;
  };

  int64_t prev = boundaries.front().time;
  for (const Boundary& b : boundaries) {
    const int64_t len = b.time - prev;
    if (len > 0) {
      const std::vector<size_t>* owners =
          !compute.empty() ? &compute : (!copies.empty() ? &copies : &comm);
      if (owners->empty()) {
        // Nothing runs: one idle stretch (the next boundary after an idle one is always a start).
        add_gap(histogram, len);
        if (static_cast<double>(len) < launch_gap_threshold_ns) out.small_gap_ns += len;
      } else {
        out.busy_ns += len;
        // One owner per stream: on a stream, a kernel that overlaps the one before it was
        // launched early by programmatic dependent launch and mostly waits for it (its
        // griddepcontrol.wait), so the stretch is the earlier kernel's. Streams share equally.
        stream_owners.clear();
        for (size_t i : *owners) {
          bool merged = false;
          for (size_t& o : stream_owners) {
            if (events[o].stream == events[i].stream) {
              if (events[i].start_ns < events[o].start_ns) o = i;
              merged = true;
              break;
            }
          }
          if (!merged) stream_owners.push_back(i);
        }
        const double each = static_cast<double>(len) / static_cast<double>(stream_owners.size());
        for (size_t i : stream_owners) attributed[i] += each;
      }
      if (!comm.empty()) {
        out.comm_ns += len;
        if (!compute.empty()) out.comm_hidden_ns += len;
      }
    }
    prev = b.time;
    std::vector<size_t>& active = active_of(events[b.event].kind);
    if (b.is_start) {
      active.push_back(b.event);
    } else {
      active.erase(std::find(active.begin(), active.end(), b.event));
    }
  }
  return out;
}

bool by_excess(const ProfileReport::SolRow& a, const ProfileReport::SolRow& b) {
  if (a.excess_ns != b.excess_ns) return a.excess_ns > b.excess_ns;
  return a.name < b.name;
}

}  // namespace

ProfileReport analyze(const std::vector<TraceEvent>& events, const std::vector<CallModel>& calls,
                      const Ceilings& ceilings, const AnalysisOptions& options) {
  ProfileReport r;
  for (double bound : kGapBucketsUs) r.gap_histogram.emplace_back(bound, 0);

  const std::set<int> wanted(options.steps.begin(), options.steps.end());
  std::map<int, std::vector<size_t>> by_step;
  for (size_t i = 0; i < events.size(); ++i) {
    if (wanted.empty() || wanted.count(events[i].step)) by_step[events[i].step].push_back(i);
  }
  r.num_steps = static_cast<int>(by_step.size());

  // Sweep every step.
  std::vector<double> attributed(events.size(), 0.0);
  int64_t total = 0, busy = 0, comm = 0, hidden = 0, small_gaps = 0;
  for (const auto& [step, indices] : by_step) {
    const StepSweep s =
        sweep_step(events, indices, options.launch_gap_threshold_ns, attributed, r.gap_histogram);
    total += s.window_ns;
    busy += s.busy_ns;
    comm += s.comm_ns;
    hidden += s.comm_hidden_ns;
    small_gaps += s.small_gap_ns;
    r.step_busy_fraction.push_back(
        s.window_ns > 0 ? static_cast<double>(s.busy_ns) / static_cast<double>(s.window_ns) : 0);
  }
  r.total_ns = static_cast<double>(total);
  r.busy_ns = static_cast<double>(busy);
  r.busy_fraction = total > 0 ? r.busy_ns / r.total_ns : 0;
  r.gap_ns = static_cast<double>(total - busy);
  r.small_gap_ns = static_cast<double>(small_gaps);
  r.comm_ns = static_cast<double>(comm);
  r.comm_hidden_ns = static_cast<double>(hidden);
  r.comm_overlap_fraction = comm > 0 ? r.comm_hidden_ns / r.comm_ns : 0;
  int64_t kernel_events = 0;
  for (const auto& [step, indices] : by_step)
    for (size_t i : indices)
      if (events[i].kind == TraceEvent::Kind::kCompute && duration_ns(events[i]) > 0)
        ++kernel_events;
  r.kernels_per_step = r.num_steps > 0 ? static_cast<double>(kernel_events) / r.num_steps : 0;
  r.handover_floor_ns = r.kernels_per_step * std::max(ceilings.handover_ns, 0.0);
  r.handover_calibrated = ceilings.handover_calibrated;

  // Attribute to calls; everything not joined to a modelled call is "unattributed".
  const double steps = std::max(1, r.num_steps);
  auto call_of = [&](const TraceEvent& e) -> int {
    return e.call_index >= 0 && static_cast<size_t>(e.call_index) < calls.size() ? e.call_index
                                                                                 : -1;
  };
  std::vector<double> call_measured(calls.size(), 0.0);
  std::vector<double> call_raw_ns(calls.size(), 0.0);  // its kernels' attributed time
  double unattributed = 0;
  for (const auto& [step, indices] : by_step) {
    for (size_t i : indices) {
      const int c = call_of(events[i]);
      if (c < 0) {
        unattributed += attributed[i];
      } else {
        call_measured[c] += attributed[i];
        call_raw_ns[c] += attributed[i];
      }
    }
  }

  // Speed of light per call and per op.
  std::vector<double> call_ideal(calls.size());
  std::map<std::string, ProfileReport::SolRow> ops;
  for (size_t c = 0; c < calls.size(); ++c) {
    call_ideal[c] = ideal_ns(calls[c], ceilings);
    ProfileReport::SolRow row{calls[c].name, calls[c].op, call_measured[c] / steps, call_ideal[c],
                              0};
    row.excess_ns = row.measured_ns - row.ideal_ns;
    r.ideal_step_ns += row.ideal_ns;
    ProfileReport::SolRow& op = ops[calls[c].op];
    op.name = op.op = calls[c].op;
    op.measured_ns += row.measured_ns;
    op.ideal_ns += row.ideal_ns;
    op.excess_ns += row.excess_ns;
    r.per_call.push_back(std::move(row));
  }
  for (auto& [name, row] : ops) r.per_op.push_back(row);
  std::sort(r.per_call.begin(), r.per_call.end(), by_excess);
  std::sort(r.per_op.begin(), r.per_op.end(), by_excess);

  r.measured_step_ns = r.num_steps > 0 ? r.total_ns / steps : 0;
  r.launch_gap_ns = r.small_gap_ns / steps;
  r.other_gap_ns = (r.gap_ns - r.small_gap_ns) / steps;
  r.unattributed_ns = unattributed / steps;

  // Kernels by name.
  std::unordered_map<std::string, size_t> row_of;
  std::vector<ProfileReport::KernelRow>& kernels = r.top_kernels;
  std::vector<double> kernel_ideal;
  double all_ns = 0;
  for (const auto& [step, indices] : by_step) {
    for (size_t i : indices) {
      const TraceEvent& e = events[i];
      auto [it, inserted] = row_of.emplace(e.name, kernels.size());
      if (inserted) {
        kernels.push_back({e.name, e.op, 0, 0, 0, 0, false});
        kernel_ideal.push_back(0);
      }
      // Busy time attributed to it (its duration less what it spent overlapping the kernel
      // before it on its stream, i.e. waiting for it): what the step would save without it.
      const double d = attributed[i];
      kernels[it->second].calls += 1;
      kernels[it->second].total_ns += d;
      all_ns += d;
      const int c = call_of(e);
      // The call's ideal over all analysed steps, split among its kernels by measured time.
      if (c >= 0 && call_raw_ns[c] > 0) {
        kernel_ideal[it->second] += call_ideal[c] * steps * d / call_raw_ns[c];
      }
    }
  }
  const double ideal_all_ns = r.ideal_step_ns * steps;
  for (size_t k = 0; k < kernels.size(); ++k) {
    ProfileReport::KernelRow& row = kernels[k];
    row.share = all_ns > 0 ? row.total_ns / all_ns : 0;
    row.expected_share = ideal_all_ns > 0 ? kernel_ideal[k] / ideal_all_ns : 0;
    row.unexpected = row.share > kUnexpectedRatio * row.expected_share && row.share > kMinShare;
  }
  std::sort(kernels.begin(), kernels.end(), [](const auto& a, const auto& b) {
    if (a.total_ns != b.total_ns) return a.total_ns > b.total_ns;
    return a.name < b.name;
  });
  return r;
}

namespace {

std::string printf_string(const char* format, auto... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, format, args...);
  return buffer;
}

double ms(double ns) { return ns / 1e6; }

}  // namespace

std::string capture_overhead_text(double traced_ms_per_step, double untraced_ms_per_step,
                                  bool cuda_graphs) {
  const double overhead = traced_ms_per_step / std::max(1e-9, untraced_ms_per_step) - 1.0;
  std::string out = printf_string(
      "capture overhead: %.3f ms per step with CUPTI, %.3f ms before CUPTI was loaded: %+.1f %%\n",
      traced_ms_per_step, untraced_ms_per_step, 100.0 * overhead);
  if (overhead <= kCaptureOverheadBudget) return out;
  out += printf_string(
      "  above the %.0f %% budget: the kernel times and gaps below carry %.3f ms a step of tracing "
      "cost%s; compare steps by the untraced %.3f ms\n",
      100.0 * kCaptureOverheadBudget, traced_ms_per_step - untraced_ms_per_step,
      cuda_graphs ? " (before Blackwell, CUPTI timestamps every graph-launched kernel in software)"
                  : "",
      untraced_ms_per_step);
  return out;
}

int64_t untraced_replays_for_budget(double extra_ms, double untraced_ms, double replay_ms,
                                    double budget) {
  if (!(budget > 0) || !(replay_ms > 0)) return 0;
  const double missing_ms = extra_ms / budget - untraced_ms;
  if (!(missing_ms > 0)) return 0;
  const double n = std::ceil(missing_ms / replay_ms);
  return n >= 1e15 ? int64_t{1000000000000000} : static_cast<int64_t>(n);
}

std::string capture_text(const CaptureSummary& c) {
  if (!(c.ms_per_step_untraced > 0)) return "";
  if (!c.sampled)
    return capture_overhead_text(c.ms_per_step, c.ms_per_step_untraced, c.cuda_graphs);
  const double untraced_ms = c.window_ms - c.window_extra_ms;
  std::string out = printf_string(
      "capture overhead: sampled, CUPTI attached for each of %lld traced steps alone and detached "
      "between them, %lld untraced replays of the step's graph in between: the window took %.1f "
      "ms, %.1f ms (%+.1f %%) more than untraced (budget %.0f %%)\n",
      static_cast<long long>(c.traced_steps), static_cast<long long>(c.untraced_replays),
      c.window_ms, c.window_extra_ms, 100.0 * c.window_extra_ms / std::max(1e-9, untraced_ms),
      100.0 * c.overhead_budget);
  const double step_overhead = c.ms_per_step / c.ms_per_step_untraced - 1.0;
  out += printf_string("  a traced step itself: %.3f ms against %.3f ms untraced (%+.1f %%)",
                       c.ms_per_step, c.ms_per_step_untraced, 100.0 * step_overhead);
  if (step_overhead <= c.overhead_budget) return out + "\n";
  return out + printf_string(
                   ": the kernel times and gaps below are the traced steps' and carry %.3f ms a "
                   "step of tracing cost (before Blackwell, CUPTI timestamps every "
                   "graph-launched kernel in software); compare steps by the untraced %.3f ms\n",
                   c.ms_per_step - c.ms_per_step_untraced, c.ms_per_step_untraced);
}

std::string format_report(const ProfileReport& r) {
  // How many kernel rows to print: the rest are usually a long tail of tiny kernels.
  constexpr size_t kTopKernels = 15;
  std::string out;
  out += printf_string("steps %d, window %.3f ms, busy %.3f ms = %.1f %%\n", r.num_steps,
                       ms(r.total_ns), ms(r.busy_ns), 100 * r.busy_fraction);
  out += printf_string(
      "idle %.3f ms, of it %.3f ms in stretches shorter than the launch-gap "
      "threshold\n",
      ms(r.gap_ns), ms(r.small_gap_ns));
  out += "idle stretches (us):";
  for (const auto& [bound, count] : r.gap_histogram) {
    if (bound == std::numeric_limits<double>::infinity()) {
      out += printf_string(" >100:%" PRId64, count);
    } else {
      out += printf_string(" <=%g:%" PRId64, bound, count);
    }
  }
  out += "\n";
  if (r.comm_ns > 0) {
    out += printf_string("communication %.3f ms, %.3f ms under compute = %.1f %% hidden\n",
                         ms(r.comm_ns), ms(r.comm_hidden_ns), 100 * r.comm_overlap_fraction);
  } else {
    out += "communication none\n";
  }

  out +=
      "\ntop kernels (busy time each accounts for)                calls    total ms  share  "
      "expected\n";
  for (size_t k = 0; k < r.top_kernels.size() && k < kTopKernels; ++k) {
    const auto& row = r.top_kernels[k];
    std::string name = row.name.size() > 56 ? row.name.substr(0, 53) + "..." : row.name;
    out += printf_string("%-56s %6" PRId64 " %11.3f %5.1f%% %7.1f%%%s\n", name.c_str(), row.calls,
                         ms(row.total_ns), 100 * row.share, 100 * row.expected_share,
                         row.unexpected ? "  << unexpected" : "");
  }
  if (r.top_kernels.size() > kTopKernels) {
    out += printf_string("(%zu more kernels)\n", r.top_kernels.size() - kTopKernels);
  }

  const double distance = r.measured_step_ns - r.ideal_step_ns;
  auto of_distance = [&](double ns) { return distance != 0 ? 100 * ns / distance : 0; };
  out +=
      "\ndistance to the speed of light, per step     excess ms  of distance  measured ms  "
      "ideal ms\n";
  for (const auto& row : r.per_op) {
    out += printf_string("  %-42s %10.4f %10.1f %% %12.4f %9.4f\n", row.name.c_str(),
                         ms(row.excess_ns), of_distance(row.excess_ns), ms(row.measured_ns),
                         ms(row.ideal_ns));
  }
  out += printf_string("  %-42s %10.4f %10.1f %%\n", "launch gaps", ms(r.launch_gap_ns),
                       of_distance(r.launch_gap_ns));
  out += printf_string("  %-42s %10.4f %10.1f %%\n", "other idle", ms(r.other_gap_ns),
                       of_distance(r.other_gap_ns));
  out += printf_string("  %-42s %10.4f %10.1f %%\n", "not joined to a plan call",
                       ms(r.unattributed_ns), of_distance(r.unattributed_ns));
  const double sol = r.measured_step_ns > 0 ? 100 * r.ideal_step_ns / r.measured_step_ns : 0;
  out += printf_string("measured %.4f ms vs roofline %.4f ms: %.1f %% of the speed of light\n",
                       ms(r.measured_step_ns), ms(r.ideal_step_ns), sol);
  if (r.handover_floor_ns > 0 && r.measured_step_ns > 0) {
    out += printf_string("kernels %.1f a step: ", r.kernels_per_step) +
           handover_floor_text(r.kernels_per_step, r.handover_floor_ns / r.kernels_per_step,
                               r.handover_calibrated, r.measured_step_ns) +
           ", whatever they compute; only fewer kernels lower that\n";
  }
  return out;
}

std::string handover_floor_text(double kernels, double handover_ns, bool handover_calibrated,
                                double step_ns) {
  const double floor_ns = kernels * handover_ns;
  return printf_string(
      "as a chain of dependent kernels they take at least %.4f ms (%.1f %% of the measured step) "
      "at %.2f us a handover (%s)",
      ms(floor_ns), step_ns > 0 ? 100 * floor_ns / step_ns : 0.0, handover_ns / 1e3,
      handover_calibrated ? "measured on this GPU" : "the H200's, measured");
}

std::string bench_roofline_text(double bytes, double step_ms, const std::string& device_key,
                                double own_bytes_per_s) {
  const auto at = [&](double bytes_per_s) { return bytes / bytes_per_s * 1e3; };  // ms
  const double h200_bytes_per_s = Ceilings{}.bytes_per_s;
  std::string out = printf_string(
      "%.3f ms at the H200's %.2f TB/s copy ceiling: this step runs at %.1f%% of it",
      at(h200_bytes_per_s), h200_bytes_per_s / 1e12, 100 * at(h200_bytes_per_s) / step_ms);
  if (own_bytes_per_s > 0) {
    return out + printf_string("; %.3f ms at this GPU's calibrated %.2f TB/s: %.1f%% of it",
                               at(own_bytes_per_s), own_bytes_per_s / 1e12,
                               100 * at(own_bytes_per_s) / step_ms);
  }
  if (!device_key.empty() && device_key.find("H200") == std::string::npos) {
    out += "; this GPU (" + device_key +
           ") is not an H200 and its own ceiling is not calibrated: `roofline profile --device "
           "cuda --calibrate` measures and caches it, and this line then adds it";
  }
  return out;
}

std::string chrome_trace_json(const std::vector<TraceEvent>& events) {
  nlohmann::json list = nlohmann::json::array();
  for (const TraceEvent& e : events) {
    const char* category = e.kind == TraceEvent::Kind::kCompute         ? "compute"
                           : e.kind == TraceEvent::Kind::kCommunication ? "communication"
                                                                        : "memcpy";
    list.push_back({{"name", e.name},
                    {"cat", category},
                    {"ph", "X"},
                    {"ts", static_cast<double>(e.start_ns) / 1e3},
                    {"dur", static_cast<double>(duration_ns(e)) / 1e3},
                    {"pid", 0},
                    {"tid", e.stream},
                    {"args", {{"op", e.op}, {"call_index", e.call_index}, {"step", e.step}}}});
  }
  nlohmann::json trace = {{"traceEvents", std::move(list)}, {"displayTimeUnit", "ns"}};
  return trace.dump();
}

}  // namespace roofline
