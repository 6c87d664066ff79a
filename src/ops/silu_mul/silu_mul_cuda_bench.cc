// silu_mul_cuda bandwidth on the GPU, bf16, beside the 4.28 TB/s copy ceiling. Bytes are the
// minimum the op must move: read gate|up (2·T·I elements), write out (T·I). llama3-8b's
// intermediate size 14336 at 8192 tokens is 705 MB per call. Inputs and outputs rotate through
// enough copies to defeat L2. Every kernel variant (silu_mul_cuda_variant.h) is timed, one line
// each; "default" marks the launcher's. Target (issue): >= 85% of the ceiling at 8192 tokens.
// Prints a message and exits 0 without a GPU.
#include <cstdio>
#include <string>
#include <vector>

#include "ops/silu_mul/silu_mul.h"
#include "ops/silu_mul/silu_mul_cuda_variant.h"
#include "ops/testing/gpu_bench_buffers.h"
#include "ops/testing/gpu_bench_util.h"

namespace roofline {
namespace {

void run_shape(int64_t tokens, int64_t inter) {
  const size_t out_bytes = static_cast<size_t>(tokens * inter * 2);
  const int copies = bench::rotation_count(3 * out_bytes);
  std::vector<bench::GpuArray> gate_up, out;
  for (int i = 0; i < copies; ++i) {
    gate_up.emplace_back(2 * out_bytes);
    gate_up.back().fill_bf16(-6.0f, 6.0f, 1 + i);
    out.emplace_back(out_bytes);
  }
  for (int v = 0; v < kSiluMulNumVariants; ++v) {
    const double ms = bench::median_ms([&](int i) {
      SiluMulParams p;
      p.gate_up = gate_up[static_cast<size_t>(i % copies)].get();
      p.out = out[static_cast<size_t>(i % copies)].get();
      p.num_tokens = tokens;
      p.intermediate = inter;
      p.dtype = DType::kBF16;
      silu_mul_cuda_variant(p, v, nullptr);
    });
    const std::string name = "silu_mul bf16 " + std::to_string(tokens) + "x" +
                             std::to_string(inter) + " " + kSiluMulVariants[v].name +
                             (v == kSiluMulDefaultVariant ? " (default)" : "");
    bench::print_bandwidth(name.c_str(), ms, static_cast<double>(3 * out_bytes));
  }
}

}  // namespace
}  // namespace roofline

int main() {
  if (!roofline::bench::gpu_present()) {
    std::printf("silu_mul_cuda_bench: no CUDA device, skipped\n");
    return 0;
  }
  roofline::run_shape(8192, 14336);  // the target shape (llama3-8b)
  roofline::run_shape(8192, 4096);
  roofline::run_shape(1, 14336);  // decode, for information: launch latency dominates
  roofline::run_shape(64, 14336);
  return 0;
}
