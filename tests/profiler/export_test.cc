// Profile exports on a synthetic trace with known answers: the roofline chart's points sit where
// the arithmetic says (and ops without FLOPs are listed by bandwidth), the timeline draws exactly
// the chosen step's intervals with their names escaped, and the JSON carries the report's numbers.
#include "profiler/export.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace roofline {
namespace {

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

struct Fixture {
  std::vector<TraceEvent> events;
  std::vector<CallModel> calls;
  Ceilings ceilings;  // the H200's: 4.28 TB/s, 783 TFLOP/s
  ProfileReport report;
  Fixture() {
    // Call 0: a GEMM of 2 GFLOP over 1 GB taking 1 ms; call 1: a copy of 1 MB taking 1 us.
    calls = {{"layer0.mlp", "matmul", 1e9, 2e9}, {"layer0.embed", "embedding", 1e6, 0}};
    for (int step = 0; step < 2; ++step) {
      const int64_t base = step * 2000000;
      TraceEvent gemm{"gemm<bf16>", "matmul", base, base + 1000000, 0, TraceEvent::Kind::kCompute,
                      step,         0};
      TraceEvent copy{"gather<T>&",
                      "embedding",
                      base + 1005000,
                      base + 1006000,
                      0,
                      TraceEvent::Kind::kCompute,
                      step,
                      1};
      events.push_back(gemm);
      events.push_back(copy);
    }
    report = analyze(events, calls, ceilings, AnalysisOptions{});
  }
};

TEST(ProfileExport, RooflinePointsSitWhereTheArithmeticSays) {
  Fixture f;
  const std::string svg = roofline_svg(f.report, f.calls, f.ceilings);
  ASSERT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(count(svg, "<circle class=\"op\""), 1u);  // only the op with FLOPs is a point
  EXPECT_EQ(count(svg, "class=\"ceiling\""), 1u);
  // matmul: 2 FLOP/B; 2e9 FLOP in 1 ms = 2 TFLOP/s; its roof is 2 x 4.28 TB/s = 8.56 TFLOP/s: 23.4
  // %.
  EXPECT_NE(svg.find("matmul: 2 FLOP/B, 2 TFLOP/s = 23.4 % of its roof"), std::string::npos) << svg;
  // embedding: no FLOPs, 1 MB in 1 us = 1000 GB/s.
  EXPECT_NE(svg.find("embedding (no FLOPs) 1000 GB/s"), std::string::npos) << svg;
}

TEST(ProfileExport, TimelineDrawsOneStepWithNamesEscaped) {
  Fixture f;
  const std::string svg = timeline_svg(f.events, 1);
  EXPECT_EQ(count(svg, "<rect class=\"event\""), 2u);
  EXPECT_NE(svg.find("gemm&lt;bf16&gt; (matmul): 1000.00 us"), std::string::npos) << svg;
  EXPECT_NE(svg.find("gather&lt;T&gt;&amp;"), std::string::npos);
  EXPECT_EQ(svg.find("gemm<bf16>"), std::string::npos);
  EXPECT_NE(svg.find("1006.0 us"), std::string::npos);  // the step's span
  // A step with no events: every event is drawn rather than an empty picture.
  EXPECT_EQ(count(timeline_svg(f.events, 7), "<rect class=\"event\""), 4u);
}

TEST(ProfileExport, JsonCarriesTheReportsNumbers) {
  Fixture f;
  const nlohmann::json j = nlohmann::json::parse(report_json(f.report, f.ceilings));
  EXPECT_EQ(j["num_steps"], 2);
  EXPECT_DOUBLE_EQ(j["busy_fraction"].get<double>(), f.report.busy_fraction);
  EXPECT_DOUBLE_EQ(j["measured_step_ns"].get<double>(), f.report.measured_step_ns);
  EXPECT_DOUBLE_EQ(j["ideal_step_ns"].get<double>(), f.report.ideal_step_ns);
  ASSERT_EQ(j["per_op"].size(), f.report.per_op.size());
  EXPECT_EQ(j["per_op"][0]["op"], f.report.per_op[0].op);
  EXPECT_EQ(j["top_kernels"].size(), 2u);
  EXPECT_EQ(j["gap_histogram"].back()["le_us"], "inf");
  EXPECT_DOUBLE_EQ(j["ceilings"]["bytes_per_s"].get<double>(), 4.28e12);
  EXPECT_DOUBLE_EQ(j["ceilings"]["handover_ns"].get<double>(), f.ceilings.handover_ns);
  EXPECT_FALSE(j["ceilings"]["handover_calibrated"].get<bool>());  // the H200's figure
  EXPECT_DOUBLE_EQ(j["kernels_per_step"].get<double>(), f.report.kernels_per_step);
  EXPECT_DOUBLE_EQ(j["handover_floor_ns"].get<double>(), f.report.handover_floor_ns);
  EXPECT_FALSE(j.contains("capture"));  // only when the caller says how it captured
}

TEST(ProfileExport, JsonSaysWhetherTheHandoverWasMeasuredOnThisGpu) {
  Fixture f;
  f.ceilings.handover_ns = 2150;
  f.ceilings.handover_calibrated = true;
  f.report = analyze(f.events, f.calls, f.ceilings, AnalysisOptions{});
  const nlohmann::json j = nlohmann::json::parse(report_json(f.report, f.ceilings));
  EXPECT_DOUBLE_EQ(j["ceilings"]["handover_ns"].get<double>(), 2150.0);
  EXPECT_TRUE(j["ceilings"]["handover_calibrated"].get<bool>());
  EXPECT_DOUBLE_EQ(j["handover_floor_ns"].get<double>(), 2 * 2150.0);  // two kernels a step
}

TEST(ProfileExport, JsonSaysHowTheProfileWasCapturedAndWhatItCost) {
  Fixture f;
  CaptureSummary c;
  c.method = "cupti";
  c.cuda_graphs = true;
  c.sampled = true;
  c.steps_joined = 8;
  c.ms_per_step = 0.834;
  c.ms_per_step_untraced = 0.635;
  c.ms_per_step_graph_floor = 0.618;
  c.untraced_replays = 5925;
  c.window_ms = 3809.3;
  c.window_extra_ms = 110.8;
  c.overhead_budget = 0.03;
  nlohmann::json j = nlohmann::json::parse(report_json(f.report, f.ceilings, &c))["capture"];
  EXPECT_EQ(j["method"], "cupti");
  EXPECT_TRUE(j["sampled"].get<bool>());
  EXPECT_EQ(j["steps_joined"], 8);
  EXPECT_EQ(j["untraced_replays"], 5925);
  // Sampled: the window's cost over its untraced time; the traced step's own cost beside it.
  EXPECT_DOUBLE_EQ(j["overhead"].get<double>(), 110.8 / (3809.3 - 110.8));
  EXPECT_DOUBLE_EQ(j["step_overhead"].get<double>(), 0.834 / 0.635 - 1.0);
  EXPECT_DOUBLE_EQ(j["ms_per_step_graph_floor"].get<double>(), 0.618);
  // Consecutive: the overhead is the traced step's.
  c.sampled = false;
  c.untraced_replays = 0;
  c.window_ms = c.window_extra_ms = 0;
  j = nlohmann::json::parse(report_json(f.report, f.ceilings, &c))["capture"];
  EXPECT_DOUBLE_EQ(j["overhead"].get<double>(), 0.834 / 0.635 - 1.0);
  // Nothing untraced measured (the CPU's host clock): null, not a made-up zero.
  c = CaptureSummary{};
  c.method = "host clock";
  c.steps_joined = 3;
  c.ms_per_step = 0.1;
  j = nlohmann::json::parse(report_json(f.report, f.ceilings, &c))["capture"];
  EXPECT_TRUE(j["overhead"].is_null());
  EXPECT_TRUE(j["step_overhead"].is_null());
  EXPECT_TRUE(j["ms_per_step_untraced"].is_null());
  EXPECT_TRUE(j["ms_per_step_graph_floor"].is_null());
}

}  // namespace
}  // namespace roofline
