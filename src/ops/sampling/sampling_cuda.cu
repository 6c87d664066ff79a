// argmax_cuda: greedy decoding of a batch, out[r] = argmax over row r of [num_rows, vocab_size]
// logits (f32 or bf16), with argmax_cpu's conventions: the lowest index wins ties, NaN is never
// chosen, -1 for a row that is all NaN.
//
// Algorithm: one block per row (grid-stride over rows). Each thread scans packs of the row
// (16-byte loads: 8 bf16 or 4 f32), four packs in flight per step, keeping its best (value,
// index); then a warp-shuffle reduction and one shared round over the warps. The best of two
// candidates is the larger value, or on equal values the lower index; NaN never compares larger
// or equal, so it is never taken, and the empty candidate (-inf, INT32_MAX) loses to any real
// -inf at a lower index. That order is total, so the reduction order cannot change the answer.
// A vocabulary that is not a multiple of the pack width is scanned in packs of one element when
// the pointer or row length forbids 16-byte loads.
//
// Bound: memory. Reads num_rows · vocab_size logits once (a 128k-vocabulary f32 row is 513 KB).
#include <algorithm>
#include <climits>
#include <cmath>
#include <mutex>
#include <type_traits>

#include "ops/common/cuda_async.cuh"
#include "ops/common/cuda_barrier.cuh"
#include "ops/common/cuda_launch.cuh"
#include "ops/common/cuda_phase_trace.cuh"
#include "ops/common/cuda_vector.cuh"
#include "ops/sampling/sampling.h"
#include "ops/sampling/sampling_warp.cuh"

namespace roofline {

namespace {

// 512 threads: a single decode row is the common case, so one block must pull a whole row at a
// good rate on its own; 512 threads x 4 packs keep 32 KB in flight.
constexpr int kThreads = 512;
// Packs per thread per step: four 16-byte loads in flight before the first comparison.
constexpr int kUnroll = 4;

// True when (v, i) beats (best, best_i).
__device__ __forceinline__ bool argmax_better(float v, int32_t i, float best, int32_t best_i) {
  return v > best || (v == best && i < best_i);
}

template <typename T, int N>
__global__ void __launch_bounds__(kThreads)
    argmax_kernel(const typename T::Storage* logits, int32_t* out, int64_t num_rows,
                  int64_t vocab_size) {
  using P = cuda::Pack<typename T::Storage, N>;
  __shared__ float s_value[32];
  __shared__ int32_t s_index[32];
  const int tid = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  const int packs = static_cast<int>(vocab_size / N);
  const int tail = static_cast<int>(vocab_size - static_cast<int64_t>(packs) * N);

  for (int64_t row = blockIdx.x; row < num_rows; row += gridDim.x) {
    const typename T::Storage* x = logits + row * vocab_size;
    float best = -INFINITY;
    int32_t best_i = INT32_MAX;
    for (int p0 = tid; p0 < packs; p0 += kUnroll * threads) {
      P raw[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int p = p0 + u * threads;
        if (p < packs) raw[u] = reinterpret_cast<const P*>(x)[p];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int p = p0 + u * threads;
        if (p < packs) {
#pragma unroll
          for (int i = 0; i < N; ++i) {
            const float v = T::to_f32(raw[u].v[i]);
            const int32_t index = p * N + i;
            if (argmax_better(v, index, best, best_i)) {
              best = v;
              best_i = index;
            }
          }
        }
      }
    }
    if (tid < tail) {
      const int32_t index = packs * N + tid;
      const float v = T::to_f32(x[index]);
      if (argmax_better(v, index, best, best_i)) {
        best = v;
        best_i = index;
      }
    }

#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float v = __shfl_xor_sync(0xffffffffu, best, offset);
      const int32_t index = __shfl_xor_sync(0xffffffffu, best_i, offset);
      if (argmax_better(v, index, best, best_i)) {
        best = v;
        best_i = index;
      }
    }
    const int lane = tid & 31;
    const int warp = tid >> 5;
    if (lane == 0) {
      s_value[warp] = best;
      s_index[warp] = best_i;
    }
    __syncthreads();
    if (warp == 0) {
      const int num_warps = threads >> 5;
      best = lane < num_warps ? s_value[lane] : -INFINITY;
      best_i = lane < num_warps ? s_index[lane] : INT32_MAX;
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1) {
        const float v = __shfl_xor_sync(0xffffffffu, best, offset);
        const int32_t index = __shfl_xor_sync(0xffffffffu, best_i, offset);
        if (argmax_better(v, index, best, best_i)) {
          best = v;
          best_i = index;
        }
      }
      if (lane == 0) out[row] = best_i == INT32_MAX ? -1 : best_i;
    }
    __syncthreads();  // s_value / s_index are rewritten for the next row
  }
}

template <typename T, int N>
void launch_argmax(const ArgmaxParams& p, cudaStream_t stream) {
  const int grid = static_cast<int>(std::min<int64_t>(p.num_rows, INT_MAX));
  argmax_kernel<T, N><<<grid, kThreads, 0, stream>>>(
      static_cast<const typename T::Storage*>(p.logits), p.out, p.num_rows, p.vocab_size);
}

}  // namespace

void argmax_cuda(const ArgmaxParams& p, CudaStream stream) {
  ROOFLINE_CHECK(p.num_rows >= 0 && p.vocab_size >= 0 && p.vocab_size < INT32_MAX);
  if (p.num_rows == 0) return;
  ROOFLINE_CHECK(p.out != nullptr && (p.logits != nullptr || p.vocab_size == 0));
  cuda::dispatch_activation(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = cuda::kVec16<T>;
    if (p.vocab_size % kVec == 0 && cuda::is_aligned(p.logits, 16)) {
      launch_argmax<T, kVec>(p, stream);
    } else {
      launch_argmax<T, 1>(p, stream);
    }
  });
  ROOFLINE_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace roofline

// ---------------------------------------------------------------------------------------------
// sample_rows_cuda: the batched sampling chain (sampling.h), one block per row (or per slice of a
// row, below), the whole chain in one kernel. Nothing sorts the vocabulary; the kept tokens are
// found by selection:
//
// - Pass 1 (always): every logit once. NaN / inf count, the argmax of the edited logits x (greedy
//   rows end here: it is also the best x, hence s_max = s(best x), s = x / T being monotone), each
//   thread's own best x, and the raw log-normaliser when logprobs are asked for. No division:
//   this pass is the one that reads DRAM, and it must keep up with it. A row without logprobs
//   runs it lean (pass_one_lean: a max per token and one compare per pack, the non-finite test
//   one fma per token, the packs streamed through shared memory by cp.async); per-token keys
//   made it ~40 instructions a token.
// - Top-k with k <= kSamplingFastTopK (the common case, e.g. k = 50): a lower bound v on the k-th
//   best of the threads' own bests (three radix rounds on the top 24 key bits) is a pivot: at
//   least k tokens have x >= v, so the k-th best s is at least s(v), and every top-k token has
//   s >= s(v). Pass 2 gathers the tokens with s >= s(v) into shared memory (typically a few
//   dozen; the division only for x within rounding of v or above), reading again only the
//   stripes of pass 1 whose best reaches v (a stripe is the packs one thread read; a few dozen of
//   512), all their packs in flight at once; in a split row, only the stripe's best slice unless
//   its second best slice reaches v too, in an unsplit row only the pack that held the stripe's
//   best unless another of its packs reaches v (StripeSlices). The candidates are ranked by
//   counting (or the bitonic sort above 256), and top-p, min-p and the draw run in one warp over
//   the first k.
// - Otherwise (no top-k, a large k, or a pivot that lets more than kCap tokens through): radix
//   selection on the 50-bit rank key, 11/11/10/9/9 bits per level. One pass per level builds a
//   histogram of token counts and integer weights of the tokens that share the key prefix found
//   so far, and picks the bin where the running count (top-k) or weight (top-p: ceil(top_p *
//   total); the draw: U + 1) is reached. As soon as the tokens at or above the chosen bin fit in
//   kCap they are gathered and finished on chip as above; at worst five passes pin the exact key.
//   top-k, then top-p, then the draw each select this way (each only over the tokens the earlier
//   stages keep).
// Exactness: rank keys are distinct (the id is in the low bits), so "the k-th token" and "the
// token where the cumulative weight reaches T" are unique, ties included (equal values rank the
// lower id first through the key). Weights are integers, so histogram sums are exact whatever the
// order of the atomics, and every decision equals the CPU twin's sequential one.
//
// Edits: a row's edited tokens are marked in a shared-memory bitmap (vocab / 8 bytes); the
// streaming loops skip marked tokens and each pass visits the row's edit list instead, so the
// edited values never need to be written anywhere.
//
// Split of small batches (sampling.h, sample_rows_split; needs p.workspace): one block per row
// keeps ~16 KB of a row in flight, so a batch of 1 at a 128k vocabulary took ~27 us greedy and ~60
// us sampled on the H200, bound by DRAM latency, not bandwidth. A batch of few enough rows to give
// each at least 2 slices within one block per SM (sample_rows_split) is launched as (slices, rows)
// blocks instead: each block runs pass 1 over its slice (every slices-th entry of the edit
// list), writes its counts, log-normaliser and best key
// to the workspace, and each thread's best keys; the row's last block to arrive (one
// acquire-release atomic, as decode attention merges its splits) merges them into what pass 1 over
// the whole row gives its threads: the counts and the normaliser sum exactly, a greedy row's argmax
// is the best of the slices' bests, and thread t's best key is the best of the t-th threads' of
// every slice, 512 bests of disjoint token sets as before, so the top-k pivot and everything after
// it are unchanged (thread t's stripe is then its packs in every slice; the merge also keeps the
// slice of thread t's best and the second best key, so the gather can skip the other slices,
// measured on the H200 at 128k bf16 sampled rows: batch 1 20.8 -> 19.2 us, 32 rows 21.7 -> 19.4,
// 64 rows 24.0 -> 21.9; bench/results/2026-12-02-sampling-slice-gather.md; the slices' thread keys
// are stored and merged as 32-bit values, the ids dropped: batch 1 19.2 -> 17.6 us, 32 rows 19.3 ->
// 18.7, 64 rows 21.8 -> 21.6; bench/results/2026-12-03-sampling-value-keys.md). That block then
// runs the later passes over the whole row as before (a row in error has its slices stream it
// without edits, so its merged non-finite count is exact whatever its edit list).
//
// The row's parameters, the edit list's checks and its bitmap come before the PDL wait, in every
// block (a split row's blocks each build the whole row's bitmap), so they overlap the kernel
// before (the LM head) instead of lying on the chain after it: the last block of a split row no
// longer checks the list and builds the bitmap after its merge (on an H100, 1 and 64 sampled rows
// 1.2 us faster, 256 rows 0.5 us; bench/results/2026-12-06-sampler-prewait.md). Tokens, errors and
// logprobs are identical to the unsplit kernel's (sampling_cuda_test runs both against the CPU
// twin).
//
// Bound: memory. Reads num_rows * vocab_size logits in pass 1 and again (from L2 when it holds
// them) in each further pass: two passes for a top-k <= 512 row.
namespace roofline {

namespace {

// 512 threads: one row per block, so a decode batch of 1 still has 512 threads pulling its row;
// two blocks fit an SM (registers and ~90 KB of shared memory each), so a batch of 256 rows runs
// in one wave on 132 SMs.
constexpr int kSampleThreads = 512;
static_assert(kSampleThreads == kSampleThreadsPerBlock, "sampling.h sizes the workspace by it");
constexpr int kSampleWarps = kSampleThreads / 32;
static_assert(kSamplingFastTopK <= kSampleThreads, "the pivot needs a thread-best per top-k slot");
// Candidates kept on chip: 2048 keys (16 KB); the weight scan reuses the histogram's 2048 slots.
constexpr int kCap = 2048;
constexpr int kMaxBins = 2048;
constexpr int kLevels = 5;
// 16-byte packs per thread per step in the streaming loops: four f32 packs, two bf16 packs (16
// values either way; four bf16 packs spill under the 64-register cap that two blocks per SM set).
template <int N>
constexpr int kSampleUnroll = N >= 8 ? 2 : 4;

__device__ __forceinline__ int digit_bits(int level) {
  return level < 2 ? 11 : level == 2 ? 10 : 9;
}

// The shared-memory regions of one block (dynamic shared memory; sizes in sample_smem_bytes).
struct Shared {
  uint32_t* bitmap;       // [ceil(vocab / 32)]: edited tokens
  uint32_t* hist_count;   // [kMaxBins]
  uint64_t* hist_weight;  // [kMaxBins]; also the candidates' weights when finishing on chip
  uint64_t* cand;         // [kCap]: gathered rank keys
};

__host__ __device__ inline size_t bitmap_words(int64_t vocab) {
  return static_cast<size_t>((vocab + 31) / 32);
}
size_t sample_smem_bytes(int64_t vocab) {
  return bitmap_words(vocab) * 4 + kMaxBins * 4 + kMaxBins * 8 + kCap * 8;
}

__device__ __forceinline__ Shared carve_shared(void* base, int vocab) {
  Shared s;
  auto* p = static_cast<uint8_t*>(base);
  s.cand = reinterpret_cast<uint64_t*>(p);
  p += kCap * 8;
  s.hist_weight = reinterpret_cast<uint64_t*>(p);
  p += kMaxBins * 8;
  s.hist_count = reinterpret_cast<uint32_t*>(p);
  p += kMaxBins * 4;
  s.bitmap = reinterpret_cast<uint32_t*>(p);
  (void)vocab;
  return s;
}

// What every pass needs to know about the row.
template <typename T>
struct RowView {
  const typename T::Storage* x;
  int vocab;
  const TokenEdit* edits;  // the row's own entries
  int num_edits;
  const uint32_t* bitmap;
  float temperature, repetition, frequency, presence;
  float s_max;

  // Whether an edit's token lies in the row: a split's slices run before the edit list is
  // checked, so they skip the others (such a row ends in error). Written as the negation of the
  // loops' former test, so their SASS stayed the same.
  __device__ __forceinline__ bool holds(const TokenEdit& ed) const {
    return !(ed.token < 0 || ed.token >= vocab);
  }
  // The row's penalties and bias applied to an edited token whose logit is v.
  __device__ __forceinline__ float edited(float v, const TokenEdit& ed) const {
    return sampling::apply_edit(v, ed, repetition, frequency, presence);
  }
};

// Calls visit(pack, p) for this thread's packs p of [pack_lo, pack_hi): pack_lo + threadIdx.x,
// then every kSampleThreads-th, kSampleUnroll<N> loads in flight (the threads' stripes).
template <typename T, int N, typename F>
__device__ __forceinline__ void for_each_pack(const RowView<T>& row, int pack_lo, int pack_hi,
                                              F&& visit) {
  using P = cuda::Pack<typename T::Storage, N>;
  constexpr int kUnroll = kSampleUnroll<N>;
  const P* x = reinterpret_cast<const P*>(row.x);
  for (int p0 = pack_lo + static_cast<int>(threadIdx.x); p0 < pack_hi;
       p0 += kUnroll * kSampleThreads) {
    P raw[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int p = p0 + u * kSampleThreads;
      if (p < pack_hi) raw[u] = x[p];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int p = p0 + u * kSampleThreads;
      if (p < pack_hi) visit(raw[u], p);
    }
  }
}

// Calls f(raw, edited, id) for edits first, first + step, ... of the row's edit list, shared out
// over the block's threads, skipping those outside the row (RowView::holds).
template <typename T, typename F>
__device__ __forceinline__ void for_each_edit(const RowView<T>& row, int first, int step, F&& f) {
  const int tid = static_cast<int>(threadIdx.x);
  for (int e = first + tid * step; e < row.num_edits; e += kSampleThreads * step) {
    const TokenEdit ed = row.edits[e];
    if (!row.holds(ed)) continue;
    const float v = T::to_f32(row.x[ed.token]);
    f(v, row.edited(v, ed), ed.token);
  }
}

// Calls f(raw, edited, id) for every token of packs [pack_lo, pack_hi) of the row exactly once:
// the unedited ones from the streaming loop, and edits edit_first, edit_first + edit_step, ... of
// the edit list (a split's slices share the list out; the bitmap of each slice marks the edited
// tokens in it).
template <typename T, int N, typename F>
__device__ __forceinline__ void for_each_token_in(const RowView<T>& row, int pack_lo, int pack_hi,
                                                  int edit_first, int edit_step, F&& f) {
  using P = cuda::Pack<typename T::Storage, N>;
  const bool edited = row.num_edits > 0;
  for_each_pack<T, N>(row, pack_lo, pack_hi, [&](const P& pk, int p) {
    const int first = p * N;
    // N divides 32 and packs are N-aligned, so a pack's bits sit in one word.
    const uint32_t skip = edited ? (row.bitmap[first >> 5] >> (first & 31)) : 0u;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if ((skip >> i) & 1u) continue;
      const float v = T::to_f32(pk.v[i]);
      f(v, v, first + i);
    }
  });
  for_each_edit(row, edit_first, edit_step, f);
}

// Where a row's stripes lie: pass 1 gives thread t of a block the packs t, t + kSampleThreads, ...
// of each of `slices` slices of `slice_packs` packs (one slice of the whole row without a split).
struct Stripes {
  int slices;
  int slice_packs;
};

// Where in a row's stripe its best tokens can lie, per thread. Split rows: of the t-th threads'
// best keys over the slices (pass 1's, each an upper bound on the unedited tokens of its slice's
// packs of the stripe), the largest one's slice and the second largest key (0: none); a stripe
// whose second key is below a floor holds tokens that reach the floor only in that one slice.
// Unsplit rows: slice 0, no second key, and the pack that held the thread's best streamed x and
// the largest x of the stripe's other packs (the lean pass 1's Pass1::stripe_pack and
// stripe_second; -1 / +inf: unknown); with that below the floor, only the one pack holds tokens
// that reach it. (Split rows would need a workspace word per thread and slice for the same: the
// gather then measured 0.4 us shorter at 64 rows but the launch no faster, and 1 row 0.7 us
// slower; bench/results/2026-12-07-best-pack.md.)
struct StripeSlices {
  int best_slice = 0;
  uint64_t second = 0;
  int pack = -1;
  float pack_second = INFINITY;
};

// Thread t's edit t of the row (the first for_each_edit(row, 0, 1, f) gives it), read ahead of
// its use: the sampled top-k path reads it before the pivot, so the edit's load, then its token's
// logit load (issued before the stripe gather's list), are not two round trips in a row after the
// stripes: −0.34 µs a launch at 64 rows, −0.81 µs at 256 on an H100
// (bench/results/2026-12-07-edit-ahead.md).
struct EditAhead {
  TokenEdit ed;
  bool has = false;  // t < the row's edits and the token lies in the row
};

template <typename T>
__device__ __forceinline__ EditAhead read_edit_ahead(const RowView<T>& row) {
  EditAhead a;
  const int e = static_cast<int>(threadIdx.x);
  if (e < row.num_edits) {
    a.ed = row.edits[e];
    a.has = row.holds(a.ed);
  }
  return a;
}

// Calls f(raw, raw, id) for the unedited tokens of the packs whose largest value reaches `floor`
// in the stripes whose best x reaches it, and f(raw, edited, id) for every edit. Pass 1 left each
// thread its stripe's best edited x (`mine`, a rank key), so a stripe below `floor` holds no
// token that reaches it (edited tokens, in no stripe, come through the list). Typically a few
// dozen of the 512 stripes qualify; the whole block loads their packs together, item by item,
// so the row is not walked again and the loads are in flight at once. A split row's stripe whose
// second best slice (`where`) is below `floor` is read in its best slice only: its packs of one
// slice instead of all of them (at batch 1, 2 packs instead of 32). An unsplit row's stripe whose
// other packs stay below `floor` (where.pack_second) is read in its best pack only (where.pack):
// at top-k 50 most stripes, so at 256 rows ~60 packs instead of ~1,600, one round trip to DRAM
// instead of three (−5.1 us a launch on an H100). The edits come last, the thread's first from
// `ahead` (its logit loaded before the list is built). Uses hist_count.
template <typename T, int N, typename F>
__device__ void for_each_token_reaching_in_stripes(const RowView<T>& row, const Shared& sh,
                                                   float floor, uint64_t mine, Stripes stripes,
                                                   StripeSlices where, const EditAhead& ahead,
                                                   int* s_num, F&& f) {
  using P = cuda::Pack<typename T::Storage, N>;
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const float ahead_raw = ahead.has ? T::to_f32(row.x[ahead.ed.token]) : 0.0f;
  // Three lists in hist_count: stripes read in one slice (thread | slice << 16) from 0, stripes
  // read in every slice from kSampleThreads, single packs (their index; unsplit rows only) from
  // 2 kSampleThreads; s_num[0..2] count them.
  static_assert(3 * kSampleThreads <= kMaxBins, "the gather's lists fit hist_count");
  int* list = reinterpret_cast<int*>(sh.hist_count);
  if (tid < 3) s_num[tid] = 0;
  __syncthreads();
  const bool active = mine != 0 && sampling::rank_key_value(mine) >= floor;
  const bool whole = where.second != 0 && sampling::rank_key_value(where.second) >= floor;
  // `<`: an unknown pack_second (+inf) or a NaN reads the slice's whole stripe.
  const bool one = !whole && where.pack >= 0 && where.pack_second < floor;
  const int kind = whole ? 1 : one ? 2 : 0;
#pragma unroll
  for (int which = 0; which < 3; ++which) {
    const bool mine_here = active && kind == which;
    const unsigned ballot = __ballot_sync(0xffffffffu, mine_here);
    int base = 0;
    if (lane == 0 && ballot != 0u) base = atomicAdd(&s_num[which], __popc(ballot));
    base = __shfl_sync(0xffffffffu, base, 0);
    if (mine_here)
      list[which * kSampleThreads + base + __popc(ballot & ((1u << lane) - 1u))] =
          which == 2   ? where.pack
          : which == 1 ? tid
                       : tid | (where.best_slice << 16);
  }
  __syncthreads();
  const int num_single = s_num[0], num_whole = s_num[1], num_one = s_num[2];
  const int packs = row.vocab / N;
  const int per_slice = (stripes.slice_packs + kSampleThreads - 1) / kSampleThreads;
  const int per_stripe = stripes.slices * per_slice;
  const int single_items = num_single * per_slice;
  const int items = num_one + single_items + num_whole * per_stripe;
  const bool edited = row.num_edits > 0;
  // One pack at a time: batches of two or four measured slower (spills under the 64-register
  // cap; run 6 of bench/results/2026-12-01-sampling-lean-passes.md). The single packs first.
  for (int i = tid; i < items; i += kSampleThreads) {
    int p;
    if (i < num_one) {
      p = list[2 * kSampleThreads + i];
    } else {
      int slice, local;
      const int j = i - num_one;
      if (j < single_items) {
        const int entry = j / per_slice;
        const int packed = list[entry];
        slice = packed >> 16;
        local = (packed & 0xffff) + (j - entry * per_slice) * kSampleThreads;
      } else {
        const int w = j - single_items;
        const int stripe = w / per_stripe;
        const int rem = w - stripe * per_stripe;
        slice = rem / per_slice;
        local = list[kSampleThreads + stripe] + (rem - slice * per_slice) * kSampleThreads;
      }
      if (local >= stripes.slice_packs) continue;
      p = slice * stripes.slice_packs + local;
    }
    if (p >= packs) continue;
    const P pk = reinterpret_cast<const P*>(row.x)[p];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < N; ++k) m = fmaxf(m, T::to_f32(pk.v[k]));
    if (!(m >= floor)) continue;
    const int first = p * N;
    const uint32_t skip = edited ? (row.bitmap[first >> 5] >> (first & 31)) : 0u;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if ((skip >> k) & 1u) continue;
      const float v = T::to_f32(pk.v[k]);
      f(v, v, first + k);
    }
  }
  if (ahead.has) f(ahead_raw, row.edited(ahead_raw, ahead.ed), ahead.ed.token);
  for_each_edit(row, kSampleThreads, 1, f);  // past the first kSampleThreads edits
  __syncthreads();                           // the list is hist_count's storage
}

// Every token of the row exactly once (for_each_token_in over the whole row).
template <typename T, int N, typename F>
__device__ __forceinline__ void for_each_token(const RowView<T>& row, F&& f) {
  for_each_token_in<T, N>(row, 0, row.vocab / N, 0, 1, f);
}

// In-place inclusive scan of a[0, n) (n <= kMaxBins) by the whole block; ends with a barrier.
template <typename V>
__device__ void block_inclusive_scan(V* a, int n, uint64_t* warp_tmp) {
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int per = (n + kSampleThreads - 1) / kSampleThreads;
  const int begin = min(tid * per, n), end = min(begin + per, n);
  uint64_t local = 0;
  for (int i = begin; i < end; ++i) local += a[i];
  uint64_t incl = local;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const uint64_t y = __shfl_up_sync(0xffffffffu, incl, off);
    if (lane >= off) incl += y;
  }
  if (lane == 31) warp_tmp[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    uint64_t w = lane < kSampleWarps ? warp_tmp[lane] : 0;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const uint64_t y = __shfl_up_sync(0xffffffffu, w, off);
      if (lane >= off) w += y;
    }
    if (lane < kSampleWarps) warp_tmp[lane] = w;
  }
  __syncthreads();
  uint64_t running = (incl - local) + (warp > 0 ? warp_tmp[warp - 1] : 0);
  for (int i = begin; i < end; ++i) {
    running += a[i];
    a[i] = static_cast<V>(running);
  }
  __syncthreads();
}

// The first index r of the inclusive scan a[0, n) with a[r] >= target (a is non-decreasing and
// a[n-1] >= target): computed by the block, returned to every thread.
__device__ int block_first_reaching(const uint64_t* a, int n, uint64_t target, int* s_index) {
  for (int r = static_cast<int>(threadIdx.x); r < n; r += kSampleThreads)
    if (a[r] >= target && (r == 0 || a[r - 1] < target)) *s_index = r;
  __syncthreads();
  const int r = *s_index;
  __syncthreads();
  return r;
}

// Bitonic sort of a[0, n) descending (n <= kCap), padded to a power of two with zeros (below every
// real key: the smallest real key, -inf at the highest id, is still > 0).
__device__ void block_sort_desc(uint64_t* a, int n) {
  int m = 1;
  while (m < n) m <<= 1;
  for (int i = n + static_cast<int>(threadIdx.x); i < m; i += kSampleThreads) a[i] = 0;
  __syncthreads();
  for (int size = 2; size <= m; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = static_cast<int>(threadIdx.x); i < (m >> 1); i += kSampleThreads) {
        const int lo = 2 * i - (i & (stride - 1));
        const int hi = lo + stride;
        const bool descending = (lo & size) == 0;
        const uint64_t a_lo = a[lo], a_hi = a[hi];
        if ((a_lo < a_hi) == descending) {
          a[lo] = a_hi;
          a[hi] = a_lo;
        }
      }
      __syncthreads();
    }
  }
}

enum class Query { kCount, kTopP, kDraw };

// Which tokens a selection ranges over: key >= lower_bound, and (for the draw) min-p.
struct Universe {
  uint64_t lower_bound = 0;
  float min_p = 0.0f;
  bool raw_keys = false;  // rank by the raw logits (the top logprobs) instead of s
};

struct Selected {
  uint64_t key = 0;    // the selected token's rank key
  int gathered = 0;    // > 0: the universe's tokens down to the selected bin sit sorted in cand
  uint64_t total = 0;  // the universe's total count or weight
};

struct RowState {
  float min_p, top_p;
  uint64_t seed;
  int64_t step;
};

__device__ __forceinline__ uint64_t token_key(float raw, float edited, int id, float temperature,
                                              bool raw_keys) {
  return sampling::rank_key(
      raw_keys ? (raw == 0.0f ? 0.0f : raw) : sampling::scaled_logit(edited, temperature), id);
}

// Radix selection (the header comment): the token where the running count reaches `count_target`
// (kCount) or the running weight reaches ceil(top_p * total) (kTopP) or U + 1 (kDraw).
template <typename T, int N>
__device__ Selected select_token(const RowView<T>& row, const Shared& sh, Query q,
                                 uint64_t count_target, const Universe& uni, const RowState& st,
                                 uint64_t* warp_tmp, int* s_index, int* s_count) {
  const bool mass = q != Query::kCount;
  uint64_t prefix = 0, above_count = 0, above_weight = 0, target = count_target, total = 0;
  int resolved = 0;
  const int tid = static_cast<int>(threadIdx.x);
  // The key tests first: the exp of the weight is paid only by tokens still in the running.
  auto in_universe = [&](float raw, float edited, int id, uint64_t* key, float* rel) {
    *key = token_key(raw, edited, id, row.temperature, uni.raw_keys);
    if (*key < uni.lower_bound) return false;
    if (resolved > 0 && (*key >> (sampling::kKeyBits - resolved)) < prefix) return false;
    if (mass) {
      *rel = sampling::relative_prob(sampling::rank_key_value(*key), row.s_max);
      if (!(*rel >= uni.min_p)) return false;
    }
    return true;
  };
  for (int level = 0; level < kLevels; ++level) {
    const int bits = digit_bits(level);
    const int bins = 1 << bits;
    const int shift = sampling::kKeyBits - resolved - bits;
    for (int i = tid; i < bins; i += kSampleThreads) {
      sh.hist_count[i] = 0;
      sh.hist_weight[i] = 0;
    }
    __syncthreads();
    for_each_token<T, N>(row, [&](float raw, float edited, int id) {
      uint64_t key;
      float rel = 0.0f;
      if (!in_universe(raw, edited, id, &key, &rel)) return;
      if (resolved > 0 && (key >> (sampling::kKeyBits - resolved)) != prefix) return;  // above
      // Stored top bin first, so the scans below run in rank order.
      const int j = bins - 1 - static_cast<int>((key >> shift) & static_cast<uint64_t>(bins - 1));
      atomicAdd(&sh.hist_count[j], 1u);
      if (mass) {
        atomicAdd(reinterpret_cast<unsigned long long*>(&sh.hist_weight[j]),
                  static_cast<unsigned long long>(sampling::weight_of(rel)));
      }
    });
    __syncthreads();
    block_inclusive_scan(sh.hist_count, bins, warp_tmp);
    if (mass) block_inclusive_scan(sh.hist_weight, bins, warp_tmp);
    if (level == 0) {
      total = mass ? sh.hist_weight[bins - 1] : sh.hist_count[bins - 1];
      if (q == Query::kTopP) target = sampling::top_p_threshold(st.top_p, total);
      if (q == Query::kDraw)
        target = sampling::uniform_below(sampling::draw_bits(st.seed, st.step), total) + 1;
    }
    // The bin where the running metric reaches the target (unique: empty bins cannot).
    const uint64_t above = mass ? above_weight : above_count;
    for (int j = tid; j < bins; j += kSampleThreads) {
      const uint64_t incl = mass ? sh.hist_weight[j] : sh.hist_count[j];
      const uint64_t excl = j == 0 ? 0 : (mass ? sh.hist_weight[j - 1] : sh.hist_count[j - 1]);
      if (above + excl < target && target <= above + incl) *s_index = j;
    }
    __syncthreads();
    const int j = *s_index;
    const uint64_t count_excl = j == 0 ? 0 : sh.hist_count[j - 1];
    const uint64_t bin_count = sh.hist_count[j] - count_excl;
    if (mass) above_weight += j == 0 ? 0 : sh.hist_weight[j - 1];
    above_count += count_excl;
    __syncthreads();  // the histogram is rewritten next
    prefix = (prefix << bits) | static_cast<uint64_t>(bins - 1 - j);
    resolved += bits;

    if (above_count + bin_count <= static_cast<uint64_t>(kCap)) {
      // Gather everything at or above this bin, rank it on chip, finish the selection there.
      const uint64_t lower = prefix << (sampling::kKeyBits - resolved);
      if (tid == 0) *s_count = 0;
      __syncthreads();
      for_each_token<T, N>(row, [&](float raw, float edited, int id) {
        uint64_t key;
        float rel = 0.0f;
        if (!in_universe(raw, edited, id, &key, &rel) || key < lower) return;
        sh.cand[atomicAdd(s_count, 1)] = key;
      });
      __syncthreads();
      const int n = *s_count;
      __syncthreads();
      block_sort_desc(sh.cand, n);
      int r;
      if (!mass) {
        r = static_cast<int>(target - 1);
      } else {
        for (int i = tid; i < n; i += kSampleThreads)
          sh.hist_weight[i] = sampling::weight_of(
              sampling::relative_prob(sampling::rank_key_value(sh.cand[i]), row.s_max));
        __syncthreads();
        block_inclusive_scan(sh.hist_weight, n, warp_tmp);
        r = block_first_reaching(sh.hist_weight, n, target, s_index);
      }
      return Selected{sh.cand[r], n, total};
    }
    if (resolved == sampling::kKeyBits) return Selected{prefix, 0, total};
  }
  return Selected{prefix, 0, total};  // not reached: the last level resolves every bit
}

// Top-p, min-p and the draw over sorted candidates cand[0, n): the top of the row's ranking,
// restricted to the top-k survivors, whose total weight is `total` (0: the sum of these n).
template <typename T>
__device__ int32_t finish_on_chip(const RowView<T>& row, const Shared& sh, int n, uint64_t total,
                                  const RowState& st, uint64_t* warp_tmp, int* s_index) {
  const int tid = static_cast<int>(threadIdx.x);
  uint64_t* w = sh.hist_weight;
  for (int i = tid; i < n; i += kSampleThreads)
    w[i] = sampling::weight_of(
        sampling::relative_prob(sampling::rank_key_value(sh.cand[i]), row.s_max));
  __syncthreads();
  block_inclusive_scan(w, n, warp_tmp);
  if (total == 0) total = w[n - 1];
  int kept = n;
  if (st.top_p < 1.0f)
    kept = block_first_reaching(w, n, sampling::top_p_threshold(st.top_p, total), s_index) + 1;
  for (int i = tid; i < kept; i += kSampleThreads) {
    const float rel = sampling::relative_prob(sampling::rank_key_value(sh.cand[i]), row.s_max);
    w[i] = rel >= st.min_p ? sampling::weight_of(rel) : 0;
  }
  __syncthreads();
  block_inclusive_scan(w, kept, warp_tmp);
  const uint64_t u = sampling::uniform_below(sampling::draw_bits(st.seed, st.step), w[kept - 1]);
  const int r = block_first_reaching(w, kept, u + 1, s_index);
  return sampling::rank_key_id(sh.cand[r]);
}

// A lower bound on the k-th largest of the threads' own best keys (k <= kSampleThreads): the
// k-th key with its bits below the top 8 * kRounds cleared, so at least k of the keys reach it.
// kRounds radix rounds of 8 bits (a 256-bin count of the keys that share the prefix found so far,
// one warp's scan for the bin where the running count from the top reaches k): a bitonic sort of
// the 512 keys took 45 barriers (6 us a row on the H200). The rounds alternate two bin arrays and
// two result slots, so a round zeroes the next one's bins while it counts and needs two barriers
// (seven in three rounds, was twelve). A warp's keys that fall in one bin go in as one atomic: in
// the first round most of the 512 keys share their top 8 bits (sign and exponent). Any kRounds
// gives a bound; fewer rounds a looser one, so the gather may keep more candidates than k. The
// top 16 bits of a key are the order key's sign, exponent and 7 mantissa bits: all of a bf16
// value's bits, so for bf16 logits two rounds give the same bound as three, except where an
// edited value (bias, penalties) falls within the k-th key's bf16 step.
template <int kRounds>
__device__ uint64_t kth_key_bound(const Shared& sh, uint64_t mine, int k) {
  static_assert(kRounds >= 1 && kRounds * 8 <= 32, "the rounds resolve the order key's bits");
  constexpr int kBits = 8, kBins = 1 << kBits;
  static_assert(2 * kBins <= kMaxBins && kBins == 32 * 8, "two bin arrays; 8 bins a lane");
  __shared__ uint32_t s_result[2][2];  // per round parity: the bin found, the keys above it
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  if (tid < kBins) sh.hist_count[tid] = 0;
  __syncthreads();
  uint64_t prefix = 0;
  uint32_t above = 0;  // keys in the bins above the prefix's
#pragma unroll
  for (int round = 0; round < kRounds; ++round) {
    uint32_t* bins = sh.hist_count + (round & 1) * kBins;
    const int resolved = round * kBits;
    const int shift = sampling::kKeyBits - resolved - kBits;
    if (round + 1 < kRounds && tid < kBins) sh.hist_count[((round + 1) & 1) * kBins + tid] = 0;
    const bool in = round == 0 || (mine >> (sampling::kKeyBits - resolved)) == prefix;
    const uint32_t bin = kBins - 1 - static_cast<uint32_t>((mine >> shift) & (kBins - 1));
    const unsigned peers = __match_any_sync(0xffffffffu, in ? bin : 0xffffffffu);
    if (in && lane == __ffs(peers) - 1) atomicAdd(&bins[bin], static_cast<uint32_t>(__popc(peers)));
    __syncthreads();
    if (tid < 32) {
      uint32_t c[8], sum = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        c[j] = bins[tid * 8 + j];
        sum += c[j];
      }
      uint32_t incl = sum;
#pragma unroll
      for (int off = 1; off < 32; off <<= 1) {
        const uint32_t y = __shfl_up_sync(0xffffffffu, incl, off);
        if (tid >= off) incl += y;
      }
      uint32_t run = above + incl - sum;  // keys ranked above this lane's first bin
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if (run < static_cast<uint32_t>(k) && static_cast<uint32_t>(k) <= run + c[j]) {
          s_result[round & 1][0] = static_cast<uint32_t>(tid * 8 + j);
          s_result[round & 1][1] = run;
        }
        run += c[j];
      }
    }
    // The result read after this barrier; its slot is written again two rounds on, past the
    // next round's barrier, and this round's bins are zeroed again only in the round after next.
    __syncthreads();
    const uint32_t j = s_result[round & 1][0];
    above = s_result[round & 1][1];
    prefix = (prefix << kBits) | static_cast<uint64_t>(kBins - 1 - j);
  }
  return prefix << (sampling::kKeyBits - kRounds * kBits);
}

// The candidates cand[0, n) (distinct keys) ranked descending: by counting, for each, the keys
// above it (one thread a candidate, two barriers) when n <= 256, else by the bitonic sort.
// Returns where the ranked keys are (hist_weight's storage, or cand).
__device__ const uint64_t* rank_candidates(const Shared& sh, int n) {
  constexpr int kRankMax = 256;
  if (n > kRankMax) {
    block_sort_desc(sh.cand, n);
    return sh.cand;
  }
  uint64_t* out = sh.hist_weight;
  const int i = static_cast<int>(threadIdx.x);
  if (i < n) {
    const uint64_t key = sh.cand[i];
    int rank = 0;
    for (int j = 0; j < n; ++j) rank += sh.cand[j] > key ? 1 : 0;
    out[rank] = key;
  }
  __syncthreads();
  return out;
}

// The phase marks of a trace build (sampling_trace_bench; phase_trace.h), in order. A split row's
// other slices stop at kMarkArrived, a row in error at kMarkChecked; only the fast top-k path
// reaches kMarkPivot to kMarkDrawn.
enum SampleMark : int {
  kMarkParams = 1,  // the row's parameters read and its edit list checked, past the PDL wait
  kMarkPass1,       // pass 1 over the block's slice done (split)
  kMarkArrived,     // counted in at the row's arrival counter (split)
  kMarkMerged,      // the slices' results merged (split: the row's last block)
  kMarkChecked,     // pass 1 done (unsplit), the counts summed
  kMarkPivot,       // the top-k pivot known
  kMarkCandidates,  // the candidates gathered
  kMarkRanked,      // the candidates ranked (fast top-k path)
  kMarkRelative,    // their relative probabilities worked out (finish_in_warp's warp)
  kMarkDrawn,       // top-p, min-p and the draw done (finish_in_warp's warp)
  kMarkToken,       // the token chosen
};

// finish_on_chip's top-p, min-p and draw over the ranked keys[0, n) (n <= kSamplingFastTopK) by
// one warp, without block barriers (sampling::draw_rank_in_warp): the same integer sums and
// thresholds as finish_on_chip, so the same token. Every thread returns it. The candidates'
// relative probabilities are worked out once, lane-parallel, into `rel` (n floats of shared
// memory that keys does not overlap): the draw reads each up to four times, and each is a chain
// of a dozen dependent FMAs (sampling::exp_nonpositive).
template <typename T>
__device__ int32_t finish_in_warp(const RowView<T>& row, const uint64_t* keys, int n,
                                  const RowState& st, float* rel, int* s_token,
                                  cuda::PhaseTraceThrough& trace) {
  static_assert(kSamplingFastTopK <= 32 * 16, "runs of at most 16 candidates a lane");
  if (threadIdx.x < 32) {
    const sampling::Philox4 bits = sampling::draw_bits(st.seed, st.step);
    for (int i = static_cast<int>(threadIdx.x); i < n; i += 32)
      rel[i] = sampling::relative_prob(sampling::rank_key_value(keys[i]), row.s_max);
    __syncwarp();
    trace.mark(kMarkRelative);
    const int r = sampling::draw_rank_in_warp(
        n, [&](int i) { return rel[i]; }, st.top_p, st.min_p, bits);
    if (threadIdx.x == 0) *s_token = sampling::rank_key_id(keys[r]);
    trace.mark(kMarkDrawn);
  }
  __syncthreads();
  const int32_t token = *s_token;
  __syncthreads();
  return token;
}

// Runs scan(keep), where keep(key) appends a rank key to cand, and returns how many keys were
// kept, or -1 past kCap.
template <typename Scan>
__device__ int gather_keys(const Shared& sh, int* s_count, Scan&& scan) {
  if (threadIdx.x == 0) *s_count = 0;
  __syncthreads();
  scan([&](uint64_t key) {
    const int slot = atomicAdd(s_count, 1);
    if (slot < kCap) sh.cand[slot] = key;
  });
  __syncthreads();
  const int n = *s_count;
  __syncthreads();
  return n <= kCap ? n : -1;
}

// Gathers into cand the raw rank keys that reach `pivot` (the top logprobs; the whole row is read
// again). Returns their number, or -1 past kCap.
template <typename T, int N>
__device__ int gather_raw_keys(const RowView<T>& row, const Shared& sh, uint64_t pivot,
                               int* s_count) {
  return gather_keys(sh, s_count, [&](auto keep) {
    for_each_token<T, N>(row, [&](float raw, float edited, int id) {
      const uint64_t key = token_key(raw, edited, id, row.temperature, true);
      if (key >= pivot) keep(key);
    });
  });
}

// Gathers into cand the s keys of the tokens whose s reaches s(v), where v is the edited value of
// the pivot token (`pivot` is a key of the edited value, see pass 1): only the stripes of pass 1
// whose best key (`mine` of each thread, laid out as `stripes`) reaches v are read again. Returns
// their number, or -1 past kCap.
template <typename T, int N>
__device__ int gather_s_keys(const RowView<T>& row, const Shared& sh, uint64_t pivot, int* s_count,
                             uint64_t mine, Stripes stripes, StripeSlices where,
                             const EditAhead& ahead, int* s_num) {
  // s = x / T is monotone in x, so x >= v implies s(x) >= s(v), and a smaller x can round to the
  // same s only within T * ulp(s(v)) <= |v| 2^-23 (or T 2^-149 for a subnormal s) below v: only
  // tokens above that margin pay for the division.
  const float v = sampling::rank_key_value(pivot);
  const float s_v = sampling::scaled_logit(v, row.temperature);
  const float near = v - (fabsf(v) * 0x1p-20f + row.temperature * 0x1p-120f);
  return gather_keys(sh, s_count, [&](auto keep) {
    // Streamed tokens are unedited (edited == raw): a pack below `near` holds no candidate.
    for_each_token_reaching_in_stripes<T, N>(
        row, sh, near, mine, stripes, where, ahead, s_num, [&](float raw, float edited, int id) {
          if (!(edited >= near)) return;
          const float s = sampling::scaled_logit(edited, row.temperature);
          if (s >= s_v) keep(sampling::rank_key(s, id));
        });
  });
}

// Pass 1's results for one thread's share of the tokens it visited.
struct Pass1 {
  int nonfinite = 0;     // NaN / inf raw logits
  int edit_nan = 0;      // edited values that are NaN
  uint64_t key = 0;      // greedy: the key of the best edited x (larger x, then lower id); else the
                         // best rank key of the edited x; 0: no token seen
  uint64_t raw_key = 0;  // the best raw key (top logprobs)
  float lse_m = -INFINITY, lse_l = 0.0f;  // the raw log-normaliser's running max and sum
  // The lean pass only (pass_one_lean; the others leave -1 / +inf, which the gather reads as
  // "unknown"): the pack of the thread's stripe that holds its best streamed x, and the largest
  // streamed x of the stripe's other packs (edited tokens excluded; -inf: none).
  int stripe_pack = -1;
  float stripe_second = INFINITY;
};

// Pass 1 over packs [pack_lo, pack_hi) and the edits edit_first + k·edit_step: counts, keys and
// the log-normaliser. No division: this pass is the one that reads DRAM, and it must keep up.
template <typename T, int N>
__device__ Pass1 pass_one(const RowView<T>& row, int pack_lo, int pack_hi, int edit_first,
                          int edit_step, bool greedy, bool want_top, bool want_lse) {
  Pass1 r;
  float best_x = -INFINITY;
  int32_t best_x_id = INT32_MAX;
  for_each_token_in<T, N>(
      row, pack_lo, pack_hi, edit_first, edit_step, [&](float raw, float edited, int id) {
        if (!sampling::is_finite(raw)) ++r.nonfinite;
        if (edited != edited) ++r.edit_nan;
        if (greedy) {
          if (edited > best_x || (edited == best_x && id < best_x_id)) {
            best_x = edited;
            best_x_id = id;
          }
        } else {
          // Keys of the edited value, not of s: s is monotone in x, so the best x gives s_max, and
          // gather_s_keys turns an x pivot into s.
          r.key = max(r.key, sampling::rank_key(edited == 0.0f ? 0.0f : edited, id));
        }
        if (want_top) r.raw_key = max(r.raw_key, token_key(raw, edited, id, 0.0f, true));
        if (want_lse) {
          if (raw > r.lse_m) {
            r.lse_l = r.lse_l * __expf(r.lse_m - raw) + 1.0f;
            r.lse_m = raw;
          } else {
            r.lse_l += __expf(raw - r.lse_m);
          }
        }
      });
  // Greedy: key of (x, id), larger x then lower id (x is never NaN here); a thread that saw no
  // token offers 0, below every real key.
  if (greedy)
    r.key =
        best_x_id == INT32_MAX ? 0 : sampling::rank_key(best_x == 0.0f ? 0.0f : best_x, best_x_id);
  return r;
}

// Pass 1 for a row that asks for no logprobs (the common case), with pass_one's results but far
// fewer instructions per token: each thread keeps only its best (x, id), found pack by pack (a
// max per token, one compare per pack; the winning pack stays in registers until the end, where
// its lowest id holding the best x is looked up), and tests for NaN / inf with one fma per token
// (v * 0 + acc turns NaN for good once any v is NaN or inf). r.nonfinite is then only "some"
// (>= 1) or 0: a row that has some is counted again exactly by pass_one before it is reported.
// Packs holding an edited token go token by token, the edits through the list, as in pass_one.
// Measured on the H200 at batch 256 (sampling_cuda_bench, phase timers): pass_one's per-token
// keys made the pass about 40 instructions a token and 2.6x slower than the DRAM read.
template <typename T, int N>
__device__ Pass1 pass_one_lean(const RowView<T>& row, const Shared& sh, int pack_lo, int pack_hi,
                               int edit_first, int edit_step) {
  using P = cuda::Pack<typename T::Storage, N>;
  constexpr uint32_t kPackBits = N == 32 ? 0xffffffffu : (1u << N) - 1u;
  const int tid = static_cast<int>(threadIdx.x);
  const bool edited = row.num_edits > 0;
  Pass1 r;
  float best_x = -INFINITY;
  int32_t best_id = INT32_MAX;  // < 0: -(pack + 1), the pack held in best_pack
  P best_pack{};
  float poison = 0.0f;
  // The largest pack maximum but the best pack's: max(second, min(m, best_x)) before best_x
  // takes m keeps it (two instructions a pack). The stripe gather then reads only the best pack
  // of a stripe whose other packs all stay below its floor (Pass1::stripe_pack).
  float second = -INFINITY;
  // skip: the pack's bits of the edit bitmap (0 when the row has no edits).
  auto visit = [&](const P& pk, int p, uint32_t skip) {
    const int first = p * N;
    if (skip == 0u) {
      float m = -INFINITY;
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const float v = T::to_f32(pk.v[i]);
        m = fmaxf(m, v);
        poison = __fmaf_rn(v, 0.0f, poison);
      }
      second = fmaxf(second, fminf(m, best_x));
      // Strictly greater: on a tie the earlier pack, whose ids are lower, keeps the lead.
      if (m > best_x) {
        best_x = m;
        best_id = -(p + 1);
        best_pack = pk;
      }
    } else {
      const float before = best_x;
      float m = -INFINITY;  // of the pack's unedited tokens
#pragma unroll
      for (int i = 0; i < N; ++i) {
        if ((skip >> i) & 1u) continue;
        const float v = T::to_f32(pk.v[i]);
        if (!sampling::is_finite(v)) ++r.nonfinite;
        m = fmaxf(m, v);
        if (v > best_x) {
          best_x = v;
          best_id = first + i;
        }
      }
      second = fmaxf(second, fminf(m, before));
    }
  };
  const P* x = reinterpret_cast<const P*>(row.x);
  if constexpr (sizeof(P) == 16) {
    // Each thread streams its packs through its own kRing slots of shared memory (cp.async: no
    // registers while in flight), kRing - 1 packs ahead of the one it reads: 32 bytes a thread,
    // 16 KB a block in flight. (Two 16-byte packs in registers reached ~60 % of the copy ceiling
    // at batch 256; four spilled.) More in flight measured slower on the H200
    // (bench/results/2026-12-02-boundary-cost.md, sampled rows, µs): in one run 2, 3 and 4 packs
    // ahead took batch 64 24.3, 24.6 and 24.8, batch 256 40.4, 40.6 and 41.0; in another, 1
    // ahead 24.1 and 41.1 against 2 ahead's 24.3 and 40.5; in a third, 8 ahead (with a staged
    // gather and 32 KB more shared memory) 26.2 and 43.3 against 4 ahead's 24.8 and 41.0. The
    // slots lie in cand and hist_weight, unused until pass 1 is over; a slot is refilled only
    // after its pack was read and used, and no other thread touches it.
    // The slots and the edit bitmap are addressed by shared-space addresses computed here, once:
    // through generic pointers the compiler rebuilt the shared window's base (S2UR of
    // SR_CgaCtaId, then uniform adds) twice an iteration in one of this function's two inlined
    // copies, and which copy it did so in moved with unrelated changes to the kernel. Without it
    // 256 rows (the unsplit copy) sample 6 % faster and greedy 10 % on the H200
    // (bench/results/2026-12-02-sampling-pass-one-addresses.md).
    constexpr int kRing = 3;
    static_assert(kRing * kSampleThreads * 16 <= kCap * 8 + kMaxBins * 8 + kMaxBins * 4,
                  "the ring fits cand, hist_weight and hist_count");
    constexpr uint32_t kSlotBytes = kSampleThreads * 16;
    const uint32_t ring = static_cast<uint32_t>(__cvta_generic_to_shared(sh.cand)) + tid * 16u;
    const uint32_t bitmap = static_cast<uint32_t>(__cvta_generic_to_shared(row.bitmap));
    const int p0 = pack_lo + tid;
#pragma unroll
    for (int s = 0; s < kRing - 1; ++s) {
      const int p = p0 + s * kSampleThreads;
      if (p < pack_hi) cuda::cp_async_16_to(ring + s * kSlotBytes, x + p);
      cuda::cp_async_commit();
    }
    int slot = 0;
    for (int p = p0; p < pack_hi; p += kSampleThreads) {
      const int ahead = p + (kRing - 1) * kSampleThreads;
      const int ahead_slot = slot == 0 ? kRing - 1 : slot - 1;  // the previous pack's, used
      if (ahead < pack_hi) cuda::cp_async_16_to(ring + ahead_slot * kSlotBytes, x + ahead);
      cuda::cp_async_commit();
      cuda::cp_async_wait<kRing - 1>();  // this pack's group has landed
      const uint4 bits = cuda::ld_shared_16(ring + slot * kSlotBytes);
      P pk;
      memcpy(&pk, &bits, sizeof(P));
      const int first = p * N;
      const uint32_t skip =
          edited ? (cuda::ld_shared_4(bitmap + (first >> 5) * 4u) >> (first & 31)) & kPackBits : 0u;
      visit(pk, p, skip);
      slot = slot + 1 == kRing ? 0 : slot + 1;
    }
    cuda::cp_async_wait_all();
  } else {
    for_each_pack<T, N>(row, pack_lo, pack_hi, [&](const P& pk, int p) {
      const int first = p * N;
      visit(pk, p, edited ? (row.bitmap[first >> 5] >> (first & 31)) & kPackBits : 0u);
    });
  }
  // The stripe's best pack before the edits below may take the lead (they lie in no stripe).
  r.stripe_pack = best_id == INT32_MAX ? -1 : best_id >= 0 ? best_id / N : -best_id - 1;
  r.stripe_second = second;
  // for_each_edit's loop, written out: through its lambda nvcc laid the kernels out anew (f32
  // rows, one value a pack: 24,904 -> 25,144 instructions), a change that would want its own A/B.
  for (int e = edit_first + tid * edit_step; e < row.num_edits; e += kSampleThreads * edit_step) {
    const TokenEdit ed = row.edits[e];
    if (!row.holds(ed)) continue;
    const float v = T::to_f32(row.x[ed.token]);
    if (!sampling::is_finite(v)) ++r.nonfinite;
    const float x = row.edited(v, ed);
    if (x != x) ++r.edit_nan;
    // The lowest id the current best may have: a pack's first (an edited token is never in a
    // pack that went the fast way), or the token itself.
    const int32_t best_lo = best_id >= 0 ? best_id : (-best_id - 1) * N;
    if (x > best_x || (x == best_x && ed.token < best_lo)) {
      best_x = x;
      best_id = ed.token;
    }
  }
  if (best_id < 0) {  // the lowest id of the winning pack that holds best_x (-0 == +0 included)
    const int p = -best_id - 1;
    best_id = p * N + N - 1;
#pragma unroll
    for (int i = N - 1; i >= 0; --i)
      if (T::to_f32(best_pack.v[i]) == best_x) best_id = p * N + i;
  }
  if (poison != 0.0f) ++r.nonfinite;  // NaN: some streamed token is NaN or inf
  r.key = best_id == INT32_MAX ? 0 : sampling::rank_key(best_x == 0.0f ? 0.0f : best_x, best_id);
  return r;
}

// (m, l) pairs of a log-sum-exp merged: the running max and the sum rescaled to it.
__device__ __forceinline__ void lse_merge(float& m, float& l, float om, float ol) {
  const float nm = fmaxf(m, om);
  l = (l == 0.0f ? 0.0f : l * __expf(m - nm)) + (ol == 0.0f ? 0.0f : ol * __expf(om - nm));
  m = nm;
}

// A slice partial's reductions over the lanes [lane ^ mask for mask < 2 * first] (first a power
// of two <= 16): counts summed, best key, log-sum-exp merged; every such lane ends with the result.
__device__ __forceinline__ void partial_reduce_in_warp(int& nonfinite, int& edit_nan, uint64_t& key,
                                                       float& m, float& l, int first) {
  for (int off = first; off > 0; off >>= 1) {
    nonfinite += __shfl_xor_sync(0xffffffffu, nonfinite, off);
    edit_nan += __shfl_xor_sync(0xffffffffu, edit_nan, off);
    key = max(key, __shfl_xor_sync(0xffffffffu, key, off));
    const float om = __shfl_xor_sync(0xffffffffu, m, off);
    const float ol = __shfl_xor_sync(0xffffffffu, l, off);
    lse_merge(m, l, om, ol);
  }
}

// The split's workspace (sampling.h, sample_rows_cuda_workspace_bytes).
struct SlicePartial {
  int nonfinite;
  int edit_nan;
  float lse_m;
  float lse_l;
  uint64_t key;      // the slice's best key (greedy rows use it)
  uint64_t padding;  // to kSampleSplitPartialBytes
};
static_assert(sizeof(SlicePartial) == kSampleSplitPartialBytes, "the workspace layout");
struct SplitWorkspace {
  SlicePartial* partials;        // [kSampleSplitMaxBlocks]
  uint32_t* keys;                // [kSampleSplitMaxBlocks][kSampleThreads]: threads' Pass1::key >>
                                 // kIdBits, the value's order (sampled rows; 0: no token)
  unsigned long long* raw_keys;  // [kSampleSplitMaxBlocks][kSampleThreads]: threads' raw_key
  unsigned* counters;            // [kSampleSplitMaxBlocks]: arrivals per row, zero between launches
};

// A launch's split (SampleSplit) and the workspace its slices meet in.
struct SampleLaunch {
  SplitWorkspace ws;
  int slices;
  int slice_tokens;
#if defined(ROOFLINE_PHASE_TRACE)
  uint64_t* trace;  // the launch's phase records, or nullptr
#endif
};

// Calls fold(key, slice) for p[0], p[kSampleThreads], ... (one key per slice) in slice order,
// eight loads in flight (the last slices % 8 in a loop the compiler unrolls by 4). At most 16
// slices (kSampleMaxSlices) take two L2 round trips; when a row had 62, its ~10 round trips made
// the merge the largest phase, and 16-key batches (6 round trips) measured only 0.4 µs faster a
// row and slowed greedy rows (bench/results/2026-12-03-sampling-value-keys.md; fewer slices won:
// 2026-12-07-sampler-slices.md). With the greedy / top-logprobs
// tests inside one loop each load sat in its own branch and waited for the one before (~7 µs for
// a row of 62 slices on the H200). A predicated last batch and a branch-free fold measured slower
// (their register allocation moved spills into the row loops;
// bench/results/2026-12-02-sampling-slice-gather.md).
template <typename K, typename F>
__device__ __forceinline__ void for_each_slice_key(const K* p, int slices, F&& fold) {
  constexpr int kBatch = 8;
  int sl = 0;
  for (; sl + kBatch <= slices; sl += kBatch) {
    K v[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) v[j] = __ldcg(p + (sl + j) * kSampleThreads);
#pragma unroll
    for (int j = 0; j < kBatch; ++j) fold(v[j], sl + j);
  }
  for (; sl < slices; ++sl) fold(__ldcg(p + sl * kSampleThreads), sl);
}

// The largest key over the slices.
__device__ __forceinline__ uint64_t max_over_slices(const unsigned long long* p, int slices) {
  uint64_t best = 0;
  for_each_slice_key(
      p, slices, [&](unsigned long long v, int) { best = max(best, static_cast<uint64_t>(v)); });
  return best;
}

// The largest of the slices' value keys (Pass1::key >> kIdBits) as a rank key with id bits 0,
// its slice and the second largest (StripeSlices; of another slice's thread; 0: none). 32-bit
// keys: a 62-slice row's last block folded 31,744 of them (16 slices now: 8,192), and the 64-bit
// keys took ~20 instructions a key, +1.9 µs over a plain max on the H200.
__device__ __forceinline__ uint64_t max_two_over_slices(const uint32_t* p, int slices,
                                                        StripeSlices* where) {
  uint32_t best = 0, second = 0;
  int best_slice = 0;
  for_each_slice_key(p, slices, [&](uint32_t v, int sl) {
    second = max(second, min(v, best));  // the largest of all but the largest
    best_slice = v > best ? sl : best_slice;
    best = max(best, v);
  });
  where->best_slice = best_slice;
  where->second = static_cast<uint64_t>(second) << sampling::kIdBits;
  return static_cast<uint64_t>(best) << sampling::kIdBits;
}

// A split launch's block over its slice of the row: pass 1 (the row's edit bitmap built), its
// partial into the workspace, then the arrival count. Returns true in the row's last block to
// arrive, with `merged` holding, per thread, what pass 1 over the whole row would have given the
// block's threads for the reductions that follow: thread t < slices carries slice t's counts,
// log-normaliser and (greedy) best key; every thread t, the best keys of the t-th threads of all
// slices (each the best of a set of tokens disjoint from the other threads' sets, as in pass 1
// over the whole row, which is what the top-k pivot needs).
template <typename T, int N>
__device__ bool pass_one_split(const SplitWorkspace& ws, const RowView<T>& row, const Shared& sh,
                               int slices, int slice_tokens, bool greedy, bool want_top,
                               bool want_lse, Pass1* merged, StripeSlices* where,
                               cuda::PhaseTraceThrough& trace) {
  __shared__ int s_counts[2][kSampleWarps];
  __shared__ float s_lse[2][kSampleWarps];
  __shared__ uint64_t s_key[kSampleWarps];
  __shared__ unsigned s_last;
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int slice = static_cast<int>(blockIdx.x);
  const int64_t row_index = blockIdx.y;
  const int lo = slice * slice_tokens;
  const int hi = min(row.vocab, lo + slice_tokens);
  const Pass1 mine =
      want_top || want_lse
          ? pass_one<T, N>(row, lo / N, hi / N, slice, slices, greedy, want_top, want_lse)
          : pass_one_lean<T, N>(row, sh, lo / N, hi / N, slice, slices);
  trace.mark(kMarkPass1);

  // The slice's partial: counts summed, log-normaliser merged, best key; each thread's keys.
  int nonfinite = mine.nonfinite, edit_nan = mine.edit_nan;
  float m = mine.lse_m, l = mine.lse_l;
  uint64_t key = mine.key;
  partial_reduce_in_warp(nonfinite, edit_nan, key, m, l, 16);
  if (lane == 0) {
    s_counts[0][warp] = nonfinite;
    s_counts[1][warp] = edit_nan;
    s_lse[0][warp] = m;
    s_lse[1][warp] = l;
    s_key[warp] = key;
  }
  const int64_t block = row_index * slices + slice;
  if (!greedy)
    __stcg(ws.keys + block * kSampleThreads + tid,
           static_cast<uint32_t>(mine.key >> sampling::kIdBits));
  if (want_top)
    __stcg(ws.raw_keys + block * kSampleThreads + tid,
           static_cast<unsigned long long>(mine.raw_key));
  __syncthreads();
  // Warp 0 merges the warps' partials, lane w taking warp w's, in log2(kSampleWarps) shuffle
  // rounds: one thread's loop over them was a chain of kSampleWarps dependent merges (two
  // exponentials each) that the block's other warps waited out at the barrier below.
  static_assert(kSampleWarps <= 32 && (kSampleWarps & (kSampleWarps - 1)) == 0,
                "one warp merges the warps' partials in shuffle rounds");
  if (warp == 0) {
    const bool have = lane < kSampleWarps;
    int total_nonfinite = have ? s_counts[0][lane] : 0;
    int total_edit_nan = have ? s_counts[1][lane] : 0;
    float bm = have ? s_lse[0][lane] : -INFINITY, bl = have ? s_lse[1][lane] : 0.0f;
    uint64_t best = have ? s_key[lane] : 0;
    partial_reduce_in_warp(total_nonfinite, total_edit_nan, best, bm, bl, kSampleWarps / 2);
    if (lane == 0) {
      SlicePartial* out = ws.partials + block;
      __stcg(&out->nonfinite, total_nonfinite);
      __stcg(&out->edit_nan, total_edit_nan);
      __stcg(&out->lse_m, bm);
      __stcg(&out->lse_l, bl);
      __stcg(reinterpret_cast<unsigned long long*>(&out->key),
             static_cast<unsigned long long>(best));
      s_last =
          cuda::arrive_last_of(ws.counters + row_index, static_cast<unsigned>(slices)) ? 1u : 0u;
    }
  }
  __syncthreads();
  trace.mark(kMarkArrived);
  if (s_last == 0u) return false;

  Pass1 mg;
  if (tid < slices) {
    const SlicePartial* sp = ws.partials + row_index * slices + tid;
    mg.nonfinite = __ldcg(&sp->nonfinite);
    mg.edit_nan = __ldcg(&sp->edit_nan);
    mg.lse_m = __ldcg(&sp->lse_m);
    mg.lse_l = __ldcg(&sp->lse_l);
    if (greedy) mg.key = __ldcg(reinterpret_cast<const unsigned long long*>(&sp->key));
  }
  const uint32_t* keys = ws.keys + row_index * slices * kSampleThreads + tid;
  const unsigned long long* raw_keys = ws.raw_keys + row_index * slices * kSampleThreads + tid;
  // The merged key keeps the value's order only (its id bits 0): what follows reads a thread's
  // best through its value (the top-k pivot's top 24 key bits, the stripe filter, s_max) alone.
  if (!greedy) mg.key = max_two_over_slices(keys, slices, where);
  if (want_top) mg.raw_key = max_over_slices(raw_keys, slices);
  *merged = mg;
  return true;
}

template <typename T, int N>
__global__ void __launch_bounds__(kSampleThreads, 2)
    sample_rows_kernel(const __grid_constant__ SampleRowsParams p,
                       const __grid_constant__ SampleLaunch launch) {
  cuda::PhaseTraceThrough trace(cuda::phase_trace_records(launch));
  cuda::touch_params(p);
  cuda::touch_params(launch);
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ uint64_t warp_tmp[32];
  __shared__ int s_index, s_count;
  __shared__ int s_num[3];  // the stripe gather's three list counts
  __shared__ uint32_t s_bad_edit;
  __shared__ float s_red_f[32];
  __shared__ int s_red_i[32];
  __shared__ uint64_t s_red_u[32];
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int64_t row_index = blockIdx.y;
  const SamplingRowParams rp = p.rows[row_index];
  const int vocab = static_cast<int>(p.vocab_size);
  const Shared sh = carve_shared(smem, vocab);
  const int slices = launch.slices, slice_tokens = launch.slice_tokens;
  // The top-k pivot's radix rounds: bf16 values are exact in a key's top 16 bits (kth_key_bound).
  constexpr int kPivotRounds = std::is_same_v<T, cuda::Bf16> ? 2 : 3;

  // Parameters and the edit list (the same checks as the CPU twin's), and the row's edit bitmap,
  // all before the PDL wait: the rows and edits are the host's uploads, copied before the step's
  // first kernel, so no kernel this one may overlap writes them (only the logits come from the
  // kernel before). Every block of a split row builds the whole row's bitmap (its slice's pass 1
  // reads only its own words); the row's last block then needs no second build after the merge.
  uint32_t error = 0;
  const bool params_ok = sampling_row_params_valid(rp, p.max_top_logprobs);
  if (!params_ok) error |= kSamplingBadParams;
  const bool range_ok = rp.edit_count >= 0 && rp.edit_begin >= 0 && rp.edit_begin <= p.num_edits &&
                        rp.edit_count <= p.num_edits - rp.edit_begin &&
                        (rp.edit_count == 0 || p.edits != nullptr);
  const int num_edits = range_ok ? rp.edit_count : 0;
  const TokenEdit* edits = p.edits + (range_ok ? rp.edit_begin : 0);
  const bool greedy = rp.temperature == 0.0f;
  const bool want_top = rp.num_top_logprobs > 0 && p.top_ids != nullptr && params_ok;
  const bool want_lse = rp.num_top_logprobs >= 0 && p.logprobs != nullptr && params_ok;

  RowView<T> row;
  row.x = static_cast<const typename T::Storage*>(p.logits) + row_index * p.vocab_size;
  row.vocab = vocab;
  row.edits = edits;
  row.bitmap = sh.bitmap;
  row.temperature = rp.temperature;
  row.repetition = rp.repetition_penalty;
  row.frequency = rp.frequency_penalty;
  row.presence = rp.presence_penalty;
  row.s_max = 0.0f;

  if (tid == 0) s_bad_edit = range_ok ? 0u : 1u;
  if (num_edits > 0) {
    for (int i = tid; i < static_cast<int>(bitmap_words(vocab)); i += kSampleThreads)
      sh.bitmap[i] = 0;
  }
  __syncthreads();
  for (int e = tid; e < num_edits; e += kSampleThreads) {
    const TokenEdit ed = edits[e];
    if (ed.token < 0 || ed.token >= vocab || ed.generated_count < 0 ||
        (ed.in_prompt != 0 && ed.in_prompt != 1) || !sampling::is_finite(ed.bias)) {
      s_bad_edit = 1u;
      continue;
    }
    const uint32_t bit = 1u << (ed.token & 31);
    if (atomicOr(&sh.bitmap[ed.token >> 5], bit) & bit) s_bad_edit = 1u;  // listed twice
  }
  __syncthreads();
  if (s_bad_edit) error |= kSamplingBadEdits;
  row.num_edits = error == 0 ? num_edits : 0;

  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  trace.mark_after(kMarkParams, static_cast<uint32_t>(rp.top_k));

  // A split launch: pass 1 over this block's slice (a row in error streams it without edits, so
  // the merged non-finite count is the whole row's, as pass 1 over it would give); the row's last
  // block goes on with the merged results, the others are done.
  Pass1 r;
  StripeSlices where;  // the sampled top-k gather's (split rows)
  const bool split = slices > 1;
  if (split) {
    if (!pass_one_split<T, N>(launch.ws, row, sh, slices, slice_tokens, greedy, want_top, want_lse,
                              &r, &where, trace))
      return trace.finish();
    trace.mark(kMarkMerged);
  }

  // Pass 1 over the whole row, unless a split's slices did it.
  // A row that asks for no logprobs runs the lean pass 1, whose non-finite count is only "some":
  // such a row runs pass_one again for the exact count it reports (a split row too).
  const bool lean = !want_top && !want_lse;
  if (!split) {
    r = lean ? pass_one_lean<T, N>(row, sh, 0, vocab / N, 0, 1)
             : pass_one<T, N>(row, 0, vocab / N, 0, 1, greedy, want_top, want_lse);
    where.pack = r.stripe_pack;
    where.pack_second = r.stripe_second;
  }
  int nonfinite = 0, edit_nan = 0;
  // Block sums of the counts.
  auto sum_counts = [&] {
    nonfinite = r.nonfinite;
    edit_nan = r.edit_nan;
    for (int off = 16; off > 0; off >>= 1) {
      nonfinite += __shfl_xor_sync(0xffffffffu, nonfinite, off);
      edit_nan += __shfl_xor_sync(0xffffffffu, edit_nan, off);
    }
    if (lane == 0) {
      s_red_i[warp] = nonfinite;
      s_red_f[warp] = __int_as_float(edit_nan);
    }
    __syncthreads();
    nonfinite = 0;
    edit_nan = 0;
    for (int w = 0; w < kSampleWarps; ++w) {
      nonfinite += s_red_i[w];
      edit_nan += __float_as_int(s_red_f[w]);
    }
    __syncthreads();
  };
  sum_counts();
  if (lean && nonfinite > 0) {
    r = pass_one<T, N>(row, 0, vocab / N, 0, 1, greedy, false, false);
    sum_counts();
  }
  const uint64_t best_raw_key = r.raw_key;
  float lse_m = r.lse_m, lse_l = r.lse_l;
  if (nonfinite > 0) error |= kSamplingNonFiniteLogits;
  if (error == 0 && edit_nan > 0) error |= kSamplingBadEdits;
  if (p.nonfinite_counts != nullptr && tid == 0) p.nonfinite_counts[row_index] = nonfinite;
  trace.mark(kMarkChecked);
  if (error != 0) {
    if (tid == 0) {
      p.tokens[row_index] = -1;
      p.errors[row_index] = error;
    }
    return trace.finish();
  }

  int32_t token = -1;
  if (greedy) {
    uint64_t k = r.key;
    for (int off = 16; off > 0; off >>= 1) k = max(k, __shfl_xor_sync(0xffffffffu, k, off));
    if (lane == 0) s_red_u[warp] = k;
    __syncthreads();
    if (tid == 0) {
      uint64_t b = 0;
      for (int w = 0; w < kSampleWarps; ++w) b = max(b, s_red_u[w]);
      s_index = sampling::rank_key_id(b);
    }
    __syncthreads();
    token = s_index;
  } else {
    const uint64_t mine = r.key;
    uint64_t k = mine;
    for (int off = 16; off > 0; off >>= 1) k = max(k, __shfl_xor_sync(0xffffffffu, k, off));
    if (lane == 0) s_red_u[warp] = k;
    __syncthreads();
    uint64_t top = 0;
    for (int w = 0; w < kSampleWarps; ++w) top = max(top, s_red_u[w]);
    __syncthreads();
    row.s_max = sampling::scaled_logit(sampling::rank_key_value(top), rp.temperature);
    const RowState st{rp.min_p, rp.top_p, rp.seed, rp.step};
    if (!sampling::is_finite(row.s_max)) {
      // +inf after scaling, or every s is -inf: the first ranked by s is the only candidate (the
      // lowest id among the tokens at s_max, not necessarily the best x's).
      token = sampling::rank_key_id(select_token<T, N>(row, sh, Query::kCount, 1, Universe{}, st,
                                                       warp_tmp, &s_index, &s_count)
                                        .key);
    } else {
      const bool top_k_on = rp.top_k > 0 && rp.top_k < vocab;
      bool done = false;
      if (top_k_on && rp.top_k <= kSamplingFastTopK) {
        const EditAhead ahead = read_edit_ahead(row);
        const uint64_t pivot = kth_key_bound<kPivotRounds>(sh, mine, rp.top_k);
        trace.mark(kMarkPivot);
        // Pass 1's stripes: the split's slices, or the whole row.
        const Stripes stripes = split ? Stripes{slices, slice_tokens / N} : Stripes{1, vocab / N};
        const int n =
            gather_s_keys<T, N>(row, sh, pivot, &s_count, mine, stripes, where, ahead, s_num);
        trace.mark(kMarkCandidates);
        if (n >= rp.top_k) {
          const uint64_t* ranked = rank_candidates(sh, n);
          trace.mark(kMarkRanked);
          token = finish_in_warp(row, ranked, rp.top_k, st, reinterpret_cast<float*>(sh.hist_count),
                                 &s_index, trace);
          done = true;
        }
      }
      if (!done) {
        Universe uni;
        if (top_k_on) {
          const Selected k_sel =
              select_token<T, N>(row, sh, Query::kCount, static_cast<uint64_t>(rp.top_k), uni, st,
                                 warp_tmp, &s_index, &s_count);
          if (k_sel.gathered > 0) {
            token = finish_on_chip(row, sh, rp.top_k, 0, st, warp_tmp, &s_index);
            done = true;
          }
          uni.lower_bound = k_sel.key;
        }
        if (!done && rp.top_p < 1.0f) {
          const Selected p_sel =
              select_token<T, N>(row, sh, Query::kTopP, 0, uni, st, warp_tmp, &s_index, &s_count);
          if (p_sel.gathered > 0) {
            token = finish_on_chip(row, sh, p_sel.gathered, p_sel.total, st, warp_tmp, &s_index);
            done = true;
          }
          uni.lower_bound = p_sel.key;
        }
        if (!done) {
          uni.min_p = rp.min_p;
          token = sampling::rank_key_id(
              select_token<T, N>(row, sh, Query::kDraw, 0, uni, st, warp_tmp, &s_index, &s_count)
                  .key);
        }
      }
    }
  }
  trace.mark(kMarkToken);
  if (tid == 0) {
    p.tokens[row_index] = token;
    p.errors[row_index] = 0;
  }

  // Logprobs of the raw logits: the token's, then the top alternatives (gathered like top-k).
  if (want_lse) {
    for (int off = 16; off > 0; off >>= 1) {
      const float om = __shfl_xor_sync(0xffffffffu, lse_m, off);
      const float ol = __shfl_xor_sync(0xffffffffu, lse_l, off);
      const float m = fmaxf(lse_m, om);
      lse_l = (lse_l == 0.0f ? 0.0f : lse_l * __expf(lse_m - m)) +
              (ol == 0.0f ? 0.0f : ol * __expf(om - m));
      lse_m = m;
    }
    if (lane == 0) {
      s_red_f[warp] = lse_m;
      s_red_u[warp] = __float_as_uint(lse_l);
    }
    __syncthreads();
    float m = -INFINITY;
    for (int w = 0; w < kSampleWarps; ++w) m = fmaxf(m, s_red_f[w]);
    float l = 0.0f;
    for (int w = 0; w < kSampleWarps; ++w) {
      const float wl = __uint_as_float(static_cast<uint32_t>(s_red_u[w]));
      if (wl > 0.0f) l += wl * __expf(s_red_f[w] - m);
    }
    const float log_z = m + logf(l);
    __syncthreads();
    if (tid == 0) p.logprobs[row_index] = T::to_f32(row.x[token]) - log_z;
    if (p.top_ids != nullptr) {
      const int want = min(rp.num_top_logprobs, vocab);
      if (want > 0) {
        const uint64_t pivot = kth_key_bound<kPivotRounds>(sh, best_raw_key, want);
        if (gather_raw_keys<T, N>(row, sh, pivot, &s_count) > 0) {
          block_sort_desc(sh.cand, s_count);
        } else {
          // Too many tokens tie at the pivot for the chip: radix selection, which for a count
          // of at most kCap always ends gathered and sorted (at the last level one token is left).
          Universe uni;
          uni.raw_keys = true;
          const RowState none{0.0f, 1.0f, 0, 0};
          select_token<T, N>(row, sh, Query::kCount, static_cast<uint64_t>(want), uni, none,
                             warp_tmp, &s_index, &s_count);
        }
      }
      for (int j = tid; j < p.max_top_logprobs; j += kSampleThreads) {
        const int64_t slot = row_index * p.max_top_logprobs + j;
        if (j < want) {
          const int32_t id = sampling::rank_key_id(sh.cand[j]);
          p.top_ids[slot] = id;
          p.top_logprobs[slot] = T::to_f32(row.x[id]) - log_z;
        } else {
          p.top_ids[slot] = -1;
          p.top_logprobs[slot] = -INFINITY;
        }
      }
    }
  }
  trace.finish();
}

template <typename T, int N>
void launch_sample_rows(const SampleRowsParams& p, const SampleSplit& split, cudaStream_t stream) {
  // The largest vocabulary's shared memory, allowed once per device (outside any graph capture
  // in practice: the first call comes from a warm-up or a test).
  constexpr int kMaxDevices = 64;
  static std::once_flag once[kMaxDevices];
  int device = 0;
  ROOFLINE_CUDA_CHECK(cudaGetDevice(&device));
  ROOFLINE_CHECK(device >= 0 && device < kMaxDevices);
  std::call_once(once[device], [] {
    ROOFLINE_CUDA_CHECK(
        cudaFuncSetAttribute(sample_rows_kernel<T, N>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(sample_smem_bytes(sampling::kMaxVocab))));
  });
  const size_t smem = sample_smem_bytes(p.vocab_size);
  SampleLaunch launch{};
  launch.slices = static_cast<int>(split.slices);
  launch.slice_tokens = static_cast<int>(split.slice_tokens);
  SplitWorkspace& ws = launch.ws;
  if (split.slices > 1) {
    auto* base = static_cast<uint8_t*>(p.workspace);
    ws.partials = reinterpret_cast<SlicePartial*>(base);
    base += kSampleSplitMaxBlocks * kSampleSplitPartialBytes;
    ws.keys = reinterpret_cast<uint32_t*>(base);  // 4 of the 8 bytes a thread the layout gives
    base += kSampleSplitMaxBlocks * kSampleThreads * 8;
    ws.raw_keys = reinterpret_cast<unsigned long long*>(base);
    base += kSampleSplitMaxBlocks * kSampleThreads * 8;
    ws.counters = reinterpret_cast<unsigned*>(base);
  }
#if defined(ROOFLINE_PHASE_TRACE)
  launch.trace = sample_rows_phase_trace().next(split.slices * p.num_rows);
#endif
  cuda::launch_pdl(sample_rows_kernel<T, N>,
                   dim3(static_cast<unsigned>(split.slices), static_cast<unsigned>(p.num_rows)),
                   dim3(kSampleThreads), smem, stream, p, launch);
}

}  // namespace

#if defined(ROOFLINE_PHASE_TRACE)
PhaseTraceRecorder& sample_rows_phase_trace() {
  static PhaseTraceRecorder recorder;
  return recorder;
}
#endif

namespace {

// SMs of the current device, read once per device.
int device_sms() {
  constexpr int kMaxDevices = 64;
  static int sms[kMaxDevices] = {};
  static std::once_flag once[kMaxDevices];
  int device = 0;
  ROOFLINE_CUDA_CHECK(cudaGetDevice(&device));
  ROOFLINE_CHECK(device >= 0 && device < kMaxDevices);
  std::call_once(once[device], [device] {
    ROOFLINE_CUDA_CHECK(
        cudaDeviceGetAttribute(&sms[device], cudaDevAttrMultiProcessorCount, device));
  });
  return sms[device];
}

}  // namespace

void sample_rows_cuda(const SampleRowsParams& p, CudaStream stream) {
  ROOFLINE_CHECK_MSG(p.vocab_size >= 1 && p.vocab_size <= sampling::kMaxVocab,
                     "sample_rows: vocab_size must be in [1, 2^18]");
  ROOFLINE_CHECK_MSG(p.num_rows >= 0 && p.num_rows <= 65535,
                     "sample_rows_cuda: num_rows must be in [0, 65535]");
  ROOFLINE_CHECK(p.num_edits >= 0);
  ROOFLINE_CHECK(p.max_top_logprobs >= 0 && p.max_top_logprobs <= kMaxTopLogprobs);
  if (p.num_rows == 0) return;
  ROOFLINE_CHECK(p.logits != nullptr && p.rows != nullptr && p.tokens != nullptr &&
                 p.errors != nullptr);
  ROOFLINE_CHECK((p.top_ids == nullptr) == (p.top_logprobs == nullptr));
  ROOFLINE_CHECK_MSG(p.top_ids == nullptr || p.logprobs != nullptr,
                     "sample_rows: top logprobs need the logprobs output too");
  ROOFLINE_CHECK_MSG(p.workspace == nullptr || cuda::is_aligned(p.workspace, 16),
                     "sample_rows_cuda: the workspace must be 16-byte aligned");
  const SampleSplit split =
      sample_rows_split(p.num_rows, p.vocab_size, device_sms(), p.workspace != nullptr);
  ROOFLINE_CHECK(split.slices == 1 || split.slices * p.num_rows <= kSampleSplitMaxBlocks);
  cuda::dispatch_activation(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = cuda::kVec16<T>;
    if (p.vocab_size % kVec == 0 && cuda::is_aligned(p.logits, 16)) {
      launch_sample_rows<T, kVec>(p, split, stream);
    } else {
      launch_sample_rows<T, 1>(p, split, stream);
    }
  });
  ROOFLINE_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace roofline
