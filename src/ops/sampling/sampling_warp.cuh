// One warp's share of the sampling chain's finish (sampling.h), used by both CUDA samplers
// (sample_rows_cuda's finish_in_warp and sample_rows_tiles_cuda): top-p, min-p and the Philox
// draw over the ranked top k with sampling_math.h's integer weights, without block barriers.
// Include only from .cu files.
#pragma once

#include <cstdint>

#include "ops/sampling/sampling_math.h"

namespace roofline::sampling {

// Top-p, min-p and the draw over the top n ranks (n <= 32 · 16), rank i of relative probability
// rel(i) = relative_prob(its s, s_max), by the 32 lanes of one warp: each lane sums the integer
// weights of its run of consecutive ranks, a warp scan places the runs, and the lane whose run
// holds a threshold finds its rank. The integer sums and thresholds of sample_rows_cpu, so the
// same rank for the same bits. Every lane returns it.
template <typename Rel>
__device__ __forceinline__ int draw_rank_in_warp(int n, Rel&& rel, float top_p, float min_p,
                                                 const Philox4& bits) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int per = (n + 31) / 32;
  const int lo = min(lane * per, n), hi = min(lo + per, n);
  // The exclusive prefix of the lane's run sum and the warp's total.
  auto place = [&](uint64_t sum, uint64_t* total) {
    uint64_t incl = sum;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const uint64_t y = __shfl_up_sync(0xffffffffu, incl, off);
      if (lane >= off) incl += y;
    }
    *total = __shfl_sync(0xffffffffu, incl, 31);
    return incl - sum;
  };
  // The first rank whose inclusive prefix reaches target (0 < target <= total): the lane whose
  // run holds it walks the run again.
  auto first_reaching = [&](uint64_t excl, uint64_t sum, uint64_t target, auto&& weight) {
    const bool here = excl < target && target <= excl + sum;
    int r = 0;
    if (here) {
      uint64_t run = excl;
      for (int i = lo; i < hi; ++i) {
        run += weight(i);
        if (run >= target) {
          r = i;
          break;
        }
      }
    }
    const unsigned holder = __ballot_sync(0xffffffffu, here);
    return __shfl_sync(0xffffffffu, r, __ffs(holder) - 1);
  };
  auto weight = [&](int i) { return weight_of(rel(i)); };
  uint64_t sum = 0, total = 0;
  for (int i = lo; i < hi; ++i) sum += weight(i);
  const uint64_t excl = place(sum, &total);
  int kept = n;
  if (top_p < 1.0f) kept = first_reaching(excl, sum, top_p_threshold(top_p, total), weight) + 1;
  auto weight_kept = [&](int i) {
    const float q = rel(i);
    return i < kept && q >= min_p ? weight_of(q) : uint64_t{0};
  };
  uint64_t sum_kept = 0, total_kept = 0;
  for (int i = lo; i < hi; ++i) sum_kept += weight_kept(i);
  const uint64_t excl_kept = place(sum_kept, &total_kept);
  const uint64_t u = uniform_below(bits, total_kept);
  return first_reaching(excl_kept, sum_kept, u + 1, weight_kept);
}

}  // namespace roofline::sampling
