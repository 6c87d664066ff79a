// Trace analysis on synthetic traces whose answers are known by hand: busy union, idle stretches
// and their histogram, hidden communication, kernels flagged against the cost model, per-op sums;
// the distance identity over random traces; the Chrome trace parsed back.
#include "profiler/analysis.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace roofline {
namespace {

constexpr int64_t kUs = 1000;
using Kind = TraceEvent::Kind;

TraceEvent event(std::string name, std::string op, int64_t start_ns, int64_t end_ns, int stream = 0,
                 Kind kind = Kind::kCompute, int step = 0, int call_index = -1) {
  TraceEvent e;
  e.name = std::move(name);
  e.op = std::move(op);
  e.start_ns = start_ns;
  e.end_ns = end_ns;
  e.stream = stream;
  e.kind = kind;
  e.step = step;
  e.call_index = call_index;
  return e;
}

// Ceilings of 1 byte/ns and 1 flop/ns, so a call's ideal time in ns is max(bytes, flops).
Ceilings unit_ceilings() { return {1e9, 1e9}; }

int64_t histogram_count(const ProfileReport& r, double bound_us) {
  for (const auto& [bound, count] : r.gap_histogram) {
    if (bound == bound_us) return count;
  }
  ADD_FAILURE() << "no bucket " << bound_us;
  return -1;
}

int64_t histogram_total(const ProfileReport& r) {
  int64_t n = 0;
  for (const auto& [bound, count] : r.gap_histogram) n += count;
  return n;
}

// measured = ideal + Σ per-op excess + launch gaps + other idle + unattributed.
double identity_error(const ProfileReport& r) {
  double sum = r.ideal_step_ns + r.launch_gap_ns + r.other_gap_ns + r.unattributed_ns;
  for (const auto& row : r.per_op) sum += row.excess_ns;
  return std::abs(r.measured_step_ns - sum);
}

TEST(Analysis, EmptyTrace) {
  const ProfileReport r = analyze({}, {}, Ceilings{}, AnalysisOptions{});
  EXPECT_EQ(r.num_steps, 0);
  EXPECT_EQ(r.total_ns, 0);
  EXPECT_EQ(r.busy_fraction, 0);
  EXPECT_EQ(r.comm_overlap_fraction, 0);
  EXPECT_EQ(histogram_total(r), 0);
  EXPECT_EQ(r.gap_histogram.size(), 8u);
  EXPECT_TRUE(std::isinf(r.gap_histogram.back().first));
  EXPECT_TRUE(r.top_kernels.empty());
  EXPECT_EQ(r.measured_step_ns, 0);
  const std::string text = format_report(r);
  EXPECT_NE(text.find("of the speed of light"), std::string::npos) << text;
  // Calls modelled but nothing measured: the ideal still counts, the excess is negative.
  const ProfileReport m = analyze({}, {{"q", "matmul", 100, 0}}, unit_ceilings(), {});
  EXPECT_DOUBLE_EQ(m.ideal_step_ns, 100);
  ASSERT_EQ(m.per_call.size(), 1u);
  EXPECT_DOUBLE_EQ(m.per_call[0].excess_ns, -100);
}

TEST(Analysis, BackToBackKernelsWithGaps) {
  // 10 µs, gap 5 µs, 20 µs, gap 30 µs, 15 µs: window 80 µs, busy 45 µs.
  const std::vector<TraceEvent> trace = {
      event("a", "matmul", 0, 10 * kUs),
      event("b", "matmul", 15 * kUs, 35 * kUs),
      event("c", "add", 65 * kUs, 80 * kUs),
  };
  const ProfileReport r = analyze(trace, {}, Ceilings{}, AnalysisOptions{});
  EXPECT_EQ(r.num_steps, 1);
  EXPECT_DOUBLE_EQ(r.total_ns, 80 * kUs);
  EXPECT_DOUBLE_EQ(r.busy_ns, 45 * kUs);
  EXPECT_DOUBLE_EQ(r.busy_fraction, 45.0 / 80.0);
  ASSERT_EQ(r.step_busy_fraction.size(), 1u);
  EXPECT_DOUBLE_EQ(r.step_busy_fraction[0], 45.0 / 80.0);
  EXPECT_DOUBLE_EQ(r.gap_ns, 35 * kUs);
  EXPECT_DOUBLE_EQ(r.small_gap_ns, 5 * kUs);  // the 30 µs gap is past the 20 µs threshold
  EXPECT_DOUBLE_EQ(r.launch_gap_ns, 5 * kUs);
  EXPECT_DOUBLE_EQ(r.other_gap_ns, 30 * kUs);
  EXPECT_EQ(histogram_count(r, 5), 1);
  EXPECT_EQ(histogram_count(r, 50), 1);
  EXPECT_EQ(histogram_total(r), 2);
  EXPECT_DOUBLE_EQ(r.unattributed_ns, 45 * kUs);  // no call models
  EXPECT_LT(identity_error(r), 1.0);

  AnalysisOptions strict;
  strict.launch_gap_threshold_ns = 2 * kUs;
  EXPECT_DOUBLE_EQ(analyze(trace, {}, Ceilings{}, strict).small_gap_ns, 0);
}

TEST(Analysis, OverlappingStreamsCountOnceAsBusy) {
  // Stream 0: [0, 40) µs; stream 1: [20, 60) µs; stream 0 again [70, 80) µs.
  const std::vector<TraceEvent> trace = {
      event("a", "matmul", 0, 40 * kUs, 0),
      event("b", "matmul", 20 * kUs, 60 * kUs, 1),
      event("c", "matmul", 70 * kUs, 80 * kUs, 0),
  };
  const ProfileReport r = analyze(trace, {}, Ceilings{}, AnalysisOptions{});
  EXPECT_DOUBLE_EQ(r.total_ns, 80 * kUs);
  EXPECT_DOUBLE_EQ(r.busy_ns, 70 * kUs);  // union, not the 90 µs sum
  EXPECT_DOUBLE_EQ(r.gap_ns, 10 * kUs);
  EXPECT_EQ(histogram_count(r, 10), 1);
  // Stream 0's own 30 µs pause is mostly covered by stream 1: only the 10 µs device idle counts.
  EXPECT_DOUBLE_EQ(r.small_gap_ns, 10 * kUs);
}

// Programmatic dependent launch: on one stream a kernel starts before the one ahead of it ends and
// waits for it. The overlap is the earlier kernel's time; the later one is charged from the
// earlier one's end. On two streams overlap is still shared.
TEST(Analysis, OverlapOnOneStreamIsTheEarlierKernels) {
  const std::vector<TraceEvent> trace = {
      event("gemm", "matmul", 0, 40 * kUs, 0),
      event("norm", "rms_norm", 30 * kUs, 45 * kUs, 0),  // launched early: 10 us waiting
      event("gemm", "matmul", 44 * kUs, 60 * kUs, 0),    // 1 us waiting
      event("other", "matmul", 50 * kUs, 70 * kUs, 1),   // another stream: shares [50, 60)
  };
  const ProfileReport r = analyze(trace, {}, Ceilings{}, AnalysisOptions{});
  EXPECT_DOUBLE_EQ(r.busy_ns, 70 * kUs);
  ASSERT_EQ(r.top_kernels.size(), 3u);
  std::map<std::string, double> total;
  for (const auto& k : r.top_kernels) total[k.name] = k.total_ns;
  EXPECT_DOUBLE_EQ(total["gemm"], 50 * kUs);   // [0, 40) + [45, 50) + half of [50, 60)
  EXPECT_DOUBLE_EQ(total["norm"], 5 * kUs);    // [40, 45): its wait is not its cost
  EXPECT_DOUBLE_EQ(total["other"], 15 * kUs);  // half of [50, 60) + [60, 70)
  double share = 0;
  for (const auto& k : r.top_kernels) share += k.share;
  EXPECT_NEAR(share, 1.0, 1e-12);
}

TEST(Analysis, ZeroLengthEventsAreInstants) {
  // A zero-length marker before the first kernel, one inside a gap, one reversed: none of them
  // stretches the window or fills a gap.
  const std::vector<TraceEvent> trace = {
      event("mark", "", 0, 0),
      event("a", "matmul", 10 * kUs, 20 * kUs),
      event("mark", "", 22 * kUs, 22 * kUs),
      event("backwards", "", 26 * kUs, 24 * kUs),
      event("b", "matmul", 30 * kUs, 40 * kUs),
  };
  const ProfileReport r = analyze(trace, {}, Ceilings{}, AnalysisOptions{});
  EXPECT_DOUBLE_EQ(r.total_ns, 30 * kUs);
  EXPECT_DOUBLE_EQ(r.busy_ns, 20 * kUs);
  EXPECT_EQ(histogram_count(r, 10), 1);
  EXPECT_EQ(histogram_total(r), 1);
  // Markers are not kernels: two a step, each a handover.
  EXPECT_DOUBLE_EQ(r.kernels_per_step, 2.0);
  EXPECT_DOUBLE_EQ(r.handover_floor_ns, 2 * Ceilings{}.handover_ns);
}

TEST(Analysis, HandoverFloorCountsComputeKernelsOnly) {
  // Per step: two kernels, a copy and a collective; only the kernels hand over to one another.
  std::vector<TraceEvent> trace;
  for (int step = 0; step < 3; ++step) {
    const int64_t t0 = step * 100 * kUs;
    trace.push_back(event("k1", "matmul", t0, t0 + 4 * kUs, 0, Kind::kCompute, step));
    trace.push_back(event("copy", "", t0 + 4 * kUs, t0 + 5 * kUs, 0, Kind::kMemcpy, step));
    trace.push_back(event("k2", "add", t0 + 5 * kUs, t0 + 9 * kUs, 0, Kind::kCompute, step));
    trace.push_back(event("ar", "", t0 + 9 * kUs, t0 + 10 * kUs, 1, Kind::kCommunication, step));
  }
  Ceilings c;
  c.handover_ns = 2 * kUs;
  const ProfileReport r = analyze(trace, {}, c, AnalysisOptions{});
  EXPECT_DOUBLE_EQ(r.kernels_per_step, 2.0);
  EXPECT_DOUBLE_EQ(r.handover_floor_ns, 4 * kUs);
  const std::string text = format_report(r);
  EXPECT_NE(text.find("kernels 2.0 a step: as a chain of dependent kernels they take at least "
                      "0.0040 ms (40.0 % of the measured step) at 2.00 us a handover (the H200's, "
                      "measured), whatever they compute"),
            std::string::npos)
      << text;
  // Calibrated (`roofline profile --calibrate`): the same floor, said to be this GPU's.
  c.handover_calibrated = true;
  const ProfileReport calibrated = analyze(trace, {}, c, AnalysisOptions{});
  EXPECT_TRUE(calibrated.handover_calibrated);
  const std::string calibrated_text = format_report(calibrated);
  EXPECT_NE(calibrated_text.find("at 2.00 us a handover (measured on this GPU), whatever they "
                                 "compute"),
            std::string::npos)
      << calibrated_text;
  EXPECT_EQ(calibrated_text.find("H200"), std::string::npos) << calibrated_text;
  c.handover_calibrated = false;
  // A handover of 0 (the CPU's): no floor, and the report says nothing about it.
  c.handover_ns = 0;
  const ProfileReport cpu = analyze(trace, {}, c, AnalysisOptions{});
  EXPECT_DOUBLE_EQ(cpu.kernels_per_step, 2.0);
  EXPECT_DOUBLE_EQ(cpu.handover_floor_ns, 0);
  EXPECT_EQ(format_report(cpu).find("a handover"), std::string::npos);
}

TEST(Analysis, HandoverFloorTextSaysWhereTheHandoverCameFrom) {
  // `roofline bench`'s line: 125 kernels at the H200's 1.14 us of a 0.64 ms step.
  EXPECT_EQ(handover_floor_text(125, kH200HandoverNs, false, 640 * kUs),
            "as a chain of dependent kernels they take at least 0.1425 ms (22.3 % of the "
            "measured step) at 1.14 us a handover (the H200's, measured)");
  EXPECT_EQ(handover_floor_text(10, 2500, true, 100 * kUs),
            "as a chain of dependent kernels they take at least 0.0250 ms (25.0 % of the "
            "measured step) at 2.50 us a handover (measured on this GPU)");
  // No step measured: no share rather than a division by zero.
  EXPECT_NE(handover_floor_text(4, 1000, false, 0).find("(0.0 % of the measured step)"),
            std::string::npos);
  EXPECT_DOUBLE_EQ(Ceilings{}.handover_ns, kH200HandoverNs);
  EXPECT_FALSE(Ceilings{}.handover_calibrated);
}

TEST(Analysis, BenchRooflineTextSaysWhoseCeilingItIs) {
  // 15.1 GB at the H200's 4.28 TB/s is 3.528 ms; a 5.129 ms step runs at 68.8 % of it.
  const double bytes = 15.1e9;
  EXPECT_EQ(bench_roofline_text(bytes, 5.129, "NVIDIA H200", 0),
            "3.528 ms at the H200's 4.28 TB/s copy ceiling: this step runs at 68.8% of it");
  // Another GPU, not calibrated: the line says the H200's figure is not this GPU's, and how to
  // get its own.
  const std::string h100 = bench_roofline_text(bytes, 5.129, "NVIDIA H100 80GB HBM3", 0);
  EXPECT_EQ(h100.rfind("3.528 ms at the H200's 4.28 TB/s copy ceiling: this step runs at 68.8% of "
                       "it; this GPU (NVIDIA H100 80GB HBM3) is not an H200",
                       0),
            0u)
      << h100;
  EXPECT_NE(h100.find("roofline profile --device cuda --calibrate"), std::string::npos) << h100;
  // Calibrated (any GPU): its own ceiling beside the H200's, 15.1 GB at 3.02 TB/s = 5.000 ms.
  EXPECT_EQ(bench_roofline_text(bytes, 5.129, "NVIDIA H100 80GB HBM3", 3.02e12),
            "3.528 ms at the H200's 4.28 TB/s copy ceiling: this step runs at 68.8% of it; "
            "5.000 ms at this GPU's calibrated 3.02 TB/s: 97.5% of it");
  EXPECT_NE(bench_roofline_text(bytes, 3.8, "NVIDIA H200", 4.1e12).find("calibrated 4.10 TB/s"),
            std::string::npos);
}

TEST(Analysis, CommunicationPartlyUnderCompute) {
  // Compute [0, 20) µs; communication [14, 24) µs: 6 of its 10 µs are hidden.
  const std::vector<CallModel> calls = {{"mlp", "matmul", 1000, 0}, {"ar", "all_reduce", 500, 0}};
  const std::vector<TraceEvent> trace = {
      event("gemm", "matmul", 0, 20 * kUs, 0, Kind::kCompute, 0, 0),
      event("nccl", "all_reduce", 14 * kUs, 24 * kUs, 1, Kind::kCommunication, 0, 1),
  };
  const ProfileReport r = analyze(trace, calls, unit_ceilings(), AnalysisOptions{});
  EXPECT_DOUBLE_EQ(r.comm_ns, 10 * kUs);
  EXPECT_DOUBLE_EQ(r.comm_hidden_ns, 6 * kUs);
  EXPECT_DOUBLE_EQ(r.comm_overlap_fraction, 0.6);
  EXPECT_DOUBLE_EQ(r.busy_ns, 24 * kUs);
  // Hidden communication costs its call nothing: only the exposed 4 µs are attributed to it.
  for (const auto& row : r.per_call) {
    if (row.name == "ar") {
      EXPECT_DOUBLE_EQ(row.measured_ns, 4 * kUs);
    } else {
      EXPECT_DOUBLE_EQ(row.measured_ns, 20 * kUs);
    }
  }
  EXPECT_LT(identity_error(r), 1.0);
  // No communication at all: the fraction is 0, not NaN.
  const ProfileReport none = analyze({trace[0]}, calls, unit_ceilings(), {});
  EXPECT_EQ(none.comm_overlap_fraction, 0);
}

TEST(Analysis, SlowCallRankedFirstAndFlagged) {
  // Ideal times 10, 10, 10 µs; measured 10, 30, 10 µs back to back.
  const std::vector<CallModel> calls = {
      {"q_proj", "matmul", 10 * kUs, 0},
      {"norm", "rms_norm", 10 * kUs, 0},
      {"o_proj", "matmul", 0, 10 * kUs},
  };
  const std::vector<TraceEvent> trace = {
      event("gemm_q", "matmul", 0, 10 * kUs, 0, Kind::kCompute, 0, 0),
      event("rms_norm_kernel", "rms_norm", 10 * kUs, 40 * kUs, 0, Kind::kCompute, 0, 1),
      event("gemm_o", "matmul", 40 * kUs, 50 * kUs, 0, Kind::kCompute, 0, 2),
  };
  const ProfileReport r = analyze(trace, calls, unit_ceilings(), AnalysisOptions{});
  ASSERT_EQ(r.per_call.size(), 3u);
  EXPECT_EQ(r.per_call[0].name, "norm");
  EXPECT_DOUBLE_EQ(r.per_call[0].measured_ns, 30 * kUs);
  EXPECT_DOUBLE_EQ(r.per_call[0].ideal_ns, 10 * kUs);
  EXPECT_DOUBLE_EQ(r.per_call[0].excess_ns, 20 * kUs);
  ASSERT_EQ(r.top_kernels.size(), 3u);
  EXPECT_EQ(r.top_kernels[0].name, "rms_norm_kernel");
  EXPECT_DOUBLE_EQ(r.top_kernels[0].share, 0.6);
  EXPECT_DOUBLE_EQ(r.top_kernels[0].expected_share, 1.0 / 3.0);
  EXPECT_TRUE(r.top_kernels[0].unexpected);
  EXPECT_FALSE(r.top_kernels[1].unexpected);  // 20 % against 33 % expected
  EXPECT_FALSE(r.top_kernels[2].unexpected);
  EXPECT_DOUBLE_EQ(r.ideal_step_ns, 30 * kUs);
  EXPECT_DOUBLE_EQ(r.measured_step_ns, 50 * kUs);
  const std::string text = format_report(r);
  EXPECT_NE(text.find("<< unexpected"), std::string::npos) << text;
  EXPECT_NE(text.find("launch gaps"), std::string::npos) << text;
  EXPECT_NE(text.find("measured 0.0500 ms vs roofline 0.0300 ms: 60.0 % of the speed of light"),
            std::string::npos)
      << text;
}

TEST(Analysis, PerOpSumsAndSeveralSteps) {
  // Two steps of the same plan: two matmul calls and one add. Steps are 100 µs apart; the time
  // between steps is not part of any window.
  const std::vector<CallModel> calls = {
      {"up", "matmul", 4 * kUs, 0}, {"down", "matmul", 2 * kUs, 0}, {"res", "add", 1 * kUs, 0}};
  std::vector<TraceEvent> trace;
  for (int step = 0; step < 2; ++step) {
    const int64_t t0 = step * 100 * kUs;
    trace.push_back(event("g", "matmul", t0, t0 + 5 * kUs, 0, Kind::kCompute, step, 0));
    trace.push_back(event("g", "matmul", t0 + 6 * kUs, t0 + 9 * kUs, 0, Kind::kCompute, step, 1));
    trace.push_back(event("a", "add", t0 + 9 * kUs, t0 + 11 * kUs, 0, Kind::kCompute, step, 2));
  }
  const ProfileReport r = analyze(trace, calls, unit_ceilings(), AnalysisOptions{});
  EXPECT_EQ(r.num_steps, 2);
  EXPECT_DOUBLE_EQ(r.total_ns, 22 * kUs);
  EXPECT_DOUBLE_EQ(r.measured_step_ns, 11 * kUs);
  EXPECT_DOUBLE_EQ(r.launch_gap_ns, 1 * kUs);
  ASSERT_EQ(r.step_busy_fraction.size(), 2u);
  EXPECT_DOUBLE_EQ(r.step_busy_fraction[1], 10.0 / 11.0);
  ASSERT_EQ(r.per_op.size(), 2u);
  EXPECT_EQ(r.per_op[0].name, "matmul");
  EXPECT_DOUBLE_EQ(r.per_op[0].measured_ns, 8 * kUs);
  EXPECT_DOUBLE_EQ(r.per_op[0].ideal_ns, 6 * kUs);
  EXPECT_DOUBLE_EQ(r.per_op[0].excess_ns, 2 * kUs);
  EXPECT_EQ(r.per_op[1].name, "add");
  EXPECT_DOUBLE_EQ(r.per_op[1].excess_ns, 1 * kUs);
  EXPECT_LT(identity_error(r), 1.0);
  // One kernel name shared by two calls: one row, both calls' ideals.
  ASSERT_EQ(r.top_kernels.size(), 2u);
  EXPECT_EQ(r.top_kernels[0].name, "g");
  EXPECT_EQ(r.top_kernels[0].calls, 4);
  EXPECT_DOUBLE_EQ(r.top_kernels[0].expected_share, 6.0 / 7.0);
  // Three kernels a step, each at least one handover: 3 × 1.14 µs of the 11 µs step.
  EXPECT_DOUBLE_EQ(r.kernels_per_step, 3.0);
  EXPECT_DOUBLE_EQ(r.handover_floor_ns, 3 * 1140.0);
  EXPECT_NE(format_report(r).find("kernels 3.0 a step: as a chain of dependent kernels they take "
                                  "at least 0.0034 ms (31.1 % of the measured step) at 1.14 us a "
                                  "handover"),
            std::string::npos)
      << format_report(r);

  // Only step 1.
  AnalysisOptions one;
  one.steps = {1};
  const ProfileReport s = analyze(trace, calls, unit_ceilings(), one);
  EXPECT_EQ(s.num_steps, 1);
  EXPECT_DOUBLE_EQ(s.measured_step_ns, 11 * kUs);
}

// Random traces over several streams, kinds and steps, some events joined to no call, some to
// calls out of range, some of zero length: the distance identity must hold within 1 ns.
TEST(Analysis, DistanceIdentityHoldsOnRandomTraces) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const char* kOps[] = {"matmul", "attention", "rms_norm", "all_reduce"};
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<CallModel> calls(static_cast<size_t>(uniform(0, 12)));
    for (size_t c = 0; c < calls.size(); ++c) {
      calls[c] = {"call" + std::to_string(c), kOps[uniform(0, 3)],
                  static_cast<double>(uniform(0, 1'000'000)),
                  static_cast<double>(uniform(0, 1'000'000'000))};
    }
    std::vector<TraceEvent> trace;
    const int num_streams = static_cast<int>(uniform(1, 4));
    const int num_steps = static_cast<int>(uniform(1, 3));
    for (int step = 0; step < num_steps; ++step) {
      for (int s = 0; s < num_streams; ++s) {
        int64_t t = step * 10'000'000 + uniform(0, 50'000);
        for (int64_t k = uniform(0, 20); k > 0; --k) {
          const int64_t start = t + uniform(0, 40'000);
          const int64_t end = start + uniform(0, 30'000);
          t = end;
          const Kind kind = static_cast<Kind>(uniform(0, 2));
          const int call = static_cast<int>(uniform(-1, static_cast<int64_t>(calls.size())));
          trace.push_back(event("k" + std::to_string(uniform(0, 6)), kOps[uniform(0, 3)], start,
                                end, s, kind, step, call));
        }
      }
    }
    std::shuffle(trace.begin(), trace.end(), rng);
    const ProfileReport r = analyze(trace, calls, Ceilings{}, AnalysisOptions{});
    ASSERT_LT(identity_error(r), 1.0) << "trial " << trial << "\n" << format_report(r);
    ASSERT_LE(r.busy_ns, r.total_ns);
    ASSERT_LE(r.small_gap_ns, r.gap_ns);
    ASSERT_LE(r.comm_hidden_ns, r.comm_ns);
    double share = 0;
    for (const auto& k : r.top_kernels) share += k.expected_share;
    ASSERT_LE(share, 1.0 + 1e-9);
  }
}

TEST(Analysis, ChromeTraceParsesBack) {
  const std::vector<TraceEvent> trace = {
      event("gemm", "matmul", 1'000'500, 1'003'250, 0, Kind::kCompute, 0, 3),
      event("nccl", "all_reduce", 1'002'000, 1'010'000, 2, Kind::kCommunication, 0, -1),
      event("copy \"in\"", "", 5, 5, 1, Kind::kMemcpy, 1, -1),
  };
  const nlohmann::json j = nlohmann::json::parse(chrome_trace_json(trace));
  const auto& list = j.at("traceEvents");
  ASSERT_EQ(list.size(), trace.size());
  for (size_t i = 0; i < trace.size(); ++i) {
    const auto& e = list[i];
    EXPECT_EQ(e.at("name"), trace[i].name);
    EXPECT_EQ(e.at("ph"), "X");
    EXPECT_EQ(e.at("pid"), 0);
    EXPECT_EQ(e.at("tid"), trace[i].stream);
    EXPECT_DOUBLE_EQ(e.at("ts").get<double>(), trace[i].start_ns / 1e3);
    EXPECT_DOUBLE_EQ(e.at("dur").get<double>(), (trace[i].end_ns - trace[i].start_ns) / 1e3);
    EXPECT_EQ(e.at("args").at("op"), trace[i].op);
    EXPECT_EQ(e.at("args").at("call_index"), trace[i].call_index);
  }
  EXPECT_EQ(nlohmann::json::parse(chrome_trace_json({})).at("traceEvents").size(), 0u);
}

TEST(Analysis, CaptureOverheadSaysWhenTheFiguresCarryTheTracingCost) {
  // Within the 3 % budget: the measured line only.
  EXPECT_EQ(capture_overhead_text(4.874, 4.816, false),
            "capture overhead: 4.874 ms per step with CUPTI, 4.816 ms before CUPTI was loaded: "
            "+1.2 %\n");
  // Above it (the H200's qwen2.5-0.5b bs 1 graph step): what the excess is, why, and what to use.
  const std::string graphs = capture_overhead_text(1.014, 0.764, true);
  EXPECT_EQ(graphs,
            "capture overhead: 1.014 ms per step with CUPTI, 0.764 ms before CUPTI was loaded: "
            "+32.7 %\n"
            "  above the 3 % budget: the kernel times and gaps below carry 0.250 ms a step of "
            "tracing cost (before Blackwell, CUPTI timestamps every graph-launched kernel in "
            "software); compare steps by the untraced 0.764 ms\n");
  const std::string eager = capture_overhead_text(2.008, 1.733, false);
  EXPECT_NE(eager.find("0.275 ms a step of tracing cost; compare steps by the untraced 1.733 ms"),
            std::string::npos)
      << eager;
  EXPECT_EQ(eager.find("Blackwell"), std::string::npos) << eager;
  // A traced step faster than the untraced one (noise) is within budget.
  EXPECT_EQ(capture_overhead_text(5.847, 6.534, true).find("budget"), std::string::npos);
}

TEST(Analysis, UntracedReplaysBringTheWindowBackWithinTheBudget) {
  // 0.2 ms of tracing cost needs 0.2 / 0.03 = 6.67 ms untraced; 0.6 ms are there, 6.07 ms owed,
  // at 0.6 ms a replay: 11 replays (10 leave 0.07 ms short).
  EXPECT_EQ(untraced_replays_for_budget(0.2, 0.6, 0.6, 0.03), 11);
  EXPECT_LE(0.2 / (0.6 + 11 * 0.6), 0.03);
  EXPECT_GT(0.2 / (0.6 + 10 * 0.6), 0.03);
  // Exactly at the budget, already within it, or tracing cheaper than the untraced step: none.
  EXPECT_EQ(untraced_replays_for_budget(0.3, 10.0, 0.6, 0.03), 0);
  EXPECT_EQ(untraced_replays_for_budget(0.2, 100.0, 0.6, 0.03), 0);
  EXPECT_EQ(untraced_replays_for_budget(-0.05, 0.6, 0.6, 0.03), 0);
  // No budget or no replay time to space with: none (the caller traces consecutively instead).
  EXPECT_EQ(untraced_replays_for_budget(0.2, 0.6, 0.6, 0.0), 0);
  EXPECT_EQ(untraced_replays_for_budget(0.2, 0.6, 0.0, 0.03), 0);
  // A detach of 20 ms on a 4 ms step at 3 %: 667 ms untraced.
  EXPECT_EQ(untraced_replays_for_budget(20.0, 4.0, 4.0, 0.03), 166);
}

TEST(Analysis, SampledCaptureSaysWhatTheWindowAndATracedStepCost) {
  CaptureSummary c;
  c.method = "cupti";
  c.cuda_graphs = true;
  c.sampled = true;
  c.traced_steps = 8;
  c.untraced_replays = 5000;
  c.window_ms = 3300.0;
  c.window_extra_ms = 93.0;  // over 3207 ms untraced: +2.9 %
  c.overhead_budget = 0.03;
  c.ms_per_step = 0.791;
  c.ms_per_step_untraced = 0.633;
  EXPECT_EQ(capture_text(c),
            "capture overhead: sampled, CUPTI attached for each of 8 traced steps alone and "
            "detached between them, 5000 untraced replays of the step's graph in between: the "
            "window took 3300.0 ms, 93.0 ms (+2.9 %) more than untraced (budget 3 %)\n"
            "  a traced step itself: 0.791 ms against 0.633 ms untraced (+25.0 %): the kernel "
            "times and gaps below are the traced steps' and carry 0.158 ms a step of tracing cost "
            "(before Blackwell, CUPTI timestamps every graph-launched kernel in software); compare "
            "steps by the untraced 0.633 ms\n");
  // A traced step within the budget: its line alone.
  c.ms_per_step = 4.0;
  c.ms_per_step_untraced = 3.95;
  const std::string within = capture_text(c);
  EXPECT_NE(within.find("  a traced step itself: 4.000 ms against 3.950 ms untraced (+1.3 %)\n"),
            std::string::npos)
      << within;
  EXPECT_EQ(within.find("carry"), std::string::npos) << within;
  // Traced consecutively: the per-step overhead text.
  c.sampled = false;
  c.ms_per_step = 1.014;
  c.ms_per_step_untraced = 0.764;
  EXPECT_EQ(capture_text(c), capture_overhead_text(1.014, 0.764, true));
  // Nothing untraced measured (the CPU): no capture lines.
  c.ms_per_step_untraced = 0;
  EXPECT_EQ(capture_text(c), "");
}

}  // namespace
}  // namespace roofline
