// Phase timestamps inside a kernel: where a short kernel's time goes, phase by phase and block by
// block, which neither CUPTI (one interval per kernel) nor Nsight Compute (stall samples, not a
// timeline; its own clocks) shows. A kernel under study marks its phases with cuda::PhaseTrace
// (cuda_phase_trace.cuh); the marks compile in only where ROOFLINE_PHASE_TRACE is defined — a bench
// target of its own (attention_trace_bench) — so the library's kernels carry none of them.
//
// One record per block of a traced launch, kPhaseTraceWords 64-bit words: [0] %globaltimer at the
// block's entry and [1] at its exit (ns, one clock for every SM, so blocks and launches line up),
// [2] the SM, [3] a word mark_after stores to, [4 + i] %clock64 at mark i (the SM's cycle counter:
// fine-grained within a block; 0 where the block did not reach the mark). Mark 0 is the entry.
//
// This header is host code: the record layout, the recorder a launcher takes its launches'
// record space from, and the analysis (tested on the CPU, phase_trace_test.cc).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace roofline {

inline constexpr int kPhaseTraceMarks = 17;
inline constexpr int kPhaseTraceSinkWord = 3;     // mark_after's store
inline constexpr int kPhaseTraceHeaderWords = 4;  // start ns, end ns, SM, the sink
inline constexpr int kPhaseTraceWords = kPhaseTraceHeaderWords + kPhaseTraceMarks;

// Hands out record space to a kernel's launches, in launch order, while armed.
class PhaseTraceRecorder {
 public:
  struct Launch {
    int64_t first_record = 0;  // the launch's block b has record first_record + b
    int64_t blocks = 0;
  };
  // Record space for `capacity` blocks on the device (kPhaseTraceWords words each, zeroed by the
  // caller).
  void arm(uint64_t* device_records, int64_t capacity) {
    records_ = device_records;
    capacity_ = capacity;
    launches_.clear();
    used_ = 0;
  }
  // The records of the next launch of `blocks` blocks (linear block index x + X·(y + Y·z)), or
  // nullptr when not armed or out of space (that launch runs untraced).
  uint64_t* next(int64_t blocks) {
    if (records_ == nullptr || used_ + blocks > capacity_) return nullptr;
    launches_.push_back({used_, blocks});
    uint64_t* at = records_ + used_ * kPhaseTraceWords;
    used_ += blocks;
    return at;
  }
  // Stops recording; returns the traced launches in order.
  std::vector<Launch> disarm() {
    records_ = nullptr;
    return std::move(launches_);
  }

 private:
  uint64_t* records_ = nullptr;
  int64_t capacity_ = 0, used_ = 0;
  std::vector<Launch> launches_;
};

// What a sequence of traced launches of one kernel says (phase_trace_analyse).
struct PhaseTraceSummary {
  struct Phase {
    int mark = 0;          // the phase ends at this mark, and starts at the last reached before it
    int64_t blocks = 0;    // blocks that reached it
    double median_ns = 0;  // over those blocks
    double max_ns = 0;
  };
  double ns_per_cycle = 0;              // Σ block lifetimes in ns / Σ in cycles
  int64_t timer_step_ns = 0;            // the smallest nonzero difference of two %globaltimer reads
  double period_ns = 0;                 // median of (launch i's last exit - launch i-1's), i >= 1
  double span_ns = 0;                   // median of launch i's last exit - its first entry
  double entry_spread_ns = 0;           // median of launch i's last entry - its first entry
  double entry_after_prev_ns = 0;       // median of launch i's first entry - launch i-1's last exit
  double last_start_after_prev_ns = 0;  // the same for the block that exits last
  std::vector<Phase> phases;            // marks 1.. that any block reached
  // The block of each launch that exits last, phase by phase (median over launches i >= 1 of its
  // ns from the previous mark it reached; 0 where it did not reach the mark): the critical path.
  std::vector<double> critical_ns;  // [kPhaseTraceMarks], [0] = its entry after launch i-1's exit
  // The same launches on one time axis, ns after launch i-1's last exit (median over launches
  // i >= 1; [0] = entry): when the first of launch i's blocks reached each mark (for a mark past a
  // PDL wait, when the wait released), and when the block that exits last reached it. A mark's
  // time is the block's entry plus its cycles since entry at ns_per_cycle. A launch in which no
  // block (or not the last block) reached a mark is left out of that median; 0 where none is left.
  std::vector<double> first_at_ns;     // [kPhaseTraceMarks]
  std::vector<double> critical_at_ns;  // [kPhaseTraceMarks]
};

// Analyses the records of `launches` (consecutive launches of one kernel in one stream), `records`
// the host copy of the whole record space. Launches must be non-empty; a record whose start or end
// is 0 (a block that never ran its trace) is skipped.
PhaseTraceSummary phase_trace_analyse(const std::vector<uint64_t>& records,
                                      const std::vector<PhaseTraceRecorder::Launch>& launches);

// How one long launch's blocks fill the SMs (far more blocks than SMs, e.g. prefill attention):
// each block's lifetime fitted by least squares to its work — the units a kernel stores in its
// record's sink word (mark_after's store, e.g. its K/V tiles) — as fixed + per_unit · units, and
// where the SMs idle within the launch: between one block's exit and the next block's entry on
// the same SM (gaps), before an SM's first entry (head) and after its last exit (tail).
struct PhaseTraceOccupancy {
  int64_t blocks = 0;        // records with an entry, an exit and at least one work unit
  int64_t sms = 0;           // SMs that ran any of them
  double span_ns = 0;        // last exit - first entry
  double busy_fraction = 0;  // Σ lifetimes / (sms · span)
  double gap_median_ns = 0;  // between consecutive blocks on one SM
  double gap_mean_ns = 0;
  double gap_fraction = 0;  // Σ gaps / (sms · span)
  double head_mean_ns = 0;  // an SM's first entry - the launch's first entry, mean over SMs
  double tail_mean_ns = 0;  // the launch's last exit - an SM's last exit, mean over SMs
  double fixed_ns = 0;      // least squares: lifetime = fixed + per_unit · units
  double per_unit_ns = 0;
  double r2 = 0;          // of that fit
  double units_mean = 0;  // per block
};

// Analyses one launch's records (the layout above); blocks that stored no work units (0 in the
// sink word, e.g. a block with no rows) are left out.
PhaseTraceOccupancy phase_trace_occupancy(const std::vector<uint64_t>& records,
                                          const PhaseTraceRecorder::Launch& launch);

// The occupancy as text, a few lines.
std::string phase_trace_occupancy_report(const PhaseTraceOccupancy& o);

// The summary as text: one line per phase with its name (names[i] for mark i; "mark i" past the
// list), then the critical path.
std::string phase_trace_report(const PhaseTraceSummary& s, const std::vector<std::string>& names);

}  // namespace roofline
