// profile_decode (roofline/profile.h), the profiler as a library call, on the CPU backend: the
// result carries the report in every form (text, JSON, Chrome trace, both pictures) for the steps
// asked, with the explicit ceilings it was given; options out of range are InvalidArgument naming
// the option, and a model that cannot load names the model. On a GPU (skipped without one): every
// step joins, sampled (the default) and traced one after another, and the untraced baseline (a
// runner of its own, run before CUPTI is loaded), its graph floor and the sampled window within
// its budget are reported.
#include "roofline/profile.h"

#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "core/device.h"

namespace roofline {
namespace {

ProfileOptions tiny(int64_t steps) {
  ProfileOptions o;
  o.model.dummy_weights = "llama-tiny";
  o.batch = 2;
  o.context = 20;
  o.steps = steps;
  o.bandwidth_gbps = 20;  // explicit ceilings: no cache or calibration involved
  o.peak_tflops = 0.02;
  return o;
}

TEST(ProfileDecodeTest, ReportsEveryFormOnTheCpu) {
  auto r = profile_decode(tiny(3));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE(r->gpu);
  EXPECT_EQ(r->model, "dummy llama-tiny");
  EXPECT_EQ(r->warmup_steps, 3);
  EXPECT_DOUBLE_EQ(r->bytes_per_s, 20e9);
  EXPECT_DOUBLE_EQ(r->flops_per_s, 0.02e12);
  EXPECT_NE(r->ceilings_source.find("overridden"), std::string::npos) << r->ceilings_source;
  EXPECT_GT(r->ms_per_step, 0.0);
  EXPECT_EQ(r->ms_per_step_untraced, 0.0);  // only the GPU reruns the steps untraced
  EXPECT_GT(r->device_ms_per_step, 0.0);
  EXPECT_NE(r->report.find("measured"), std::string::npos) << r->report;
  const auto report = nlohmann::json::parse(r->report_json);
  EXPECT_TRUE(report.is_object());
  EXPECT_EQ(report["capture"]["method"], "host clock");
  EXPECT_EQ(report["capture"]["steps_joined"], 3);
  EXPECT_TRUE(report["capture"]["overhead"].is_null());  // nothing untraced to compare with
  // A CPU "kernel" is a function call: no handover floor, and the report says nothing of one.
  EXPECT_DOUBLE_EQ(report["ceilings"]["handover_ns"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(report["handover_floor_ns"].get<double>(), 0.0);
  EXPECT_EQ(r->report.find("a handover"), std::string::npos) << r->report;
  const auto trace = nlohmann::json::parse(r->trace_json);
  ASSERT_TRUE(trace.contains("traceEvents"));
  EXPECT_FALSE(trace["traceEvents"].empty());
  EXPECT_EQ(r->roofline_svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(r->timeline_svg.rfind("<svg", 0), 0u);
}

TEST(ProfileDecodeTest, OnTheGpuEveryStepJoinsBesideACleanBaseline) {
  if (!built_with_cuda()) GTEST_SKIP() << "CPU-only build";
  auto devices = list_cuda_devices();
  if (!devices.ok() || devices->empty()) GTEST_SKIP() << "no GPU visible on this machine";
  // llama-tiny's head_dim 16 has no CUDA attention kernel: the smallest real shape instead.
  ProfileOptions o = tiny(4);
  o.model.dummy_weights = "qwen2.5-0.5b";
  o.model.device = "cuda";
  o.batch = 1;
  o.context = 32;
  auto r = profile_decode(o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->gpu);
  EXPECT_TRUE(r->cuda_graphs);
  EXPECT_EQ(r->steps_joined, 4) << r->join_mismatch;
  EXPECT_EQ(r->dropped_records, 0);
  EXPECT_GT(r->ms_per_step, 0.0);
  EXPECT_GT(r->ms_per_step_untraced, 0.0);
  // The floor is the clean runner's graph replayed back to back: no longer than its step plus
  // timing noise.
  EXPECT_GT(r->ms_per_step_graph_floor, 0.0);
  EXPECT_LT(r->ms_per_step_graph_floor, 1.5 * r->ms_per_step_untraced);
  EXPECT_NE(r->report.find("measured"), std::string::npos) << r->report;
  // Sampled by default: each step traced with CUPTI attached for it alone (all four joined above,
  // so re-attaching records every kernel), and the untraced replays between them bring the window
  // within the budget: its untraced time is the rest of it.
  EXPECT_TRUE(r->sampled);
  EXPECT_GT(r->untraced_replays, 0);
  EXPECT_GT(r->window_ms, r->window_extra_ms);
  EXPECT_LE(r->window_extra_ms, o.overhead_budget * (r->window_ms - r->window_extra_ms) + 1e-9)
      << r->window_ms << " ms window, " << r->window_extra_ms << " ms of it tracing";
  const auto gpu_report = nlohmann::json::parse(r->report_json);
  // The step's kernels counted (qwen2.5-0.5b: at least one a layer, 24 layers), each one handover.
  EXPECT_GE(gpu_report["kernels_per_step"].get<double>(), 24.0);
  EXPECT_DOUBLE_EQ(gpu_report["handover_floor_ns"].get<double>(),
                   gpu_report["kernels_per_step"].get<double>() *
                       gpu_report["ceilings"]["handover_ns"].get<double>());
  EXPECT_NE(r->report.find("a handover"), std::string::npos) << r->report;
  const auto capture = gpu_report["capture"];
  EXPECT_EQ(capture["method"], "cupti");
  EXPECT_TRUE(capture["sampled"].get<bool>());
  EXPECT_LE(capture["overhead"].get<double>(), o.overhead_budget + 1e-9);
  // Budget 0: the steps traced one after another, CUPTI attached throughout.
  o.overhead_budget = 0;
  r = profile_decode(o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE(r->sampled);
  EXPECT_EQ(r->untraced_replays, 0);
  EXPECT_EQ(r->steps_joined, 4) << r->join_mismatch;
}

TEST(ProfileDecodeTest, OptionsOutOfRangeAreInvalidArguments) {
  ProfileOptions o = tiny(0);
  auto r = profile_decode(o);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().to_string().find("--steps"), std::string::npos) << r.status().to_string();
  o = tiny(2);
  o.batch = 0;
  r = profile_decode(o);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().to_string().find("batch"), std::string::npos) << r.status().to_string();
  o = tiny(2);
  o.context = 0;
  EXPECT_EQ(profile_decode(o).status().code(), StatusCode::kInvalidArgument);
  o = tiny(2);
  o.bandwidth_gbps = -1;
  EXPECT_EQ(profile_decode(o).status().code(), StatusCode::kInvalidArgument);
  for (double budget : {-0.01, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    o = tiny(2);
    o.overhead_budget = budget;
    r = profile_decode(o);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << budget;
    EXPECT_NE(r.status().to_string().find("--overhead-budget"), std::string::npos)
        << r.status().to_string();
  }
}

TEST(ProfileDecodeTest, AModelThatCannotLoadIsNamed) {
  ProfileOptions o = tiny(2);
  o.model.dummy_weights = "no-such-shape";
  auto r = profile_decode(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().to_string().find("no-such-shape"), std::string::npos)
      << r.status().to_string();
}

}  // namespace
}  // namespace roofline
