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

// A weight of a real model (or an awkward one) for the CUDA test and benchmark.
struct MatmulWeightShape {
  const char* name;
  int64_t n;
  int64_t k;
};

// Llama-3-8B's per-layer projections (q|k|v and gate|up stacked, as the CUDA backend stores them).
inline constexpr MatmulWeightShape kLlama3_8bWeights[] = {
    {"llama3-8b qkv", 6144, 4096},
    {"llama3-8b o", 4096, 4096},
    {"llama3-8b gate_up", 28672, 4096},
    {"llama3-8b down", 4096, 14336},
};

// Qwen2.5-0.5B's per-layer projections: a small model whose decode GEMMs are short streams of
// fewer column blocks than the H200 has SMs (o and down: 56), where the launch's fixed costs and
// the split choice decide the time.
inline constexpr MatmulWeightShape kQwen25_05bWeights[] = {
    {"qwen2.5-0.5b qkv", 1152, 896},
    {"qwen2.5-0.5b o", 896, 896},
    {"qwen2.5-0.5b gate_up", 9728, 896},
    {"qwen2.5-0.5b down", 896, 4864},
};

// The CUDA test's weights: every per-layer projection of Llama-3-8B, Qwen2.5-7B (hidden 3584,
// q|k|v 3584 + 2·512, intermediate 18944) and Qwen2.5-0.5B (hidden 896, q|k|v 1152, gate|up 9728,
// intermediate 4864), and odd sizes that no tile divides (including K not a multiple of 8, whose
// rows are only 2-byte aligned and which only cuBLASLt takes). The LM heads are left out: their
// CPU twin at every m would dominate the test's time, and their shape class (n >> 132 column
// blocks, no split) is gate_up's.
inline constexpr MatmulWeightShape kMatmulCudaTestWeights[] = {
    {"llama3-8b qkv", 6144, 4096},
    {"llama3-8b o", 4096, 4096},
    {"llama3-8b gate_up", 28672, 4096},
    {"llama3-8b down", 4096, 14336},
    {"qwen2.5-7b qkv", 4608, 3584},
    {"qwen2.5-7b o", 3584, 3584},
    {"qwen2.5-7b gate_up", 37888, 3584},
    {"qwen2.5-7b down", 3584, 18944},
    {"qwen2.5-0.5b qkv", 1152, 896},
    {"qwen2.5-0.5b o", 896, 896},
    {"qwen2.5-0.5b gate_up", 9728, 896},
    {"qwen2.5-0.5b down", 896, 4864},
    {"odd 129x72", 129, 72},
    {"odd 131x67", 131, 67},
    {"odd 1x8", 1, 8},
    {"odd 33x4104", 33, 4104},  // K = 128 chunks + 8: a K tail inside the last split
};

// Token counts the CUDA test runs every weight with: decode batches, awkward counts across the
// m buckets (3, 17) and a long prefill chunk (733).
inline constexpr int64_t kMatmulCudaTestMs[] = {1, 2, 3, 8, 17, 32, 64, 733};

// The CUDA benchmark's token counts: decode batches (memory bound) and one prefill (compute bound).
inline constexpr int64_t kMatmulCudaBenchDecodeMs[] = {1, 2, 4, 8, 16, 32, 64};
inline constexpr int64_t kMatmulCudaBenchPrefillM = 8192;

}  // namespace roofline
