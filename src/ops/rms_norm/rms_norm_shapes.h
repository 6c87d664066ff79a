// The rms_norm shapes the test checks and the benchmark times: awkward sizes for correctness, and
// the decode / prefill shapes of real models (hidden 896 Qwen2-0.5B, 4096 Llama-3-8B, 8192 70B).
#pragma once

#include <cstdint>

namespace roofline {

struct RmsNormShape {
  int64_t num_rows;
  int64_t hidden;
};

inline constexpr RmsNormShape kRmsNormShapes[] = {
    {1, 1},    {1, 67},   {3, 67},    {7, 128},    {19, 896},
    {733, 67}, {1, 4096}, {16, 4096}, {733, 4096}, {1, 8192},
};

}  // namespace roofline
