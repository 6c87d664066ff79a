// rms_norm benchmarks over the shapes the test checks (rms_norm_shapes.h). Bytes processed count
// what the op must move: x read, out written, the weight read once (residual form: plus the
// residual read and written), so the GB/s column compares with the machine's memory bandwidth.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "ops/rms_norm/rms_norm.h"
#include "ops/rms_norm/rms_norm_shapes.h"

namespace roofline {
namespace {

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

void bm_rms_norm(benchmark::State& state) {
  const int64_t rows = state.range(0);
  const int64_t hidden = state.range(1);
  auto x = random_floats(rows * hidden, 1);
  auto w = random_floats(hidden, 2);
  std::vector<float> out(x.size());
  for (auto _ : state) {
    rms_norm_cpu({x.data(), w.data(), DType::kF32, out.data(), rows, hidden, 1e-6f});
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * (2 * rows * hidden + hidden) * 4);
}

void bm_rms_norm_residual(benchmark::State& state) {
  const int64_t rows = state.range(0);
  const int64_t hidden = state.range(1);
  auto x = random_floats(rows * hidden, 1);
  auto residual = random_floats(rows * hidden, 3);
  auto w = random_floats(hidden, 2);
  std::vector<float> out(x.size());
  for (auto _ : state) {
    // Residual updated in place, as in the decoder; its values drift but stay finite enough.
    rms_norm_residual_cpu({x.data(), residual.data(), residual.data(), w.data(), DType::kF32,
                           out.data(), rows, hidden, 1e-6f});
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * (4 * rows * hidden + hidden) * 4);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (const auto& s : kRmsNormShapes) {
    if (s.hidden >= 896) b->Args({s.num_rows, s.hidden});  // the tiny ones time only overhead
  }
}

BENCHMARK(bm_rms_norm)->Apply(shapes)->UseRealTime();
BENCHMARK(bm_rms_norm_residual)->Apply(shapes)->UseRealTime();

}  // namespace
}  // namespace roofline
