#include "ops/common/phase_trace.h"

#include <algorithm>
#include <cstdio>

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
  out += "  phase (ends at the mark)              blocks   median us   max us   last block us\n";
  for (const auto& p : s.phases) {
    std::snprintf(line, sizeof(line), "  %-36s %7lld %11.3f %8.3f %15.3f\n", name(p.mark).c_str(),
                  static_cast<long long>(p.blocks), p.median_ns * 1e-3, p.max_ns * 1e-3,
                  s.critical_ns[static_cast<size_t>(p.mark)] * 1e-3);
    out += line;
  }
  std::snprintf(line, sizeof(line),
                "  the block that exits last enters %+.2f us after the previous launch's last "
                "exit\n",
                s.critical_ns.empty() ? 0.0 : s.critical_ns[0] * 1e-3);
  out += line;
  return out;
}

}  // namespace roofline
