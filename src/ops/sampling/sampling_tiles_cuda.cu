// sample_rows_tiles_cuda: the batched sampling chain (sampling.h) for rows the LM head has
// summarised tile by tile (LogitTileSummaries, logit_tiles.h), without a pass over the logits: one
// block per row.
//
// The row's chain, in the order the block runs it (sampling.h gives the argument):
//   1. The loads that depend on nothing go out first, together: the row's summary words, its
//      non-finite count, the epoch, its parameters; then (after the parameters) the first edits.
//      Each edit is checked as the CPU twin checks it and marked in a shared-memory bitmap (a token
//      marked twice is a bad edit list); then each tile's largest key is kept on chip and counted
//      into the pivot's first radix histogram unless the tile is dirty: its largest token edited
//      (its largest unedited value is unknown: the tile's maximum only bounds it from above).
//   2. A row in error, one the tiles cannot finish (sample_row_uses_tiles) or one whose summaries
//      are stale (another epoch's: the writer did not run this step) ends here.
//   3. The pivot: two radix rounds of 11 bits over the keys of L (the clean tiles' maxima: the
//      values of distinct unedited tokens) give the 22-bit prefix of its k-th largest key, and v,
//      the smallest value with that prefix, has at least k tokens at or above it (k = 1 for a
//      greedy row). Meanwhile the logits at the edited tokens arrive; then the edited values
//      (bias, penalties) are computed and kept on chip.
//   4. The candidates: every token whose score (s = x / T, or x itself when greedy) reaches
//      s(v), compared first in raw values with the smallest that reaches it (only those pay for
//      the division): the unedited ones from the tiles whose maximum reaches s(v) (listed, then
//      read in 16-byte loads: the only read of the logits besides the edited tokens), the edited
//      ones from the chip. Typically about k tiles of the vocabulary's thousands.
//   5. More than kCap candidates (a row of many equal values): five radix rounds over the 50-bit
//      rank keys of the same tokens find the k-th key exactly, and only the keys at or above it
//      are kept (exactly k).
//   6. The top k ranked by counting (rank keys are distinct), then one warp runs top-p, min-p
//      and the Philox draw over them with sampling_math.h's integer weights, in rank order
//      (sampling_warp.cuh, shared with sample_rows_cuda).
// Every decision is the CPU twin's: the same rank keys, weights, thresholds and draw, so the token
// is the same for the same inputs and seed.
//
// Bound: latency (a chain of dependent loads and barriers), not bytes; and instruction fetch, as
// a block runs each phase's code once: one visit routine serves every pass over the candidates. A
// row reads its summaries (vocab / tile_tokens · 8 bytes), its edit list, the logits of about k
// tiles and of its edited tokens: at batch 64, a 128k vocabulary and tiles of 128 tokens, 64 KB of
// summaries a row against 256 KB of bf16 logits. Histogram and counter updates are aggregated per
// warp (the keys of a row's tile maxima share a handful of top-11-bit digits: one shared-memory
// atomic per digit and warp instead of one per key).
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <mutex>

#include "core/check.h"
#include "core/cuda_check.h"
#include "ops/common/cuda_launch.cuh"
#include "ops/common/cuda_phase_trace.cuh"
#include "ops/common/cuda_vector.cuh"
#include "ops/sampling/sampling.h"
#include "ops/sampling/sampling_warp.cuh"

namespace roofline {

namespace {

namespace cg = cooperative_groups;
using sampling::TokenEdit;

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kBins = 2048;       // radix digits of up to 11 bits
constexpr int kCap = 1024;        // candidates kept on chip
constexpr int kEditCache = 2048;  // edited values kept on chip; later entries are recomputed
constexpr int kInFlight = 4;      // summary loads a thread keeps in flight
constexpr int kTop = static_cast<int>(kSamplingFastTopK);
static_assert(kBins == 4 * kThreads, "each thread scans four histogram bins");
static_assert(kTop <= kThreads, "a candidate per thread when ranking the top k");
static_assert(kTop <= kBins, "the finish's relative probabilities reuse the histogram's storage");

// The phase marks of a trace build (sampling_trace_bench; phase_trace.h), in order. A row in
// error stops at kTileMarkRead; only a row of more than kCap candidates reaches kTileMarkExact.
enum TileMark : int {
  kTileMarkEdits = 1,   // the row's parameters read, its edits checked and marked (before the wait)
  kTileMarkWait,        // past the PDL wait, the summaries' loads issued
  kTileMarkRead,        // the summaries read, the dirty tiles known, the first histogram final
  kTileMarkFirstDigit,  // the pivot's first radix digit known
  kTileMarkPivot,       // the pivot known, the tiles that may hold candidates listed, prefetched
  kTileMarkGathered,    // the candidates gathered
  kTileMarkExact,       // the k-th rank key found (more than kCap candidates)
  kTileMarkRanked,      // the top k in rank order
  kTileMarkToken,       // the token chosen
};

// What a launch passes besides SampleRowsParams.
struct TilesLaunch {
  const uint64_t* words;      // [rows, tiles]
  const uint64_t* nonfinite;  // [rows]
  const uint32_t* epoch;
  int tile_tokens;
  int tiles;
  // Tokens one load of the candidate pass brings: kVec16 (16 bytes) where every tile starts on a
  // 16-byte boundary (tile_tokens and vocab multiples of it, the logits 16-byte aligned), else 1;
  // and ceil(2^40 / (tile_tokens / unit)), so that i / units_per_tile = i * unit_magic >> 40
  // exactly for every unit index i < 2^23 (2048 listed tiles of at most 4096 units; the error
  // i * (unit_magic * d - 2^40) / (d * 2^40) stays below 1 / d).
  int unit;
  uint64_t unit_magic;
#if defined(ROOFLINE_PHASE_TRACE)
  uint64_t* trace;  // the launch's phase records, or nullptr
#endif
};

// Shared-memory regions of one block (sizes in tiles_smem_bytes; 8-byte aligned each).
struct Smem {
  uint32_t* bitmap;     // [ceil(vocab / 32)]: edited tokens
  uint32_t* tile_max;   // [tiles]: each tile's largest key (0: none finite)
  uint32_t* dirty;      // [ceil(tiles / 32)]: tiles whose largest token is edited
  uint32_t* hist;       // [kBins]: radix histograms; the finish's weights
  int32_t* list;        // [kBins]: the tiles the gather reads
  uint64_t* cand;       // [kCap]: candidate rank keys
  uint64_t* ranked;     // [kTop]: the top k, best first
  int32_t* edit_token;  // [kEditCache]
  float* edit_value;    // [kEditCache]
};

constexpr size_t align8(size_t n) { return (n + 7) / 8 * 8; }

size_t tiles_smem_bytes(int64_t vocab, int64_t tiles) {
  return align8(static_cast<size_t>((vocab + 31) / 32) * 4) +
         align8(static_cast<size_t>(tiles) * 4) +
         align8(static_cast<size_t>((tiles + 31) / 32) * 4) + kBins * 4 + kBins * 4 + kCap * 8 +
         kTop * 8 + kEditCache * 4 + kEditCache * 4;
}

__device__ __forceinline__ Smem carve(uint8_t* base, int vocab, int tiles) {
  Smem s;
  s.bitmap = reinterpret_cast<uint32_t*>(base);
  base += align8(static_cast<size_t>((vocab + 31) / 32) * 4);
  s.tile_max = reinterpret_cast<uint32_t*>(base);
  base += align8(static_cast<size_t>(tiles) * 4);
  s.dirty = reinterpret_cast<uint32_t*>(base);
  base += align8(static_cast<size_t>((tiles + 31) / 32) * 4);
  s.hist = reinterpret_cast<uint32_t*>(base);
  base += kBins * 4;
  s.list = reinterpret_cast<int32_t*>(base);
  base += kBins * 4;
  s.cand = reinterpret_cast<uint64_t*>(base);
  base += kCap * 8;
  s.ranked = reinterpret_cast<uint64_t*>(base);
  base += kTop * 8;
  s.edit_token = reinterpret_cast<int32_t*>(base);
  base += kEditCache * 4;
  s.edit_value = reinterpret_cast<float*>(base);
  return s;
}

__device__ __forceinline__ bool bit_set(const uint32_t* bits, int i) {
  return ((bits[i >> 5] >> (i & 31)) & 1u) != 0u;
}

// hist[bin] += 1 for every calling thread, one atomic per distinct bin among the warp's callers.
__device__ __forceinline__ void hist_add(uint32_t* hist, uint32_t bin) {
  const cg::coalesced_group active = cg::coalesced_threads();
  const cg::coalesced_group same = cg::labeled_partition(active, bin);
  if (same.thread_rank() == 0) atomicAdd(&hist[bin], same.size());
}

// A distinct slot from *counter for every calling thread, one atomic per warp.
__device__ __forceinline__ int claim_slot(int* counter) {
  const cg::coalesced_group active = cg::coalesced_threads();
  int base = 0;
  if (active.thread_rank() == 0) base = atomicAdd(counter, static_cast<int>(active.size()));
  return active.shfl(base, 0) + static_cast<int>(active.thread_rank());
}

// Small per-block scratch for reductions and scans.
struct Scratch {
  uint32_t warp[kWarps + 1];
  int bin;
  uint32_t above, in_bin;
};

// The histogram bin b, scanning from the top, where the count reaches `need`: the bins above b
// hold `above` < need keys and b brings the count to at least need. Returns -1 when the whole
// histogram holds fewer than need keys. Every thread gets the answer.
__device__ __noinline__ int find_bin_from_top(const uint32_t* hist, uint32_t need, Scratch& sc,
                                              uint32_t* above, uint32_t* in_bin) {
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  uint32_t c[4];
  uint32_t local = 0;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    c[q] = hist[kBins - 1 - (tid * 4 + q)];  // thread 0 holds the top four bins
    local += c[q];
  }
  uint32_t inclusive = local;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t y = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += y;
  }
  if (lane == 31) sc.warp[warp] = inclusive;
  if (tid == 0) sc.bin = -1;
  __syncthreads();
  // The warps' totals scanned in every warp (a lane a warp): the keys in the bins above warp's.
  uint32_t warps = lane < kWarps ? sc.warp[lane] : 0u;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t y = __shfl_up_sync(0xffffffffu, warps, o);
    if (lane >= o) warps += y;
  }
  const uint32_t warps_above = __shfl_sync(0xffffffffu, warps, warp > 0 ? warp - 1 : 0);
  uint32_t acc = inclusive - local + (warp > 0 ? warps_above : 0u);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    if (acc < need && acc + c[q] >= need) {
      sc.bin = kBins - 1 - (tid * 4 + q);
      sc.above = acc;
      sc.in_bin = c[q];
    }
    acc += c[q];
  }
  __syncthreads();
  const int bin = sc.bin;
  *above = sc.above;
  *in_bin = sc.in_bin;
  __syncthreads();
  return bin;
}

// One radix round over the keys visit() yields: the digit of `bits` bits at `shift` of the keys
// whose bits above shift + bits equal `prefix`; returns the bin where the count from the top
// reaches `need` (find_bin_from_top). Plain atomics: the keys that match a prefix spread over the
// round's bins, so hist_add's per-warp grouping would cost more than it saves.
template <typename Visit>
__device__ int radix_round(const Smem& sh, Scratch& sc, Visit&& visit, int shift, int bits,
                           uint64_t prefix, uint32_t need, uint32_t* above, uint32_t* in_bin) {
  for (int b = static_cast<int>(threadIdx.x); b < kBins; b += kThreads) sh.hist[b] = 0u;
  __syncthreads();
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  visit([&](uint64_t key) {
    if ((key >> (shift + bits)) == prefix)
      atomicAdd(&sh.hist[static_cast<uint32_t>((key >> shift) & mask)], 1u);
  });
  __syncthreads();
  return find_bin_from_top(sh.hist, need, sc, above, in_bin);
}

// The top 11 bits of a 32-bit key: the pivot's first radix digit.
__device__ __forceinline__ uint32_t first_digit(uint32_t key) { return key >> 21; }

template <typename T>
// One block an SM by the bound: left to itself, ptxas capped the bf16 kernel at 64 registers and
// spilled (104 bytes a thread) in the chain's phases.
__global__ void __launch_bounds__(kThreads, 1)
    sample_tiles_kernel(const __grid_constant__ SampleRowsParams p,
                        const __grid_constant__ TilesLaunch launch) {
  cuda::PhaseTraceThrough trace(cuda::phase_trace_records(launch));
  cuda::touch_params(p);
  cuda::touch_params(launch);
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ Scratch sc;
  __shared__ int s_count;
  __shared__ unsigned long long s_top;  // the largest candidate key gathered
  __shared__ uint32_t s_bad, s_nan, s_stale;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5;
  const int64_t row = blockIdx.x;
  const int tile_tokens = launch.tile_tokens, tiles = launch.tiles;
  // 1. Before the PDL wait, what the host uploaded before the step's first kernel (no kernel this
  // one may overlap writes it): the epoch, the row's parameters and its edit list, checked and
  // marked in the bitmap. Only the summaries, the count words and the logits come from the kernel
  // before (the LM head), so this part overlaps it instead of lying on the chain after it.
  const uint32_t epoch = *launch.epoch;
  const SamplingRowParams rp = p.rows[row];
  const bool params_ok = sampling_row_params_valid(rp, p.max_top_logprobs);
  const bool range_ok = rp.edit_count >= 0 && rp.edit_begin >= 0 && rp.edit_begin <= p.num_edits &&
                        rp.edit_count <= p.num_edits - rp.edit_begin &&
                        (rp.edit_count == 0 || p.edits != nullptr);
  const int num_edits = range_ok ? rp.edit_count : 0;
  const TokenEdit* edits = p.edits + (range_ok ? rp.edit_begin : 0);
  // The thread's first edit (j = tid), asked for before the barrier below.
  TokenEdit first_edit{};
  if (tid < num_edits) first_edit = edits[tid];
  // The draw's random bits depend on the parameters alone: computed while the loads wait.
  const sampling::Philox4 draw = sampling::draw_bits(rp.seed, rp.step);
  const int vocab = static_cast<int>(p.vocab_size);
  const Smem sh = carve(smem, vocab, tiles);
  const typename T::Storage* x =
      static_cast<const typename T::Storage*>(p.logits) + row * p.vocab_size;

  auto finish_row = [&](int32_t token, uint32_t error, uint32_t nonfinite) {
    if (tid == 0) {
      p.tokens[row] = token;
      p.errors[row] = error;
      if (p.nonfinite_counts != nullptr) p.nonfinite_counts[row] = static_cast<int32_t>(nonfinite);
    }
    trace.mark(kTileMarkToken);
    trace.finish();
  };

  const float rep = rp.repetition_penalty, freq = rp.frequency_penalty, pres = rp.presence_penalty;
  for (int w = tid; w < (vocab + 31) / 32; w += kThreads) sh.bitmap[w] = 0u;
  for (int w = tid; w < (tiles + 31) / 32; w += kThreads) sh.dirty[w] = 0u;
  for (int b = tid; b < kBins; b += kThreads) sh.hist[b] = 0u;
  if (tid == 0) {
    s_bad = range_ok ? 0u : 1u;
    s_nan = 0u;
    s_stale = epoch >= 1u && epoch < kLogitTileEpochs ? 0u : 1u;
    s_count = 0;
  }
  __syncthreads();
  // The edits marked.
  for (int j = tid; j < num_edits; j += kThreads) {
    const TokenEdit e = j == tid ? first_edit : edits[j];
    bool bad = e.token < 0 || e.token >= vocab || e.generated_count < 0 ||
               (e.in_prompt != 0 && e.in_prompt != 1) || !sampling::is_finite(e.bias);
    if (!bad) {
      const uint32_t bit = 1u << (e.token & 31);
      bad = (atomicOr(&sh.bitmap[e.token >> 5], bit) & bit) != 0u;  // listed twice
    }
    if (bad) s_bad = 1u;
    if (j < kEditCache) sh.edit_token[j] = e.token;
  }
  __syncthreads();  // the bitmap complete: the summaries below find their dirty tiles in it
  trace.mark_after(kTileMarkEdits, static_cast<uint32_t>(rp.top_k));

  // 2. Past the PDL wait: the LM head's outputs. The summary words and the row's non-finite count
  // go out first, in flight together.
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  const uint64_t* words = launch.words + row * tiles;
  uint64_t raw[kInFlight];
#pragma unroll
  for (int q = 0; q < kInFlight; ++q) {
    const int t = tid + q * kThreads;
    raw[q] = t < tiles ? words[t] : 0u;
  }
  const uint64_t nonfinite_word = launch.nonfinite[row];
  // The logit at the thread's first edited token, asked for here and used only after the pivot,
  // which does not need it: one unconditional load (of token 0 where the thread has no valid
  // edit) kept in its storage type, so that no instruction waits for it before then. (A load in
  // the edits' loop, predicated into the same register in each unrolled iteration, made every
  // iteration wait for the one before.)
  const bool first_ok = tid < num_edits && first_edit.token >= 0 && first_edit.token < vocab;
  const typename T::Storage first_raw = x[first_ok ? first_edit.token : 0];
  trace.mark(kTileMarkWait);
  auto take_summary = [&](int t, uint64_t w) {
    if (logit_tile::epoch_of(w) != epoch) {
      s_stale = 1u;
      sh.tile_max[t] = 0u;
      return;
    }
    const uint32_t key = logit_tile::key_of(w);
    sh.tile_max[t] = key;
    if (key == 0u) return;
    // A position outside the tile cannot be trusted: the tile is dirty, read if it qualifies.
    const int index = logit_tile::index_of(w), token = t * tile_tokens + index;
    if (index >= tile_tokens || token >= vocab || bit_set(sh.bitmap, token)) {
      atomicOr(&sh.dirty[t >> 5], 1u << (t & 31));
    } else {
      hist_add(sh.hist, first_digit(key));
    }
  };
#pragma unroll
  for (int q = 0; q < kInFlight; ++q) {
    const int t = tid + q * kThreads;
    if (t < tiles) take_summary(t, raw[q]);
  }
  for (int t0 = tid + kInFlight * kThreads; t0 < tiles; t0 += kInFlight * kThreads) {
#pragma unroll
    for (int q = 0; q < kInFlight; ++q) {
      const int t = t0 + q * kThreads;
      raw[q] = t < tiles ? words[t] : 0u;
    }
#pragma unroll
    for (int q = 0; q < kInFlight; ++q) {
      const int t = t0 + q * kThreads;
      if (t < tiles) take_summary(t, raw[q]);
    }
  }
  __syncthreads();
  trace.mark(kTileMarkRead);
  // A stale count word reads 0: a writer touches it only where it finds non-finite logits.
  const uint32_t nonfinite = logit_tile::nonfinite_count(nonfinite_word, epoch);
  uint32_t error = 0;
  if (!params_ok) error |= kSamplingBadParams;
  if (s_bad != 0u) error |= kSamplingBadEdits;
  if (nonfinite > 0) error |= kSamplingNonFiniteLogits;
  if (error == 0 && (s_stale != 0u || !sample_row_uses_tiles(rp, vocab)))
    error = kSamplingNeedsFullRow;
  if (error != 0) {
    finish_row(-1, error, nonfinite);
    return;
  }
  auto edit_at = [&](int j, int32_t* token) -> float {
    if (j < kEditCache) {
      *token = sh.edit_token[j];
      return sh.edit_value[j];
    }
    const TokenEdit e = edits[j];
    *token = e.token;
    return sampling::apply_edit(T::to_f32(x[e.token]), e, rep, freq, pres);
  };

  const bool greedy = rp.temperature == 0.0f;
  const uint32_t k = greedy ? 1u : static_cast<uint32_t>(rp.top_k);
  const float temperature = rp.temperature;
  // The score the chain ranks by: the edited value itself when greedy, else s = x / T (-0 as +0).
  auto score = [&](float v) {
    return greedy ? (v == 0.0f ? 0.0f : v) : sampling::scaled_logit(v, temperature);
  };

  // 3. The pivot: a lower bound v on the k-th largest of L. Once its first digit b1 is known,
  // every tile whose maximum has a digit >= b1 may hold a candidate: those tiles are listed (the
  // tiles the gather reads) and their lines asked into L2, so that the gather finds them there
  // rather than in DRAM. When they hold few tokens (one 16-byte load a thread), v is the
  // smallest value of digit b1 and the second radix round is not run: reading a few more tiles
  // costs less than the round's barriers (measured: tiles of 16 tokens gain ~2.5 us a step at
  // batch 64; tiles of 128, whose digit-b1 tiles hold ~10k tokens, lose ~0.5 us to the larger
  // ranking, hence the bound). Otherwise the round, listing as it visits, narrows v to a 22-bit
  // prefix.
  const auto* x_bytes = reinterpret_cast<const char*>(x);
  const int tile_bytes = tile_tokens * static_cast<int>(sizeof(typename T::Storage));
  constexpr int kVec = cuda::kVec16<T>;
  float v_floor = -INFINITY;
  int listed = kBins + 1;  // more than the list holds: every token of the row is tested
  {
    uint32_t above = 0, in_bin = 0;
    const int b1 = find_bin_from_top(sh.hist, k, sc, &above, &in_bin);
    trace.mark(kTileMarkFirstDigit);
    if (b1 >= 0) {
      auto list_tile = [&](int t, uint32_t key) {
        if (first_digit(key) < static_cast<uint32_t>(b1)) return;
        const char* first = x_bytes + t * tile_bytes;
        const int offset = static_cast<int>(reinterpret_cast<uintptr_t>(first) & 127u);
        const int lines = (offset + tile_bytes + 127) >> 7;  // a 32-bit count, not a 64-bit loop
        for (int l = 0; l < lines; ++l)
          asm volatile("prefetch.global.L2 [%0];" ::"l"(first - offset + l * 128));
        const int slot = claim_slot(&s_count);
        if (slot < kBins) sh.list[slot] = t;
      };
      uint32_t key_floor = static_cast<uint32_t>(b1) << 21;
      if (static_cast<int64_t>(above + in_bin) * tile_tokens <= int64_t{kThreads} * kVec) {
        for (int t = tid; t < tiles; t += kThreads) {
          const uint32_t key = sh.tile_max[t];
          if (key != 0u) list_tile(t, key);
        }
        __syncthreads();
      } else {
        auto visit_l = [&](auto&& f) {
          for (int t = tid; t < tiles; t += kThreads) {
            const uint32_t key = sh.tile_max[t];
            if (key == 0u) continue;
            list_tile(t, key);
            if (!bit_set(sh.dirty, t)) f(static_cast<uint64_t>(key));
          }
        };
        const int b2 = radix_round(sh, sc, visit_l, 10, 11, static_cast<uint64_t>(b1), k - above,
                                   &above, &in_bin);
        key_floor |= static_cast<uint32_t>(b2) << 10;
      }
      const float v = sampling::key_value(key_floor);
      // Below -inf's key lie NaN patterns: a pivot there is -inf itself.
      v_floor = v == v ? v : -INFINITY;
      listed = s_count;  // read after the barriers above; reset after the barrier below
    }
  }
  const float s_floor = score(v_floor);

  // The edited values (bias, penalties), the first kEditCache on chip; every one checked for NaN
  // (only an overflow to inf, then inf - inf, gets one).
  for (int j = tid; j < num_edits; j += kThreads) {
    const TokenEdit e = j == tid ? first_edit : edits[j];
    const float raw_value = T::to_f32(j == tid ? first_raw : x[e.token]);
    const float v = sampling::apply_edit(raw_value, e, rep, freq, pres);
    if (v != v) s_nan = 1u;
    if (j < kEditCache) sh.edit_value[j] = v;
  }
  __syncthreads();
  if (s_nan != 0u) {
    finish_row(-1, kSamplingBadEdits, 0);
    return;
  }
  // The smallest raw value whose score reaches s_floor (the score is monotone in it): a token
  // below it is no candidate, without the division its score costs. Stepping down from v_floor
  // (whose score is s_floor) ends within a few floats, as division by T maps at most a few
  // consecutive floats to one; where it does not (scores near 0 under a huge T), every token
  // is scored.
  float r_cut = v_floor;
  if (!greedy && v_floor > -INFINITY) {
    int step = 0;
#pragma unroll 1
    for (; step < 16; ++step) {
      const float below = nextafterf(r_cut, -INFINITY);
      if (!(score(below) >= s_floor)) break;
      r_cut = below;
    }
    if (step == 16) r_cut = -INFINITY;
  }
  trace.mark(kTileMarkPivot);

  // 4. The candidates: tokens whose score reaches s_floor, from the listed tiles that reach it
  // when the list holds them all; otherwise every token of the row is tested.
  auto tile_reaches = [&](int t) {
    const uint32_t key = sh.tile_max[t];
    return key != 0u && sampling::key_value(key) >= r_cut;
  };
  bool use_list = listed <= kBins;
  // 16-byte loads of the listed tiles when every tile starts on a 16-byte boundary of the row.
  // Loads a thread keeps in flight over the listed tiles (their passing tokens fit one 32-bit
  // mask). Eight f32 packs measured 1.3 us faster at batch 64 but 7 us slower at batch 256: the
  // kernel's 127 registers then fit one block an SM, so 256 rows took two waves.
  constexpr int kPacks = 4;
  static_assert(kPacks * kVec <= 32, "a thread's passing tokens fit one 32-bit mask");
  const int unit = launch.unit;  // tokens a load brings: kVec, or 1 where tiles are not aligned
  const bool vector_ok = unit == kVec;
  const int units_per_tile = tile_tokens / unit;

  // What a visit does with each candidate's rank key: gathers it (count == false: a slot for
  // every key >= at_least) or counts its digit of `bits` bits at `shift` where the bits above
  // match `prefix` (a radix round). One visit routine serves both, so its code exists once:
  // the kernel's instruction footprint, not its arithmetic, is what a one-block-per-row chain
  // of short phases pays for.
  bool count = false;
  int shift = 0, bits = 0;
  uint64_t prefix = 0, at_least = 0;
  auto emit = [&](uint64_t key) {
    if (count) {
      if ((key >> (shift + bits)) == prefix)
        hist_add(sh.hist, static_cast<uint32_t>((key >> shift) & ((uint64_t{1} << bits) - 1)));
    } else if (key >= at_least) {
      const int slot = claim_slot(&s_count);
      if (slot < kCap) sh.cand[slot] = key;
      atomicMax(&s_top, static_cast<unsigned long long>(key));
    }
  };
  // An unedited token whose raw value reaches r_cut (tested by the caller).
  auto consider = [&](int id, float raw_value) {
    if (bit_set(sh.bitmap, id)) return;  // edited: from the edit list
    const float s = score(raw_value);
    if (s >= s_floor) emit(sampling::rank_key(s, id));
  };
  // The first token of unit i of the listed tiles; vocab where its tile does not reach r_cut.
  // i / units_per_tile by the host's multiplier (a division would cost ~20 instructions a call).
  auto unit_first = [&](int i) {
    const int entry = static_cast<int>((static_cast<uint64_t>(i) * launch.unit_magic) >> 40);
    const int t = sh.list[entry];
    return tile_reaches(t) ? t * tile_tokens + (i - entry * units_per_tile) * unit : vocab;
  };
  auto visit_candidates = [&] {
    if (use_list) {
      // kPacks loads a thread, their tokens tested against r_cut into a mask; the few that
      // pass are read again (from L1) and considered one by one.
      const int units = listed * units_per_tile;
      for (int i0 = tid; i0 < units; i0 += kPacks * kThreads) {
        uint32_t pass = 0;
        int firsts[kPacks];  // vocab: no pack (past the listed units, or the row's end)
#pragma unroll
        for (int q = 0; q < kPacks; ++q) {
          const int i = i0 + q * kThreads;
          firsts[q] = i < units ? unit_first(i) : vocab;
        }
        if (vector_ok) {
          float vals[kPacks][kVec];
#pragma unroll
          for (int q = 0; q < kPacks; ++q)  // a pack that starts inside the row ends inside it
            if (firsts[q] < vocab) cuda::load_f32<T, kVec>(x + firsts[q], vals[q]);
#pragma unroll
          for (int q = 0; q < kPacks; ++q) {
            if (firsts[q] >= vocab) continue;
            // Most packs hold no passing token: their maximum, tested once, says so.
            float most = vals[q][0];
#pragma unroll
            for (int e = 1; e < kVec; ++e) most = fmaxf(most, vals[q][e]);
            if (!(most >= r_cut)) continue;
#pragma unroll
            for (int e = 0; e < kVec; ++e)
              if (vals[q][e] >= r_cut) pass |= 1u << (q * kVec + e);
          }
        } else {
          float vals[kPacks];
#pragma unroll
          for (int q = 0; q < kPacks; ++q)
            vals[q] = firsts[q] < vocab ? T::to_f32(x[firsts[q]]) : 0.0f;
#pragma unroll
          for (int q = 0; q < kPacks; ++q)
            if (firsts[q] < vocab && vals[q] >= r_cut) pass |= 1u << (q * kVec);
        }
        while (pass != 0u) {
          const int b = __ffs(static_cast<int>(pass)) - 1;
          pass &= pass - 1u;
          const int id = unit_first(i0 + (b / kVec) * kThreads) + b % kVec;
          consider(id, T::to_f32(x[id]));
        }
      }
    } else {
      for (int i = tid; i < vocab; i += kThreads) {
        if (!tile_reaches(i / tile_tokens)) continue;
        const float raw_value = T::to_f32(x[i]);
        if (raw_value >= r_cut) consider(i, raw_value);
      }
    }
    for (int j = tid; j < num_edits; j += kThreads) {
      int32_t token;
      const float v = edit_at(j, &token);
      if (!(v >= r_cut)) continue;
      const float s = score(v);
      if (s >= s_floor) emit(sampling::rank_key(s, token));
    }
  };

  // Gather every candidate; more than kCap (a row of many equal values): five radix rounds over
  // their 50-bit rank keys find the k-th key exactly (bits 49..39, 38..28, 27..17, 16..6, 5..0),
  // then only the keys at or above it are gathered (exactly k). Stage -1 gathers from 0, stages
  // 0..4 count, stage 5 gathers from the k-th key; every stage runs the one visit above.
  int n = 0;
  uint32_t need = k;
#pragma unroll 1
  for (int stage = -1;;) {
    count = stage >= 0 && stage < 5;
    if (count) {
      bits = stage < 4 ? 11 : 6;
      shift = stage < 4 ? 39 - 11 * stage : 0;
      for (int b = tid; b < kBins; b += kThreads) sh.hist[b] = 0u;
    } else {
      at_least = stage < 0 ? 0 : prefix;
      if (tid == 0) {
        s_count = 0;
        s_top = 0u;
      }
    }
    __syncthreads();
    visit_candidates();
    __syncthreads();
    if (!count) {
      n = s_count;
      __syncthreads();
      if (stage < 0) trace.mark(kTileMarkGathered);
      if (stage == 5 || n <= kCap) break;
      stage = 0;
      continue;
    }
    uint32_t above = 0, in_bin = 0;
    const int bin = find_bin_from_top(sh.hist, need, sc, &above, &in_bin);
    if (bin < 0) {  // fewer than k tokens: cannot happen with true summaries (below)
      n = 0;
      break;
    }
    prefix = (prefix << bits) | static_cast<uint64_t>(bin);
    need -= above;
    if (++stage == 5) trace.mark(kTileMarkExact);
  }
  // Summaries that describe these logits always leave at least k candidates (sampling.h); any
  // other input is refused rather than sampled from a partial ranking.
  if (n < static_cast<int>(k) || n > kCap) {
    finish_row(-1, kSamplingNeedsFullRow, 0);
    return;
  }

  // 6. The top k in rank order by counting: a candidate's rank is the number of keys above it
  // (keys are distinct). Up to kThreads / 4 candidates, four lanes of a warp share one, each
  // counting a quarter of the keys, summed by two shuffles. The thread that places a key also
  // computes its relative probability against the best key (s_top), so that the finish's warp
  // does not compute the exponentials one run at a time.
  const float s_max = sampling::rank_key_value(s_top);
  float* rel = reinterpret_cast<float*>(sh.hist);  // [kTop]: the histograms are done with
  const int parts = n <= kThreads / 4 ? 4 : 1;
  for (int i0 = 0; i0 < n * parts; i0 += kThreads) {  // block-uniform: every lane shuffles
    const int c = (i0 + tid) / parts, part = (i0 + tid) % parts;
    const uint64_t key = c < n ? sh.cand[c] : 0u;
    int above = 0;
    if (c < n)
      for (int j = part; j < n; j += parts) above += sh.cand[j] > key ? 1 : 0;
    if (parts == 4) {
      above += __shfl_xor_sync(0xffffffffu, above, 1);
      above += __shfl_xor_sync(0xffffffffu, above, 2);
    }
    if (c < n && part == 0 && above < static_cast<int>(k)) {
      sh.ranked[above] = key;
      rel[above] = sampling::relative_prob(sampling::rank_key_value(key), s_max);
    }
  }
  __syncthreads();
  if (warp != 0) return;
  trace.mark(kTileMarkRanked);
  int32_t token = sampling::rank_key_id(sh.ranked[0]);
  if (!greedy && sampling::is_finite(s_max))
    token = sampling::rank_key_id(sh.ranked[sampling::draw_rank_in_warp(
        static_cast<int>(k), [&](int i) { return rel[i]; }, rp.top_p, rp.min_p, draw)]);
  finish_row(token, 0u, 0u);
}

template <typename T>
void launch_sample_tiles(const SampleRowsParams& p, const LogitTileSummaries& summaries,
                         cudaStream_t stream) {
  constexpr int kMaxDevices = 64;
  static std::once_flag once[kMaxDevices];
  int device = 0;
  ROOFLINE_CUDA_CHECK(cudaGetDevice(&device));
  ROOFLINE_CHECK(device >= 0 && device < kMaxDevices);
  std::call_once(once[device], [] {
    ROOFLINE_CUDA_CHECK(cudaFuncSetAttribute(
        sample_tiles_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
        static_cast<int>(tiles_smem_bytes(sampling::kMaxVocab, kLogitTileMaxTiles))));
  });
  const int64_t tiles = logit_tiles(p.vocab_size, summaries.tile_tokens);
  TilesLaunch launch;
  launch.words = summaries.words;
  launch.nonfinite = summaries.nonfinite;
  launch.epoch = summaries.epoch;
  launch.tile_tokens = static_cast<int>(summaries.tile_tokens);
  launch.tiles = static_cast<int>(tiles);
  constexpr int kVec = cuda::kVec16<T>;
  const bool aligned = summaries.tile_tokens % kVec == 0 && p.vocab_size % kVec == 0 &&
                       cuda::is_aligned(p.logits, 16);
  launch.unit = aligned ? kVec : 1;
  const uint64_t units_per_tile = static_cast<uint64_t>(summaries.tile_tokens / launch.unit);
  launch.unit_magic = ((uint64_t{1} << 40) + units_per_tile - 1) / units_per_tile;
#if defined(ROOFLINE_PHASE_TRACE)
  launch.trace = sample_rows_tiles_phase_trace().next(p.num_rows);
#endif
  cuda::launch_pdl(sample_tiles_kernel<T>, dim3(static_cast<unsigned>(p.num_rows)), dim3(kThreads),
                   tiles_smem_bytes(p.vocab_size, tiles), stream, p, launch);
}

}  // namespace

#if defined(ROOFLINE_PHASE_TRACE)
PhaseTraceRecorder& sample_rows_tiles_phase_trace() {
  static PhaseTraceRecorder recorder;
  return recorder;
}
#endif

void sample_rows_tiles_cuda(const SampleRowsParams& p, const LogitTileSummaries& summaries,
                            CudaStream stream) {
  ROOFLINE_CHECK_MSG(p.vocab_size >= 1 && p.vocab_size <= sampling::kMaxVocab,
                     "sample_rows_tiles: vocab_size must be in [1, 2^18]");
  ROOFLINE_CHECK_MSG(summaries.tile_tokens >= 1 && summaries.tile_tokens <= kLogitTileMaxTokens,
                     "sample_rows_tiles: tile_tokens must be in [1, 4096]");
  ROOFLINE_CHECK_MSG(logit_tiles(p.vocab_size, summaries.tile_tokens) <= kLogitTileMaxTiles,
                     "sample_rows_tiles: at most 16384 tiles a row (a larger tile_tokens)");
  ROOFLINE_CHECK_MSG(p.dtype == DType::kF32 || p.dtype == DType::kBF16,
                     "sample_rows_tiles reads f32 or bf16 logits");
  ROOFLINE_CHECK_MSG(p.num_rows >= 0 && p.num_rows <= INT32_MAX,
                     "sample_rows_tiles: num_rows must be in [0, 2^31)");
  ROOFLINE_CHECK(p.num_edits >= 0);
  ROOFLINE_CHECK(p.max_top_logprobs >= 0 && p.max_top_logprobs <= kMaxTopLogprobs);
  if (p.num_rows == 0) return;
  ROOFLINE_CHECK(p.logits != nullptr && p.rows != nullptr && p.tokens != nullptr &&
                 p.errors != nullptr);
  const char* bad = logit_tiles_unsupported_reason(summaries, p.vocab_size);
  ROOFLINE_CHECK_MSG(bad == nullptr, bad);
  ROOFLINE_CHECK_MSG(
      cuda::is_aligned(summaries.words, 8) && cuda::is_aligned(summaries.nonfinite, 8),
      "sample_rows_tiles: the summary words must be 8-byte aligned");
  if (p.dtype == DType::kF32) {
    launch_sample_tiles<cuda::F32>(p, summaries, stream);
  } else {
    launch_sample_tiles<cuda::Bf16>(p, summaries, stream);
  }
  ROOFLINE_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace roofline
