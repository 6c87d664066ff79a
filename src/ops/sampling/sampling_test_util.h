// Test helper shared by sampling_test (the CPU twin) and sampling_cuda_test (the kernel against
// the twin): the per-row outputs of sample_rows_*, poisoned until an op writes them.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "ops/sampling/sampling.h"

namespace roofline::testing {

struct SampleRowsResult {
  std::vector<int32_t> tokens;
  std::vector<uint32_t> errors;
  std::vector<int32_t> nonfinite;
  std::vector<float> logprobs;
  std::vector<int32_t> top_ids;     // [rows, max_top]
  std::vector<float> top_logprobs;  // [rows, max_top]

  // Outputs for `rows` rows of up to max_top alternatives, every entry poisoned (-7, 0xdead, NaN).
  static SampleRowsResult poisoned(size_t rows, int32_t max_top) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const size_t top = rows * static_cast<size_t>(max_top);
    return {std::vector<int32_t>(rows, -7), std::vector<uint32_t>(rows, 0xdeadu),
            std::vector<int32_t>(rows, -7), std::vector<float>(rows, nan),
            std::vector<int32_t>(top, -7),  std::vector<float>(top, nan)};
  }

  // Points p's outputs at rows [begin, ...) of this result (alternatives only when max_top > 0).
  void bind(SampleRowsParams& p, size_t begin, int32_t max_top) {
    p.tokens = tokens.data() + begin;
    p.errors = errors.data() + begin;
    p.nonfinite_counts = nonfinite.data() + begin;
    p.logprobs = logprobs.data() + begin;
    if (max_top > 0) {
      p.top_ids = top_ids.data() + begin * static_cast<size_t>(max_top);
      p.top_logprobs = top_logprobs.data() + begin * static_cast<size_t>(max_top);
    }
    p.max_top_logprobs = max_top;
  }
};

}  // namespace roofline::testing
