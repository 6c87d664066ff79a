#include "ops/common/phase_trace.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace roofline {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Block {
  const uint64_t* r;
  uint64_t start() const { return r[0]; }
  uint64_t end() const { return r[1]; }
  uint64_t clock(int i) const { return r[kPhaseTraceHeaderWords + i]; }
  // The last mark before i that the block reached (mark 0, the entry, always is).
  int previous(int i) const {
    int p = i - 1;
    while (p > 0 && clock(p) == 0) --p;
    return p;
  }
  int last_mark() const {
    int last = 0;
    for (int i = 1; i < kPhaseTraceMarks; ++i)
      if (clock(i) != 0) last = i;
    return last;
  }
};

}  // namespace

PhaseTraceSummary phase_trace_analyse(const std::vector<uint64_t>& records,
                                      const std::vector<PhaseTraceRecorder::Launch>& launches) {
  PhaseTraceSummary s;
  std::vector<std::vector<Block>> blocks(launches.size());
  std::vector<uint64_t> timer_reads;
  double ns = 0, cycles = 0;
  for (size_t l = 0; l < launches.size(); ++l) {
    for (int64_t b = 0; b < launches[l].blocks; ++b) {
      const size_t at = static_cast<size_t>(launches[l].first_record + b) * kPhaseTraceWords;
      if (at + kPhaseTraceWords > records.size()) continue;
      const Block block{records.data() + at};
      if (block.start() == 0 || block.end() == 0 || block.clock(0) == 0) continue;
      blocks[l].push_back(block);
      timer_reads.push_back(block.start());
      timer_reads.push_back(block.end());
      const int last = block.last_mark();
      if (last > 0 && block.end() > block.start()) {
        ns += static_cast<double>(block.end() - block.start());
        cycles += static_cast<double>(block.clock(last) - block.clock(0));
      }
    }
  }
  s.ns_per_cycle = cycles > 0 ? ns / cycles : 0.0;
  std::sort(timer_reads.begin(), timer_reads.end());
  for (size_t i = 1; i < timer_reads.size(); ++i) {
    const int64_t d = static_cast<int64_t>(timer_reads[i] - timer_reads[i - 1]);
    if (d > 0 && (s.timer_step_ns == 0 || d < s.timer_step_ns)) s.timer_step_ns = d;
  }

  const auto to_ns = [&](uint64_t from, uint64_t to) {
    return static_cast<double>(to - from) * s.ns_per_cycle;
  };
  std::vector<double> period, span, spread, entry_after, last_after;
  std::vector<std::vector<double>> critical(kPhaseTraceMarks);
  std::vector<std::vector<double>> first_at(kPhaseTraceMarks), critical_at(kPhaseTraceMarks);
  // A block's time at mark i, ns after `from` (a %globaltimer read).
  const auto at = [&](const Block& b, int i, uint64_t from) {
    return static_cast<double>(static_cast<int64_t>(b.start() - from)) +
           to_ns(b.clock(0), b.clock(i));
  };
  std::vector<std::vector<double>> phase(kPhaseTraceMarks);
  uint64_t previous_end = 0;
  for (size_t l = 0; l < launches.size(); ++l) {
    if (blocks[l].empty()) {
      previous_end = 0;
      continue;
    }
    uint64_t first_start = UINT64_MAX, last_start = 0, last_end = 0;
    const Block* last_block = nullptr;
    for (const Block& b : blocks[l]) {
      first_start = std::min(first_start, b.start());
      last_start = std::max(last_start, b.start());
      if (b.end() >= last_end) {
        last_end = b.end();
        last_block = &b;
      }
      for (int i = 1; i < kPhaseTraceMarks; ++i)
        if (b.clock(i) != 0) phase[i].push_back(to_ns(b.clock(b.previous(i)), b.clock(i)));
    }
    span.push_back(static_cast<double>(last_end - first_start));
    spread.push_back(static_cast<double>(last_start - first_start));
    if (previous_end != 0) {
      const auto signed_ns = [](uint64_t from, uint64_t to) {
        return static_cast<double>(static_cast<int64_t>(to - from));
      };
      period.push_back(signed_ns(previous_end, last_end));
      entry_after.push_back(signed_ns(previous_end, first_start));
      last_after.push_back(signed_ns(previous_end, last_block->start()));
      critical[0].push_back(signed_ns(previous_end, last_block->start()));
      for (int i = 1; i < kPhaseTraceMarks; ++i) {
        critical[i].push_back(
            last_block->clock(i) == 0
                ? 0.0
                : to_ns(last_block->clock(last_block->previous(i)), last_block->clock(i)));
      }
      for (int i = 0; i < kPhaseTraceMarks; ++i) {
        bool reached = false;
        double first = 0.0;
        for (const Block& b : blocks[l]) {
          if (i > 0 && b.clock(i) == 0) continue;
          const double t = at(b, i, previous_end);
          if (!reached || t < first) first = t;
          reached = true;
        }
        if (reached) first_at[i].push_back(first);
        if (i == 0 || last_block->clock(i) != 0)
          critical_at[i].push_back(at(*last_block, i, previous_end));
      }
    }
    previous_end = last_end;
  }
  s.period_ns = median(period);
  s.span_ns = median(span);
  s.entry_spread_ns = median(spread);
  s.entry_after_prev_ns = median(entry_after);
  s.last_start_after_prev_ns = median(last_after);
  for (int i = 1; i < kPhaseTraceMarks; ++i) {
    if (phase[i].empty()) continue;
    PhaseTraceSummary::Phase p;
    p.mark = i;
    p.blocks = static_cast<int64_t>(phase[i].size());
    p.median_ns = median(phase[i]);
    p.max_ns = *std::max_element(phase[i].begin(), phase[i].end());
    s.phases.push_back(p);
  }
  s.critical_ns.assign(kPhaseTraceMarks, 0.0);
  for (int i = 0; i < kPhaseTraceMarks; ++i) s.critical_ns[i] = median(critical[i]);
  s.first_at_ns.assign(kPhaseTraceMarks, 0.0);
  s.critical_at_ns.assign(kPhaseTraceMarks, 0.0);
  for (int i = 0; i < kPhaseTraceMarks; ++i) {
    s.first_at_ns[i] = median(first_at[i]);
    s.critical_at_ns[i] = median(critical_at[i]);
  }
  return s;
}

std::string phase_trace_report(const PhaseTraceSummary& s, const std::vector<std::string>& names) {
  const auto name = [&](int i) {
    return i < static_cast<int>(names.size()) ? names[static_cast<size_t>(i)]
                                              : "mark " + std::to_string(i);
  };
  std::string out;
  char line[256];
  std::snprintf(line, sizeof(line),
                "  per launch: period %.2f us, span %.2f us (entries spread over %.2f us); first "
                "entry %+.2f us after the previous launch's last exit\n"
                "  clocks: %.3f ns per SM cycle, %%globaltimer steps of %lld ns\n",
                s.period_ns * 1e-3, s.span_ns * 1e-3, s.entry_spread_ns * 1e-3,
                s.entry_after_prev_ns * 1e-3, s.ns_per_cycle,
                static_cast<long long>(s.timer_step_ns));
  out += line;
  out +=
      "  phase (ends at the mark)              blocks   median us   max us   last block us"
      "   first at us   last block at us\n";
  const auto at_or_zero = [](const std::vector<double>& v, int i) {
    return static_cast<size_t>(i) < v.size() ? v[static_cast<size_t>(i)] : 0.0;
  };
  for (const auto& p : s.phases) {
    std::snprintf(line, sizeof(line), "  %-36s %7lld %11.3f %8.3f %15.3f %13.3f %18.3f\n",
                  name(p.mark).c_str(), static_cast<long long>(p.blocks), p.median_ns * 1e-3,
                  p.max_ns * 1e-3, s.critical_ns[static_cast<size_t>(p.mark)] * 1e-3,
                  at_or_zero(s.first_at_ns, p.mark) * 1e-3,
                  at_or_zero(s.critical_at_ns, p.mark) * 1e-3);
    out += line;
  }
  out +=
      "  (\"at\": us after the previous launch's last exit; \"first\": the launch's earliest "
      "block to reach the mark)\n";
  std::snprintf(line, sizeof(line),
                "  the block that exits last enters %+.2f us after the previous launch's last "
                "exit\n",
                s.critical_ns.empty() ? 0.0 : s.critical_ns[0] * 1e-3);
  out += line;
  return out;
}

PhaseTraceOccupancy phase_trace_occupancy(const std::vector<uint64_t>& records,
                                          const PhaseTraceRecorder::Launch& launch) {
  PhaseTraceOccupancy o;
  struct Life {
    uint64_t start, end;
    double units;
  };
  std::map<uint64_t, std::vector<Life>> by_sm;
  uint64_t first = UINT64_MAX, last = 0;
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (int64_t b = 0; b < launch.blocks; ++b) {
    const size_t at = static_cast<size_t>(launch.first_record + b) * kPhaseTraceWords;
    if (at + kPhaseTraceWords > records.size()) continue;
    const uint64_t* r = records.data() + at;
    const uint64_t units = r[kPhaseTraceSinkWord];
    if (r[0] == 0 || r[1] < r[0] || units == 0) continue;
    const double x = static_cast<double>(units), y = static_cast<double>(r[1] - r[0]);
    by_sm[r[2]].push_back({r[0], r[1], x});
    first = std::min(first, r[0]);
    last = std::max(last, r[1]);
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  if (n == 0) return o;
  o.blocks = static_cast<int64_t>(n);
  o.sms = static_cast<int64_t>(by_sm.size());
  o.span_ns = static_cast<double>(last - first);
  o.units_mean = sx / n;
  const double var = sxx - sx * sx / n;
  if (var > 0) {
    o.per_unit_ns = (sxy - sx * sy / n) / var;
    o.fixed_ns = (sy - o.per_unit_ns * sx) / n;
    double ss_res = 0, ss_tot = 0;
    for (const auto& [sm, lives] : by_sm) {
      for (const Life& l : lives) {
        const double y = static_cast<double>(l.end - l.start);
        const double e = y - (o.fixed_ns + o.per_unit_ns * l.units);
        ss_res += e * e;
        ss_tot += (y - sy / n) * (y - sy / n);
      }
    }
    o.r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 0.0;
  } else {
    o.fixed_ns = sy / n;  // one amount of work: the mean lifetime, nothing to split it by
  }
  std::vector<double> gaps;
  double busy = 0, gap_sum = 0, head = 0, tail = 0;
  for (auto& [sm, lives] : by_sm) {
    std::sort(lives.begin(), lives.end(),
              [](const Life& a, const Life& b) { return a.start < b.start; });
    uint64_t sm_last = 0;
    for (size_t i = 0; i < lives.size(); ++i) {
      busy += static_cast<double>(lives[i].end - lives[i].start);
      if (i > 0) {
        // Blocks that overlap on the SM (two resident at once) leave no gap.
        const double g =
            lives[i].start > sm_last ? static_cast<double>(lives[i].start - sm_last) : 0.0;
        gaps.push_back(g);
        gap_sum += g;
      }
      sm_last = std::max(sm_last, lives[i].end);
    }
    head += static_cast<double>(lives.front().start - first);
    tail += static_cast<double>(last - sm_last);
  }
  const double area = static_cast<double>(o.sms) * o.span_ns;
  o.busy_fraction = area > 0 ? busy / area : 0.0;
  o.gap_fraction = area > 0 ? gap_sum / area : 0.0;
  o.gap_median_ns = median(gaps);
  o.gap_mean_ns = gaps.empty() ? 0.0 : gap_sum / static_cast<double>(gaps.size());
  o.head_mean_ns = head / static_cast<double>(o.sms);
  o.tail_mean_ns = tail / static_cast<double>(o.sms);
  return o;
}

std::string phase_trace_occupancy_report(const PhaseTraceOccupancy& o) {
  char line[512];
  std::snprintf(
      line, sizeof(line),
      "  occupancy: %lld blocks on %lld SMs over %.1f us; SMs busy %.1f %% of it, between blocks "
      "%.1f %% (gap median %.2f us, mean %.2f us), first entry %.2f us and last exit %.2f us from "
      "the launch's (mean over SMs)\n"
      "  a block's lifetime = %.2f us + %.3f us per unit (R^2 %.3f; %.1f units a block on average: "
      "the fixed part is %.1f %% of a mean block)\n",
      static_cast<long long>(o.blocks), static_cast<long long>(o.sms), o.span_ns * 1e-3,
      100.0 * o.busy_fraction, 100.0 * o.gap_fraction, o.gap_median_ns * 1e-3, o.gap_mean_ns * 1e-3,
      o.head_mean_ns * 1e-3, o.tail_mean_ns * 1e-3, o.fixed_ns * 1e-3, o.per_unit_ns * 1e-3, o.r2,
      o.units_mean,
      o.fixed_ns + o.per_unit_ns * o.units_mean > 0
          ? 100.0 * o.fixed_ns / (o.fixed_ns + o.per_unit_ns * o.units_mean)
          : 0.0);
  return line;
}

}  // namespace roofline
