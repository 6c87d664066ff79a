// How the CUDA GEMM selection (matmul_cuda.cu, MatmulImpl::kAuto) times its candidates: a pure
// host function, tested on the CPU (matmul_test.cc).
#pragma once

#include <algorithm>
#include <cstdint>

namespace roofline {

// How the CUDA selection (kAuto) times each candidate of a problem whose weight is
// `weight_bytes`, given the device's L2 and `scratch_bytes` of scratch (the measurement's flush
// buffer, twice L2). A short call timed alone between events is mostly the events' and the
// launch's cost, and it rewards what helps a call that runs alone: on an H100 (2026-12-05) the
// single-call timings chose warp slices for Qwen2.5-0.5B's q|k|v with its RMSNorm prologue (9.9 vs
// 10.5 us) where 16 chained calls, as a decode step chains its kernels, ran block copies faster
// (2.7 vs 3.0 us), and the step with block copies everywhere was 9 us faster than the selection's
// (bench/results/2026-12-05-selection-chains.md). So a weight of at most kMatmulMeasureChainBytes
// is timed as `calls` back-to-back calls (up to kMatmulMeasureMaxChainCalls, at most that many
// bytes of weights a chain), each on the next of `copies` copies of W in the scratch
// (`copy_stride` bytes apart), enough that a copy is read again only after at least L2's size of
// other copies: every call reads its weights from HBM, as in a step. calls == 1 (copies == 0):
// one call on the caller's W after an L2 flush, for larger weights (from ~10 us a call on an H100,
// Llama-3-8B's o, to hundreds for an LM head: the bias is a smaller share of the time) and where
// the scratch cannot hold copies enough.
inline constexpr int64_t kMatmulMeasureChainBytes = int64_t{48} << 20;
inline constexpr int kMatmulMeasureMaxChainCalls = 8;
// Copies keep W's address modulo this, so every operand alignment the measurement sees is W's.
inline constexpr int64_t kMatmulMeasureCopyAlign = 256;
struct MatmulMeasureChain {
  int calls = 1;
  int64_t copies = 0;
  int64_t copy_stride = 0;
};
constexpr MatmulMeasureChain matmul_measure_chain(int64_t weight_bytes, int64_t l2_bytes,
                                                  int64_t scratch_bytes) {
  MatmulMeasureChain chain;
  if (weight_bytes < 1 || weight_bytes > kMatmulMeasureChainBytes) return chain;
  const int64_t calls =
      std::min<int64_t>(kMatmulMeasureMaxChainCalls, kMatmulMeasureChainBytes / weight_bytes);
  // Room for W's offset within kMatmulMeasureCopyAlign, whole alignment units apart.
  const int64_t stride = (weight_bytes + 2 * kMatmulMeasureCopyAlign - 1) /
                         kMatmulMeasureCopyAlign * kMatmulMeasureCopyAlign;
  const int64_t l2 = std::max<int64_t>(l2_bytes, 0);
  const int64_t wanted = (2 * l2 + weight_bytes - 1) / weight_bytes + 1;
  const int64_t copies = std::min(std::max<int64_t>(scratch_bytes, 0) / stride, wanted);
  // Between two reads of a copy, the other copies' bytes must fill L2 at least once.
  if (calls < 2 || copies < 2 || (copies - 1) * weight_bytes < l2) return chain;
  chain.calls = static_cast<int>(calls);
  chain.copies = copies;
  chain.copy_stride = stride;
  return chain;
}

}  // namespace roofline
