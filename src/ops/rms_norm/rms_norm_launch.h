// The launch shape of the CUDA rms_norm kernels: a pure host heuristic (tested on the CPU in
// rms_norm_test.cc) shared by the launcher's dispatch and its tests.
//
// One block normalises one row. Each thread owns `items` packs of `vector_width` elements spaced
// blockDim apart and keeps them in registers between the sum of squares and the scaling, so every
// element is read from memory once. Threads are a multiple of 32 (the block sum shuffles whole
// warps) and at most 256, so every kernel is compiled for 256 threads and may keep up to 255
// registers per thread without spilling. Rows too long to fit in 256 threads x 4 packs (8192 bf16
// or 4096 f32 elements on the 16-byte path, 1024 on the scalar path) take the two-pass variant
// (items == 0), which re-reads the row (from L2: one row is at most a few hundred KB).
#pragma once

#include <cstdint>

namespace roofline {

struct RmsNormLaunchShape {
  int threads = 0;  // per block, a multiple of 32 in [32, kRmsNormMaxThreads]
  int items = 0;    // packs per thread held in registers: 1, 2 or 4; 0: two-pass, not held
};

// 256 threads: small blocks keep many rows in flight per SM and barriers cheap, and 4 packs per
// thread (up to 8 loads of 16 bytes in flight in the fused form) stays well inside the registers.
inline constexpr int kRmsNormMaxThreads = 256;
inline constexpr int kRmsNormMaxItems = 4;

// The fewest packs per thread (registers) that fit the row into one block; two passes otherwise.
constexpr RmsNormLaunchShape rms_norm_launch_shape(int64_t hidden, int vector_width) {
  const int64_t packs = (hidden + vector_width - 1) / vector_width;
  for (int items = 1; items <= kRmsNormMaxItems; items *= 2) {
    const int64_t threads = ((packs + items - 1) / items + 31) / 32 * 32;
    if (threads <= kRmsNormMaxThreads) return {static_cast<int>(threads), items};
  }
  return {kRmsNormMaxThreads, 0};
}

}  // namespace roofline
