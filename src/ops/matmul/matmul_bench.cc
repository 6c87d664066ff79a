// matmul benchmarks over matmul_shapes.h, for f32 and bf16 weights. Bytes processed count the
// compulsory traffic (weights once, x read, y written), the right ceiling for decode (m = 1),
// which is memory bound; the FLOP/s counter is the one to read for prefill.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "ops/matmul/matmul.h"
#include "ops/matmul/matmul_shapes.h"

namespace roofline {
namespace {

template <DType kWeightDType>
void bm_matmul(benchmark::State& state) {
  const int64_t m = state.range(0);
  const int64_t n = state.range(1);
  const int64_t k = state.range(2);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (float& v : x) v = dist(rng);
  std::vector<float> w_f32(static_cast<size_t>(n * k));
  std::vector<uint16_t> w_bf16(w_f32.size());
  for (size_t i = 0; i < w_f32.size(); ++i) {
    w_f32[i] = dist(rng);
    w_bf16[i] = f32_to_bf16_bits(w_f32[i]);
  }
  std::vector<float> y(static_cast<size_t>(m * n));
  MatmulParams p;
  p.x = x.data();
  p.w = kWeightDType == DType::kF32 ? static_cast<const void*>(w_f32.data()) : w_bf16.data();
  p.w_dtype = kWeightDType;
  p.y = y.data();
  p.m = m;
  p.n = n;
  p.k = k;
  p.y_row_stride = n;
  for (auto _ : state) {
    matmul_cpu(p);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const int64_t bytes = n * k * dtype_size_bytes(kWeightDType) + (m * k + m * n) * 4;
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["FLOP/s"] = benchmark::Counter(static_cast<double>(2 * m * n * k),
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (const auto& s : kMatmulBenchShapes) b->Args({s.m, s.n, s.k});
}

BENCHMARK_TEMPLATE(bm_matmul, DType::kF32)->Apply(shapes)->UseRealTime();
BENCHMARK_TEMPLATE(bm_matmul, DType::kBF16)->Apply(shapes)->UseRealTime();

}  // namespace
}  // namespace roofline
