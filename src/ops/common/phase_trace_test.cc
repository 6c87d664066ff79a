// The phase-trace analysis (phase_trace.h) on synthetic records with known answers: the clock
// rate, launch periods and spans, per-phase times over the marks each block reached, the critical
// path of the block that exits last, and the recorder's record space.
#include "ops/common/phase_trace.h"

#include <gtest/gtest.h>

namespace roofline {
namespace {

// One block's record: entry and exit in ns; the SM clock runs at 2 cycles per ns from cycle
// 1000 + 2·start; marks[i] is mark i's time in ns after entry (-1: not reached).
void put_block(std::vector<uint64_t>* records, int64_t index, uint64_t start, uint64_t end,
               const std::vector<int>& marks) {
  if (records->size() < static_cast<size_t>((index + 1) * kPhaseTraceWords))
    records->resize(static_cast<size_t>((index + 1) * kPhaseTraceWords), 0);
  uint64_t* r = records->data() + index * kPhaseTraceWords;
  r[0] = start;
  r[1] = end;
  r[2] = 7;
  const uint64_t base = 1000 + 2 * start;
  r[kPhaseTraceHeaderWords] = base;
  for (size_t i = 1; i < marks.size(); ++i)
    r[kPhaseTraceHeaderWords + i] = marks[i] < 0 ? 0 : base + 2 * static_cast<uint64_t>(marks[i]);
}

// Two launches of two blocks. Launch 0: blocks at [1000, 1400] and [1010, 1300]. Launch 1 (its
// blocks entered early, as under PDL): [1350, 2400] and [1360, 2100]; the last to exit is the
// first, which skips mark 2.
TEST(PhaseTraceTest, LaunchesPhasesAndTheCriticalPath) {
  std::vector<uint64_t> records;
  put_block(&records, 0, 1000, 1400, {0, 100, 200, 400});
  put_block(&records, 1, 1010, 1300, {0, 50, 250, 290});
  put_block(&records, 2, 1350, 2400, {0, 300, -1, 1050});
  put_block(&records, 3, 1360, 2100, {0, 100, 600, 740});
  const std::vector<PhaseTraceRecorder::Launch> launches = {{0, 2}, {2, 2}};
  const PhaseTraceSummary s = phase_trace_analyse(records, launches);

  EXPECT_DOUBLE_EQ(s.ns_per_cycle, 0.5);
  EXPECT_EQ(s.timer_step_ns, 10);         // 1000 -> 1010, 1350 -> 1360
  EXPECT_DOUBLE_EQ(s.period_ns, 1000.0);  // 2400 - 1400
  EXPECT_DOUBLE_EQ(s.span_ns, 0.5 * (400 + 1050));
  EXPECT_DOUBLE_EQ(s.entry_spread_ns, 10.0);
  EXPECT_DOUBLE_EQ(s.entry_after_prev_ns, -50.0);  // 1350 - 1400
  EXPECT_DOUBLE_EQ(s.last_start_after_prev_ns, -50.0);

  ASSERT_EQ(s.phases.size(), 3u);
  EXPECT_EQ(s.phases[0].mark, 1);
  EXPECT_EQ(s.phases[0].blocks, 4);
  EXPECT_DOUBLE_EQ(s.phases[0].median_ns, 100.0);  // 100, 50, 300, 100
  EXPECT_DOUBLE_EQ(s.phases[0].max_ns, 300.0);
  EXPECT_EQ(s.phases[1].mark, 2);
  EXPECT_EQ(s.phases[1].blocks, 3);
  EXPECT_DOUBLE_EQ(s.phases[1].median_ns, 200.0);  // 100, 200, 500
  EXPECT_EQ(s.phases[2].mark, 3);
  EXPECT_DOUBLE_EQ(s.phases[2].median_ns, 170.0);  // 200, 40, 750 (from mark 1), 140
  EXPECT_DOUBLE_EQ(s.phases[2].max_ns, 750.0);

  ASSERT_EQ(s.critical_ns.size(), static_cast<size_t>(kPhaseTraceMarks));
  EXPECT_DOUBLE_EQ(s.critical_ns[0], -50.0);
  EXPECT_DOUBLE_EQ(s.critical_ns[1], 300.0);
  EXPECT_DOUBLE_EQ(s.critical_ns[2], 0.0);    // not reached
  EXPECT_DOUBLE_EQ(s.critical_ns[3], 750.0);  // from mark 1

  // On one time axis, after launch 0's last exit (1400): launch 1's blocks entered at 1350 and
  // 1360 and reached mark 1 at 1650 and 1460, mark 2 only the second (1960), mark 3 at 2400 and
  // 2100.
  ASSERT_EQ(s.first_at_ns.size(), static_cast<size_t>(kPhaseTraceMarks));
  EXPECT_DOUBLE_EQ(s.first_at_ns[0], -50.0);
  EXPECT_DOUBLE_EQ(s.first_at_ns[1], 60.0);
  EXPECT_DOUBLE_EQ(s.first_at_ns[2], 560.0);
  EXPECT_DOUBLE_EQ(s.first_at_ns[3], 700.0);
  EXPECT_DOUBLE_EQ(s.first_at_ns[4], 0.0);  // no block reached it
  ASSERT_EQ(s.critical_at_ns.size(), static_cast<size_t>(kPhaseTraceMarks));
  EXPECT_DOUBLE_EQ(s.critical_at_ns[0], -50.0);
  EXPECT_DOUBLE_EQ(s.critical_at_ns[1], 250.0);
  EXPECT_DOUBLE_EQ(s.critical_at_ns[2], 0.0);  // not reached
  EXPECT_DOUBLE_EQ(s.critical_at_ns[3], 1000.0);

  const std::string report = phase_trace_report(s, {"entry", "metadata", "table"});
  EXPECT_NE(report.find("metadata"), std::string::npos);
  EXPECT_NE(report.find("table"), std::string::npos);
  EXPECT_NE(report.find("mark 3"), std::string::npos);  // past the names given
  EXPECT_NE(report.find("period 1.00 us"), std::string::npos);
  EXPECT_NE(report.find("first at us"), std::string::npos);
  EXPECT_NE(report.find("0.060"), std::string::npos);  // mark 1's first block, 60 ns after
}

// A block that never wrote its record (start 0), and a launch whose records lie past the copy,
// are skipped; a launch with no block left breaks the chain of periods.
TEST(PhaseTraceTest, SkipsMissingRecords) {
  std::vector<uint64_t> records;
  put_block(&records, 0, 500, 900, {0, 100});
  put_block(&records, 1, 0, 0, {0});
  put_block(&records, 2, 950, 1300, {0, 200});
  const PhaseTraceSummary s = phase_trace_analyse(records, {{0, 2}, {2, 1}, {100, 4}, {2, 1}});
  ASSERT_EQ(s.phases.size(), 1u);
  EXPECT_EQ(s.phases[0].blocks, 3);      // blocks 0, 2 and 2 again
  EXPECT_DOUBLE_EQ(s.period_ns, 400.0);  // launch 1 after 0 only: launch 3 follows an empty one
  EXPECT_DOUBLE_EQ(s.entry_after_prev_ns, 50.0);
}

// Two SMs, two blocks each, lifetimes exactly 200 ns + 200 ns per unit; a block that stored no
// units (a block with no rows) and a record past the launch are left out.
TEST(PhaseTraceTest, OccupancyFitsLifetimesAndFindsTheIdleTime) {
  std::vector<uint64_t> records;
  const auto put = [&](int64_t index, uint64_t sm, uint64_t start, uint64_t end, uint64_t units) {
    put_block(&records, index, start, end, {0});
    uint64_t* r = records.data() + index * kPhaseTraceWords;
    r[2] = sm;
    r[kPhaseTraceSinkWord] = units;
  };
  put(0, 0, 100, 1100, 4);
  put(1, 1, 150, 950, 3);
  put(2, 0, 1200, 1800, 2);
  put(3, 1, 1000, 1400, 1);
  put(4, 1, 1400, 1450, 0);
  put(5, 2, 5000, 9000, 9);  // another launch's
  const PhaseTraceOccupancy o = phase_trace_occupancy(records, {0, 5});
  EXPECT_EQ(o.blocks, 4);
  EXPECT_EQ(o.sms, 2);
  EXPECT_DOUBLE_EQ(o.span_ns, 1700.0);
  EXPECT_DOUBLE_EQ(o.busy_fraction, 2800.0 / 3400.0);
  EXPECT_DOUBLE_EQ(o.gap_median_ns, 75.0);  // 100 on SM 0, 50 on SM 1
  EXPECT_DOUBLE_EQ(o.gap_mean_ns, 75.0);
  EXPECT_DOUBLE_EQ(o.gap_fraction, 150.0 / 3400.0);
  EXPECT_DOUBLE_EQ(o.head_mean_ns, 25.0);   // 0 and 50
  EXPECT_DOUBLE_EQ(o.tail_mean_ns, 200.0);  // 0 and 400
  EXPECT_NEAR(o.fixed_ns, 200.0, 1e-9);
  EXPECT_NEAR(o.per_unit_ns, 200.0, 1e-9);
  EXPECT_NEAR(o.r2, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(o.units_mean, 2.5);
  const std::string report = phase_trace_occupancy_report(o);
  EXPECT_NE(report.find("4 blocks on 2 SMs"), std::string::npos);
  EXPECT_NE(report.find("0.20 us + 0.200 us per unit"), std::string::npos);

  EXPECT_EQ(phase_trace_occupancy(records, {4, 1}).blocks, 0);  // nothing with work: all zero
}

TEST(PhaseTraceTest, RecorderHandsOutSpaceInLaunchOrderUntilFull) {
  PhaseTraceRecorder recorder;
  EXPECT_EQ(recorder.next(4), nullptr);  // not armed
  std::vector<uint64_t> space(10 * kPhaseTraceWords);
  recorder.arm(space.data(), 10);
  EXPECT_EQ(recorder.next(4), space.data());
  EXPECT_EQ(recorder.next(5), space.data() + 4 * kPhaseTraceWords);
  EXPECT_EQ(recorder.next(2), nullptr);  // 11 > 10: untraced, and not listed
  EXPECT_EQ(recorder.next(1), space.data() + 9 * kPhaseTraceWords);
  const auto launches = recorder.disarm();
  ASSERT_EQ(launches.size(), 3u);
  EXPECT_EQ(launches[1].first_record, 4);
  EXPECT_EQ(launches[1].blocks, 5);
  EXPECT_EQ(launches[2].first_record, 9);
  EXPECT_EQ(recorder.next(1), nullptr);  // disarmed
}

}  // namespace
}  // namespace roofline
