// The matmul shapes the test checks and the benchmark times: awkward sizes (tails of the 4-column
// micro-kernel, the 16-column tile and the 8-lane dot) and the decode / prefill projections of a
// small real model (Qwen2-0.5B: hidden 896, q|k|v 1152, gate|up 9728).
#pragma once

#include <cstdint>

namespace roofline {

struct MatmulShape {
  int64_t m;
  int64_t n;
  int64_t k;
};

inline constexpr MatmulShape kMatmulTestShapes[] = {
    {1, 1, 1},     {3, 5, 7},     {7, 67, 67},    {19, 33, 130},
    {1, 17, 4096}, {733, 19, 67}, {5, 131, 1000}, {2, 1152, 896},
};

inline constexpr MatmulShape kMatmulBenchShapes[] = {
    {1, 1152, 896}, {1, 9728, 896}, {1, 896, 4864}, {1, 4096, 4096}, {64, 4096, 4096},
};

}  // namespace roofline
