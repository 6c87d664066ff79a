// rms_norm_cuda / rms_norm_residual_cuda bandwidth on the GPU, bf16 activations and weight, beside
// the 4.28 TB/s copy ceiling. Bytes are the minimum the op must move: rms_norm reads x and writes
// out (2·T·H elements), the fused form reads x and residual_in and writes residual_out and out
// (4·T·H), plus the weight once (H). Inputs and outputs rotate through enough copies to defeat
// L2. Every kernel variant (rms_norm_launch.h) is timed, one line each; "default" marks the
// launcher's. Target (issue): the fused form >= 85% of the ceiling at 8192 x 4096. Prints a message
// and exits 0 without a GPU.
#include <cstdio>
#include <string>
#include <vector>

#include "ops/rms_norm/rms_norm.h"
#include "ops/rms_norm/rms_norm_cuda_variant.h"
#include "ops/testing/gpu_bench_buffers.h"
#include "ops/testing/gpu_bench_util.h"

namespace roofline {
namespace {

struct Buffers {
  bench::GpuArray x, residual, residual_out, out;
};

void run_shape(int64_t tokens, int64_t hidden) {
  const size_t act_bytes = static_cast<size_t>(tokens * hidden * 2);
  const int copies = bench::rotation_count(4 * act_bytes);
  std::vector<Buffers> sets;
  for (int i = 0; i < copies; ++i) {
    Buffers b{bench::GpuArray(act_bytes), bench::GpuArray(act_bytes), bench::GpuArray(act_bytes),
              bench::GpuArray(act_bytes)};
    b.x.fill_bf16(-2.0f, 2.0f, 1 + i);
    b.residual.fill_bf16(-2.0f, 2.0f, 100 + i);
    sets.push_back(std::move(b));
  }
  bench::GpuArray weight(static_cast<size_t>(hidden * 2));
  weight.fill_bf16(0.5f, 1.5f, 7);

  const std::string shape = std::to_string(tokens) + "x" + std::to_string(hidden);
  for (int v = 0; v < kRmsNormNumVariants; ++v) {
    const std::string variant = std::string(" ") + kRmsNormVariants[v].name;
    const std::string norm_label = variant + (v == kRmsNormDefaultVariant ? " (default)" : "");
    const std::string fused_label =
        variant + (v == kRmsNormResidualDefaultVariant ? " (default)" : "");
    const double ms_norm = bench::median_ms([&](int i) {
      const Buffers& b = sets[static_cast<size_t>(i % copies)];
      RmsNormParams p;
      p.x = b.x.get();
      p.weight = weight.get();
      p.weight_dtype = DType::kBF16;
      p.out = b.out.get();
      p.num_rows = tokens;
      p.hidden = hidden;
      p.dtype = DType::kBF16;
      rms_norm_cuda_variant(p, v, nullptr);
    });
    const double ms_fused = bench::median_ms([&](int i) {
      const Buffers& b = sets[static_cast<size_t>(i % copies)];
      RmsNormResidualParams p;
      p.x = b.x.get();
      p.residual_in = b.residual.get();
      p.residual_out = b.residual_out.get();
      p.weight = weight.get();
      p.weight_dtype = DType::kBF16;
      p.out = b.out.get();
      p.num_rows = tokens;
      p.hidden = hidden;
      p.dtype = DType::kBF16;
      rms_norm_residual_cuda_variant(p, v, nullptr);
    });
    bench::print_bandwidth(("rms_norm bf16 " + shape + norm_label).c_str(), ms_norm,
                           static_cast<double>(2 * act_bytes + hidden * 2));
    bench::print_bandwidth(("rms_norm_residual bf16 " + shape + fused_label).c_str(), ms_fused,
                           static_cast<double>(4 * act_bytes + hidden * 2));
  }
}

}  // namespace
}  // namespace roofline

int main() {
  if (!roofline::bench::gpu_present()) {
    std::printf("rms_norm_cuda_bench: no CUDA device, skipped\n");
    return 0;
  }
  roofline::run_shape(8192, 4096);  // the target shape
  roofline::run_shape(1, 4096);     // decode, for information: launch latency dominates
  roofline::run_shape(64, 4096);
  return 0;
}
