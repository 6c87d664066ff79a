// profile_decode (roofline/profile.h): the body of `roofline profile`, as a library call.
#include "roofline/profile.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/decode_setup.h"
#include "engine/profile_internal.h"
#include "profiler/analysis.h"
#include "profiler/cupti_tracer.h"
#include "profiler/export.h"
#include "profiler/join.h"
#include "runtime/calibration.h"

namespace roofline {

Status check_ceiling_overrides(double bandwidth_gbps, double peak_tflops,
                               CeilingOverrideNames names) {
  for (const auto& [name, v] :
       {std::pair{names.bandwidth, bandwidth_gbps}, std::pair{names.peak, peak_tflops}})
    if (!(v >= 0) || std::isinf(v)) {
      char got[32];
      std::snprintf(got, sizeof got, "%g", v);
      return invalid_argument(std::string(name) +
                              " must be finite and not negative (0: none), got " + got);
    }
  return ok_status();
}

// The ceilings a profile measures against: --calibrate measures this machine now (and caches the
// result), else the cached calibration of this device, else the H200's measured defaults; explicit
// --bandwidth-gbps / --peak-tflops override either.
StatusOr<std::pair<Ceilings, std::string>> profile_ceilings(const std::string& device,
                                                            bool calibrate, double bandwidth_gbps,
                                                            double peak_tflops) {
  Ceilings ceilings;
  std::string source;
  const std::string cache = default_ceilings_cache_path();
  if (calibrate) {
    std::fprintf(stderr, "calibrating %s (copy bandwidth, GEMM peak%s)...\n", device.c_str(),
                 device == "cpu" ? "" : ", kernel handover");
    ROOFLINE_ASSIGN_OR_RETURN(CalibratedCeilings c, calibrate_ceilings(device));
    ceilings = c.ceilings;
    source = "calibrated now on " + c.device;
    if (!cache.empty()) {
      ROOFLINE_RETURN_IF_ERROR(save_cached_ceilings(cache, c));
      source += ", cached in " + cache;
    }
  } else {
    std::string key;  // without a cache the defaults need none: the device is not asked
    if (!cache.empty()) {
      ROOFLINE_ASSIGN_OR_RETURN(key, ceilings_device_key(device));
    }
    ROOFLINE_ASSIGN_OR_RETURN(auto resolved, cached_or_default_ceilings(cache, key));
    ceilings = resolved.first;
    source = resolved.second;
  }
  if (device == "cpu") ceilings.handover_ns = 0;  // a kernel is a function call there
  if (bandwidth_gbps > 0) ceilings.bytes_per_s = bandwidth_gbps * 1e9;
  if (peak_tflops > 0) ceilings.flops_per_s = peak_tflops * 1e12;
  if (bandwidth_gbps > 0 || peak_tflops > 0)
    source += "; overridden by --bandwidth-gbps / --peak-tflops";
  return std::make_pair(ceilings, source);
}

void analyse_into(const std::vector<TraceEvent>& events, const std::vector<CallModel>& models,
                  const Ceilings& ceilings, int timeline_step, ProfileResult* out,
                  const CaptureSummary* capture) {
  const ProfileReport report = analyze(events, models, ceilings, AnalysisOptions{});
  out->bytes_per_s = ceilings.bytes_per_s;
  out->flops_per_s = ceilings.flops_per_s;
  out->device_ms_per_step = report.total_ns / 1e6 / std::max(1, report.num_steps);
  out->report = format_report(report);
  out->report_json = report_json(report, ceilings, capture);
  out->trace_json = chrome_trace_json(events);
  out->roofline_svg = roofline_svg(report, models, ceilings);
  out->timeline_svg = timeline_svg(events, timeline_step);
}

namespace {

// The step a profile times, the one the engine runs: every sequence one token, greedy sampling
// where the logits are (inside the decode graph on the GPU), the token ids back.
struct GreedyStep {
  explicit GreedyStep(const std::vector<int32_t>& seqs) {
    for (int32_t seq : seqs) entries.push_back({seq, {3}});
    sampling.rows.resize(entries.size());
  }
  Status run(ModelRunner& r) { return r.step(entries, sampling, &sampled); }
  std::vector<StepEntry> entries;
  StepSampling sampling;
  SampledRows sampled;
};

// Sampled tracing (CUDA graphs): each step traced with CUPTI attached for it alone, then untraced
// replays of its graph until the window is back within the budget (untraced_replays_for_budget).
struct SampledWindow {
  JoinResult joined;
  double traced_ms = 0;  // the traced steps' step() calls, host wall time
  double window_ms = 0;  // everything: attach, warm-up replay, step, detach, untraced replays
  double extra_ms = 0;   // what tracing added: each sample's time less an untraced step
  int64_t replays = 0;   // untraced
  int64_t dropped = 0;   // CUPTI records lost
};

StatusOr<SampledWindow> trace_sampled(ModelRunner& r, GreedyStep& greedy, CuptiTracer& tracer,
                                      const CallSequence& seq, int64_t steps,
                                      double untraced_step_ms, double replay_ms, double budget) {
  // The untraced replays: per call (the backend's bound) and in all (past it the window stays
  // above the budget, and the report's figure says so).
  constexpr int64_t kMaxReplays = 100000;
  constexpr double kMaxReplayMs = 120e3;
  // Attached afresh, CUPTI's first graph launch is slow (measured on the H200: a 0.64 ms
  // qwen2.5-0.5b step took 2.3 ms, its kernels no longer but hundreds of us apart), so each
  // sample replays the step's graph first (kWarmLaunches launches) and leaves their records out.
  constexpr int kWarmLaunches = 2;  // replay_last_decode_graph(1): one warm-up, one timed
  // A line on stderr every kProgressNs while the window runs (each step costs ~0.1-0.7 s of
  // replays at a 3 % budget, so a long --steps takes minutes).
  constexpr int64_t kProgressNs = int64_t{5} * 1000 * 1000 * 1000;
  SampledWindow w;
  double untraced_ms = 0, replayed_ms = 0;
  int64_t last_progress_ns = CuptiTracer::now_ns();
  for (int64_t step = 0; step < steps; ++step) {
    const int64_t ta = CuptiTracer::now_ns();
    ROOFLINE_RETURN_IF_ERROR(tracer.attach());
    ROOFLINE_RETURN_IF_ERROR(r.replay_last_decode_graph(1).status());
    const int64_t t0 = CuptiTracer::now_ns();
    ROOFLINE_RETURN_IF_ERROR(greedy.run(r));
    const int64_t t1 = CuptiTracer::now_ns();
    ROOFLINE_RETURN_IF_ERROR(tracer.detach());
    CuptiTracer::Records rec = tracer.take();
    w.dropped += rec.dropped;
    rec.activity = after_graph_launches(std::move(rec.activity), kWarmLaunches);
    w.traced_ms += static_cast<double>(t1 - t0) / 1e6;
    const double sample_ms = static_cast<double>(CuptiTracer::now_ns() - ta) / 1e6;
    w.window_ms += sample_ms;
    w.extra_ms += sample_ms - untraced_step_ms;
    untraced_ms += untraced_step_ms;
    // Everything left belongs to this step. Its times are CUPTI's, consistent within one
    // attachment but not against the host clock after a re-attach (measured: a re-attached
    // step's records landed inside the first attachment's learning step), so the step's window
    // is its own records' extent, and its events are laid at its host start.
    if (!rec.activity.empty()) {
      StepWindow win{static_cast<int>(step), INT64_MAX, INT64_MIN};
      for (const DeviceActivity& a : rec.activity) {
        win.start_ns = std::min(win.start_ns, a.start_ns);
        win.end_ns = std::max(win.end_ns, a.end_ns);
      }
      JoinResult j = join_steps(rec.activity, {win}, seq);
      for (TraceEvent& e : j.events) {
        e.start_ns += t0 - win.start_ns;
        e.end_ns += t0 - win.start_ns;
        w.joined.events.push_back(std::move(e));
      }
      w.joined.steps_joined += j.steps_joined;
      w.joined.steps_unmatched += j.steps_unmatched;
      w.joined.activities_outside_steps += j.activities_outside_steps;
      if (w.joined.first_mismatch.empty()) w.joined.first_mismatch = j.first_mismatch;
    } else {
      ++w.joined.steps_unmatched;
      if (w.joined.first_mismatch.empty())
        w.joined.first_mismatch =
            "step " + std::to_string(step) + ": CUPTI recorded no activity after its warm-up";
    }
    for (int64_t owed = untraced_replays_for_budget(w.extra_ms, untraced_ms, replay_ms, budget);
         owed > 0 && replayed_ms < kMaxReplayMs;
         owed = untraced_replays_for_budget(w.extra_ms, untraced_ms, replay_ms, budget)) {
      const int64_t n = std::min(owed, kMaxReplays);
      const int64_t f0 = CuptiTracer::now_ns();
      ROOFLINE_RETURN_IF_ERROR(r.replay_last_decode_graph(n).status());
      const double ms = static_cast<double>(CuptiTracer::now_ns() - f0) / 1e6;
      replayed_ms += ms;
      w.window_ms += ms;
      untraced_ms += ms;
      w.replays += n + 1;  // replay_last_decode_graph runs one more before it times
    }
    if (const int64_t now = CuptiTracer::now_ns(); now - last_progress_ns >= kProgressNs) {
      last_progress_ns = now;
      std::fprintf(stderr, "  traced %lld of %lld steps, window %.1f s at %+.1f %%\n",
                   static_cast<long long>(step + 1), static_cast<long long>(steps),
                   w.window_ms / 1e3, 100.0 * w.extra_ms / std::max(1e-9, untraced_ms));
    }
  }
  return w;
}

}  // namespace

Status check_profile_options(const ProfileOptions& o) {
  ROOFLINE_RETURN_IF_ERROR(check_model_options(o.model));
  ROOFLINE_RETURN_IF_ERROR(check_decode_shape(o.batch, o.context, o.steps));
  ROOFLINE_RETURN_IF_ERROR(check_ceiling_overrides(o.bandwidth_gbps, o.peak_tflops));
  if (!(o.overhead_budget >= 0 && o.overhead_budget <= 1))
    return invalid_argument(
        "--overhead-budget must be in [0, 100] percent (0: trace consecutive steps)");
  return ok_status();
}

StatusOr<ProfileResult> profile_decode(const ProfileOptions& o) {
  constexpr int64_t kWarmup = 3;
  ROOFLINE_RETURN_IF_ERROR(check_profile_options(o));
  ModelOptions model = o.model;
  const bool gpu = model.device.rfind("cuda", 0) == 0;
  // Before the model loads: a calibration needs a few GiB of the device for a moment.
  auto ceilings_or = profile_ceilings(model.device, o.calibrate, o.bandwidth_gbps, o.peak_tflops);
  if (!ceilings_or.ok()) return ceilings_or.status();
  const Ceilings ceilings = ceilings_or->first;
  const std::string& ceilings_source = ceilings_or->second;
  using clock = std::chrono::steady_clock;
  // The clean baseline (GPU): the same steps in a runner of their own, timed before CUPTI is ever
  // loaded into this process. Attached, CUPTI slows every graph launch even with recording off
  // (until it detaches: cupti_tracer.h), so steps of the traced runner with recording off are no
  // baseline. Its warm-up also makes the GEMM
  // implementation choices (the selector times candidates) untraced; they are process-wide, so the
  // traced runner below takes them instead of timing under CUPTI, and the profile runs the kernels
  // `roofline bench` runs.
  double wall_off_ms = 0, graph_floor_ms = 0;
  if (gpu) {
    ModelOptions clean_model = model;
    auto clean = prepare_decode(clean_model, o.batch, o.context, o.steps);
    if (!clean.ok()) return clean.status();
    ModelRunner& c = *clean->runner;
    GreedyStep clean_step(clean->seqs);
    for (int64_t i = 0; i < kWarmup; ++i) ROOFLINE_RETURN_IF_ERROR(clean_step.run(c));
    // Halfway, the last step's graph replayed back to back: the step without the host between
    // steps (Backend::replay_last_decode_graph; eager steps have no graph to replay), at the
    // context the timed steps straddle, as their mean is (each step reads one more token's KV
    // than the one before; `roofline bench` does the same).
    const int64_t half = (o.steps + 1) / 2;
    for (int64_t step = 0; step < o.steps; ++step) {
      const auto t0 = clock::now();
      ROOFLINE_RETURN_IF_ERROR(clean_step.run(c));
      wall_off_ms += std::chrono::duration<double, std::milli>(clock::now() - t0).count();
      if (step + 1 == half && c.graph_report().graphs > 0) {
        ROOFLINE_ASSIGN_OR_RETURN(graph_floor_ms,
                                  c.replay_last_decode_graph(std::max<int64_t>(o.steps, 16)));
      }
    }
  }  // the clean runner and its device memory are gone before the traced one is made
  // Steps: warm-up, one learning step (GPU), the profiled steps. The runner captures its decode
  // graphs before CUPTI is loaded; CUPTI records their replays all the same.
  auto setup = prepare_decode(model, o.batch, o.context, o.steps + 1);
  if (!setup.ok()) return setup.status();
  ModelRunner& r = *setup->runner;
  GreedyStep greedy(setup->seqs);
  for (int64_t i = 0; i < kWarmup; ++i) ROOFLINE_RETURN_IF_ERROR(greedy.run(r));
  // On the GPU, CUPTI records every kernel, copy and set (graph replays included).
  std::unique_ptr<CuptiTracer> tracer;
  if (gpu) {
    auto t = CuptiTracer::start();
    if (!t.ok()) return t.status();
    tracer = std::move(*t);
  }
  std::vector<TraceEvent> events;
  double wall_ms = 0;
  bool sampled = false;
  int64_t untraced_replays = 0;
  double window_ms = 0, window_extra_ms = 0;
  JoinResult joined;
  int64_t dropped = 0;
  if (gpu) {
    tracer->take();  // loading, capture and warm-up are not profiled
    // The learning step: eager, with an event marker around every plan call and the host API
    // records on (join.h).
    if (Status s = tracer->set_api_recording(true); !s.ok()) return s;
    r.set_record_call_times(true);
    StepWindow learn_window{-1, CuptiTracer::now_ns(), 0};
    Status s = greedy.run(r);
    r.set_record_call_times(false);
    if (!s.ok()) return s;
    learn_window.end_ns = CuptiTracer::now_ns();
    if (Status st = tracer->set_api_recording(false); !st.ok()) return st;
    const int num_calls = static_cast<int>(r.last_plan()->calls.size());
    auto learn = [&](const CuptiTracer::Records& rec) -> StatusOr<CallSequence> {
      CallSequence seq = learn_call_sequence(rec.activity, rec.api, learn_window, num_calls);
      if (seq.call_index.empty())
        return internal_error("profile: the learning step's markers did not bracket its " +
                              std::to_string(num_calls) + " plan calls (" +
                              std::to_string(seq.markers) + " markers where they need " +
                              std::to_string(2 * num_calls + 1) +
                              ": a step start and a pair a call); cannot join the trace");
      return seq;
    };
    // The profiled steps, as a decode step runs: graph replays unless --no-cuda-graphs. Sampled
    // with graphs and a budget, else one after another with CUPTI attached throughout. Records
    // are taken only where CUPTI detaches or at the end: measured on the H200, a forced flush of
    // CUPTI's buffers while it stays attached makes every later traced step slower (qwen2.5-0.5b
    // bs 1: 0.85 -> 1.5 ms a traced step).
    sampled = graph_floor_ms > 0 && o.overhead_budget > 0;
    if (sampled) {
      std::fprintf(stderr,
                   "profiling %lld steps, each traced alone with untraced graph replays between "
                   "them (overhead budget %.1f %%)...\n",
                   static_cast<long long>(o.steps), 100.0 * o.overhead_budget);
      ROOFLINE_RETURN_IF_ERROR(tracer->detach());
      const CuptiTracer::Records learned = tracer->take();
      dropped = learned.dropped;
      ROOFLINE_ASSIGN_OR_RETURN(const CallSequence seq, learn(learned));
      ROOFLINE_ASSIGN_OR_RETURN(
          SampledWindow w, trace_sampled(r, greedy, *tracer, seq, o.steps,
                                         wall_off_ms / static_cast<double>(o.steps), graph_floor_ms,
                                         o.overhead_budget));
      joined = std::move(w.joined);
      wall_ms = w.traced_ms;
      window_ms = w.window_ms;
      window_extra_ms = w.extra_ms;
      untraced_replays = w.replays;
      dropped += w.dropped;
    } else {
      std::vector<StepWindow> windows;
      for (int64_t step = 0; step < o.steps; ++step) {
        const int64_t t0 = CuptiTracer::now_ns();
        if (Status st = greedy.run(r); !st.ok()) return st;
        const int64_t t1 = CuptiTracer::now_ns();
        windows.push_back({static_cast<int>(step), t0, t1});
        wall_ms += static_cast<double>(t1 - t0) / 1e6;
      }
      CuptiTracer::Records rec = tracer->take();
      dropped = rec.dropped;
      ROOFLINE_ASSIGN_OR_RETURN(const CallSequence seq, learn(rec));
      joined = join_steps(rec.activity, windows, seq);
    }
    events = std::move(joined.events);
    // Times from the first profiled event (the trace and pictures read better from zero).
    int64_t t_zero = INT64_MAX;
    for (const auto& e : events) t_zero = std::min(t_zero, e.start_ns);
    for (auto& e : events) {
      e.start_ns -= t_zero;
      e.end_ns -= t_zero;
    }
  } else {
    // The CPU backend: each call timed with the host clock.
    double offset_ms = 0;
    r.set_record_call_times(true);
    for (int64_t step = 0; step < o.steps; ++step) {
      const auto t0 = clock::now();
      Status s = greedy.run(r);
      if (!s.ok()) return s;
      const double step_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
      const Plan& plan = *r.last_plan();
      const auto& times = r.last_call_times();
      for (size_t i = 0; i < plan.calls.size(); ++i) {
        TraceEvent e;
        e.name = plan.calls[i].name;
        e.op = call_kind_name(plan.calls[i].op, plan.calls[i].attrs);
        e.start_ns = static_cast<int64_t>((offset_ms + times[i].start_ms) * 1e6);
        e.end_ns = static_cast<int64_t>((offset_ms + times[i].end_ms) * 1e6);
        e.step = static_cast<int>(step);
        e.call_index = static_cast<int>(i);
        events.push_back(std::move(e));
      }
      offset_ms += step_ms;
      wall_ms += step_ms;
    }
    r.set_record_call_times(false);
  }
  // Joined device activity carries its call index; the op name comes from the plan.
  for (auto& e : events) {
    if (e.call_index >= 0 && e.call_index < static_cast<int>(r.last_plan()->calls.size()))
      e.op = call_kind_name(r.last_plan()->calls[static_cast<size_t>(e.call_index)].op,
                            r.last_plan()->calls[static_cast<size_t>(e.call_index)].attrs);
  }
  std::vector<CallModel> models;
  const auto costs = decode_step_costs(r, setup->seqs);
  for (size_t i = 0; i < costs.size(); ++i)
    models.push_back({r.last_plan()->calls[i].name,
                      call_kind_name(r.last_plan()->calls[i].op, r.last_plan()->calls[i].attrs),
                      costs[i].bytes, costs[i].flops});

  ProfileResult out;
  out.model = o.model.dummy_weights.empty() ? o.model.model_dir : "dummy " + o.model.dummy_weights;
  out.backend = r.backend().name();
  out.warmup_steps = kWarmup;
  out.ceilings_source = ceilings_source;
  out.gpu = gpu;
  out.cuda_graphs = r.graph_report().graphs > 0;
  out.steps_joined = joined.steps_joined;
  out.steps_unmatched = joined.steps_unmatched;
  out.join_mismatch = joined.first_mismatch;
  out.dropped_records = dropped;
  out.ms_per_step = wall_ms / static_cast<double>(o.steps);
  out.ms_per_step_untraced = gpu ? wall_off_ms / static_cast<double>(o.steps) : 0.0;
  out.ms_per_step_graph_floor = graph_floor_ms;
  out.sampled = sampled;
  out.untraced_replays = untraced_replays;
  out.window_ms = window_ms;
  out.window_extra_ms = window_extra_ms;
  out.overhead_budget = o.overhead_budget;
  CaptureSummary capture;
  capture.method = gpu ? "cupti" : "host clock";
  capture.cuda_graphs = out.cuda_graphs;
  capture.sampled = out.sampled;
  capture.traced_steps = o.steps;
  capture.steps_joined = gpu ? out.steps_joined : static_cast<int>(o.steps);
  capture.steps_unmatched = out.steps_unmatched;
  capture.dropped_records = out.dropped_records;
  capture.ms_per_step = out.ms_per_step;
  capture.ms_per_step_untraced = out.ms_per_step_untraced;
  capture.ms_per_step_graph_floor = out.ms_per_step_graph_floor;
  capture.untraced_replays = out.untraced_replays;
  capture.window_ms = out.window_ms;
  capture.window_extra_ms = out.window_extra_ms;
  capture.overhead_budget = out.overhead_budget;
  out.capture_report = capture_text(capture);
  analyse_into(events, models, ceilings, static_cast<int>(o.steps - 1), &out, &capture);
  return out;
}

}  // namespace roofline
