// sampling: turns one row of logits into a token id: greedy argmax, or a draw from the
// temperature-scaled distribution restricted by top-k and top-p (nucleus), given a uniform number
// in [0, 1) from the caller's seeded generator. The draw is an inverse-CDF lookup over the kept
// tokens in descending-probability order, so a fixed uniform always yields the same token.
#pragma once

#include <cstdint>

#include "core/cuda_stream.h"
#include "core/dtype.h"

namespace roofline {

struct SamplingConfig {
  float temperature = 0.0f;  // 0: greedy
  int32_t top_k = 0;         // 0: all tokens
  float top_p = 1.0f;        // (0, 1]
};

// Index of the largest logit; the lowest index wins ties. NaN logits are never chosen; -1 when
// every logit is NaN (or vocab_size is 0), as sample_cpu.
int32_t argmax_cpu(const float* logits, int64_t vocab_size);

// Greedy decoding of a batch: argmax_cpu of every row of logits.
struct ArgmaxParams {
  const void* logits = nullptr;  // [num_rows, vocab_size] in dtype
  int32_t* out = nullptr;        // [num_rows]: the row's argmax, -1 for an all-NaN row
  int64_t num_rows = 0;
  int64_t vocab_size = 0;        // < INT32_MAX
  DType dtype = DType::kF32;     // of logits: kF32 or kBF16
};

// CPU backend: dtype kF32 or kBF16 (bf16 -> f32 is exact, so the result is the same either way).
void argmax_rows_cpu(const ArgmaxParams& p);
// CUDA backend: dtype kF32 or kBF16, every pointer on the device. Asynchronous on `stream`.
void argmax_cuda(const ArgmaxParams& p, CudaStream stream);

int32_t sample_cpu(const float* logits, int64_t vocab_size, const SamplingConfig& config,
                   double uniform);

}  // namespace roofline
