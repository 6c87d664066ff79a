// matmul_cuda / matmul_bias_cuda against their CPU twins on the same bf16 inputs, on every element:
// every weight of kMatmulCudaTestWeights (Llama-3-8B and Qwen2.5-0.5B projections, odd sizes) with
// every m of kMatmulCudaTestMs, with and without bias, into a dense y and into a column range of a
// wider y (row stride > n; every element outside the range must stay untouched); plus: the
// algorithm cache makes no heuristic query for a problem it has seen, and a warmed-up call
// captures into a CUDA graph (which would fail on a cudaMalloc or another unsafe call) and
// replays to the same result.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "ops/matmul/matmul.h"
#include "ops/matmul/matmul_shapes.h"
#include "ops/testing/gpu_test_util.h"
#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

using testing::all_close;
using testing::DeviceBuffer;
using testing::from_bf16;
using testing::make_rng;
using testing::random_vector;
using testing::round_to_bf16;
using testing::to_bf16;

// Tolerance. The CPU twin gives y32 (fp32 sums of exactly the products the GPU multiplies); the GPU
// gives bf16(y32'), where y32' sums the same products in another order (cuBLASLt's tiles, split-K,
// tensor-core steps). So |gpu - cpu| <= 2^-8·|y32'| + |y32' - y32| (round to nearest, 8 significant
// bits), i.e. rtol 2^-8 and an atol that bounds the fp32 order difference. That difference is a sum
// of ~K roundings of partial sums of size ~rms(y): a random walk of size sqrt(K)·2^-24·rms(y); we
// allow 16× that with 2^-23 (tensor-core steps may truncate rather than round, which biases them),
// which also covers the drift of fully biased truncation over the K/16 tensor-core steps. With
// inputs in [-1, 1], rms(y) = sqrt(K/9 + 1/3) (bias included), so the atol grows as
// sqrt(K)·sqrt(K): 1e-5 at K = 72, 1.3e-3 at K = 4096, 9e-3 at K = 14336, while a wrong element
// (missing term, wrong row or column, missing bias) is off by ~0.3 or more.
constexpr double kRtol = 1.0 / 256.0;
double atol_for(int64_t k) {
  const double kd = static_cast<double>(k);
  return 16.0 * std::sqrt(kd) * std::ldexp(1.0, -23) * std::sqrt(kd / 9.0 + 1.0 / 3.0);
}

// Where y sits in its buffer. Without bias: the dense [m, n] (an odd n makes rows only 2-byte
// aligned), or columns [5, 5 + n) of rows of n + 8 (y's pointer 2-byte aligned). With bias, y and
// its rows must be 16-byte aligned (matmul.h): the dense [m, n], or columns [8, 8 + n) of rows of
// n + 11 rounded up to a multiple of 8.
// matmul_bias_cuda's domain (matmul.h): n and k multiples of 8.
bool bias_supported(const MatmulWeightShape& s) { return s.n % 8 == 0 && s.k % 8 == 0; }

struct Layout {
  int64_t offset;  // elements
  int64_t stride;  // elements
};
int64_t round_up_8(int64_t v) { return (v + 7) / 8 * 8; }
Layout y_layout(int64_t n, bool with_bias, bool strided) {
  if (!with_bias) return strided ? Layout{5, n + 8} : Layout{0, n};
  return strided ? Layout{8, round_up_8(n + 11)} : Layout{0, n};
}
constexpr uint16_t kPoisonBits = 0xffff;  // DeviceBuffer::poison: a bf16 NaN

struct Problem {
  int64_t m, n, k;
  const DeviceBuffer* x;
  const DeviceBuffer* w;
  const DeviceBuffer* bias;  // null: no bias
  DeviceBuffer* y;
  int64_t y_offset;  // elements
  int64_t y_row_stride;
};

MatmulParams gpu_params(const Problem& pr) {
  MatmulParams p;
  p.x = pr.x->get();
  p.w = pr.w->get();
  p.w_dtype = DType::kBF16;
  p.bias = pr.bias ? pr.bias->get() : nullptr;
  p.bias_dtype = DType::kBF16;
  p.y = pr.y->get<uint16_t>() + pr.y_offset;
  p.dtype = DType::kBF16;
  p.m = pr.m;
  p.n = pr.n;
  p.k = pr.k;
  p.y_row_stride = pr.y_row_stride;
  return p;
}

void run_gpu(const Problem& pr, MatmulCudaContext& ctx, cudaStream_t stream) {
  const MatmulParams p = gpu_params(pr);
  if (pr.bias) {
    matmul_bias_cuda(p, ctx, stream);
  } else {
    matmul_cuda(p, ctx, stream);
  }
}

// y [m, n] of the CPU twin on the same (bf16-valued) inputs.
std::vector<float> run_cpu(const std::vector<float>& x, const std::vector<uint16_t>& w,
                           const std::vector<uint16_t>* bias, int64_t m, int64_t n, int64_t k) {
  std::vector<float> y(static_cast<size_t>(m * n));
  testing::poison(y);
  MatmulParams p;
  p.x = x.data();
  p.w = w.data();
  p.w_dtype = DType::kBF16;
  p.bias = bias ? bias->data() : nullptr;
  p.bias_dtype = DType::kBF16;
  p.y = y.data();
  p.m = m;
  p.n = n;
  p.k = k;
  p.y_row_stride = n;
  if (bias) {
    matmul_bias_cpu(p);
  } else {
    matmul_cpu(p);
  }
  return y;
}

// The [m, n] range of a downloaded y with row stride `stride` starting at `offset`; every element
// outside it must still hold the poison.
::testing::AssertionResult extract(const std::vector<uint16_t>& y_bits, int64_t m, int64_t n,
                                   int64_t offset, int64_t stride, std::vector<float>* out) {
  out->clear();
  for (int64_t i = 0; i < static_cast<int64_t>(y_bits.size()); ++i) {
    const int64_t row = (i - offset) >= 0 ? (i - offset) / stride : -1;
    const int64_t col = (i - offset) >= 0 ? (i - offset) % stride : -1;
    const bool inside = row >= 0 && row < m && col < n;
    if (inside) {
      out->push_back(bf16_bits_to_f32(y_bits[static_cast<size_t>(i)]));
    } else if (y_bits[static_cast<size_t>(i)] != kPoisonBits) {
      return ::testing::AssertionFailure() << "element " << i << " outside y's range was written";
    }
  }
  return ::testing::AssertionSuccess();
}

class MatmulCudaTest : public ::testing::TestWithParam<MatmulWeightShape> {};

TEST_P(MatmulCudaTest, MatchesCpuTwinForEveryM) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  const MatmulWeightShape shape = GetParam();
  const int64_t n = shape.n;
  const int64_t k = shape.k;
  auto rng = make_rng(static_cast<uint64_t>(n) * 100003 + static_cast<uint64_t>(k));
  const std::vector<uint16_t> w_bits = to_bf16(random_vector(n * k, rng));
  const std::vector<uint16_t> bias_bits = to_bf16(random_vector(n, rng));
  const DeviceBuffer w = DeviceBuffer::from_host(w_bits);
  const DeviceBuffer bias = DeviceBuffer::from_host(bias_bits);
  auto ctx = MatmulCudaContext::create();

  for (const int64_t m : kMatmulCudaTestMs) {
    SCOPED_TRACE(std::string(shape.name) + ", m = " + std::to_string(m));
    const std::vector<float> x_vals = round_to_bf16(random_vector(m * k, rng));
    const DeviceBuffer x = DeviceBuffer::from_host(to_bf16(x_vals));

    const std::vector<float> expected = run_cpu(x_vals, w_bits, nullptr, m, n, k);
    const std::vector<float> expected_bias = run_cpu(x_vals, w_bits, &bias_bits, m, n, k);
    for (const bool with_bias : {false, true}) {
      if (with_bias && !bias_supported(shape)) continue;
      for (const bool strided : {false, true}) {
        const Layout layout = y_layout(n, with_bias, strided);
        SCOPED_TRACE(std::string(with_bias ? "bias" : "no bias") + ", y columns [" +
                     std::to_string(layout.offset) + ", " + std::to_string(layout.offset + n) +
                     ") of rows of " + std::to_string(layout.stride));
        DeviceBuffer y(static_cast<size_t>(m * layout.stride) * 2);
        y.poison();
        run_gpu({m, n, k, &x, &w, with_bias ? &bias : nullptr, &y, layout.offset, layout.stride},
                *ctx, nullptr);
        std::vector<float> got;
        ASSERT_TRUE(extract(y.to_host<uint16_t>(), m, n, layout.offset, layout.stride, &got));
        EXPECT_TRUE(all_close(got, with_bias ? expected_bias : expected, atol_for(k), kRtol));
      }
    }
  }

  // Every problem is now cached: running them again (fresh x) queries no heuristic.
  const int64_t queries = ctx->num_heuristic_queries();
  const int64_t problems = ctx->num_cached_problems();
  const int64_t variants = bias_supported(shape) ? 4 : 2;
  EXPECT_EQ(problems, variants * static_cast<int64_t>(std::size(kMatmulCudaTestMs)));
  for (const int64_t m : kMatmulCudaTestMs) {
    const DeviceBuffer x = DeviceBuffer::from_host(to_bf16(random_vector(m * k, rng)));
    for (const bool with_bias : {false, true}) {
      if (with_bias && !bias_supported(shape)) continue;
      for (const bool strided : {false, true}) {
        const Layout layout = y_layout(n, with_bias, strided);
        DeviceBuffer y(static_cast<size_t>(m * layout.stride) * 2);
        run_gpu({m, n, k, &x, &w, with_bias ? &bias : nullptr, &y, layout.offset, layout.stride},
                *ctx, nullptr);
      }
    }
  }
  ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(ctx->num_heuristic_queries(), queries);
  EXPECT_EQ(ctx->num_cached_problems(), problems);
}

INSTANTIATE_TEST_SUITE_P(Weights, MatmulCudaTest, ::testing::ValuesIn(kMatmulCudaTestWeights),
                         [](const ::testing::TestParamInfo<MatmulWeightShape>& info) {
                           std::string name = info.param.name;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

TEST(MatmulCudaDeathTest, BiasOnAnUnalignedShapeAborts) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  constexpr int64_t kM = 8, kN = 129, kK = 72;
  const DeviceBuffer x(kM * kK * 2), w(kN * kK * 2), bias(kN * 2);
  DeviceBuffer y(kM * kN * 2);
  auto ctx = MatmulCudaContext::create();
  const MatmulParams p = gpu_params({kM, kN, kK, &x, &w, &bias, &y, 0, kN});
  EXPECT_DEATH(matmul_bias_cuda(p, *ctx, nullptr), "matmul_bias_cuda needs n, k");
}

TEST(MatmulCudaGraphTest, WarmedUpCallCapturesAndReplays) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr int64_t kM = 17, kN = 1152, kK = 896;
  auto rng = make_rng(7);
  const std::vector<uint16_t> w_bits = to_bf16(random_vector(kN * kK, rng));
  const std::vector<uint16_t> bias_bits = to_bf16(random_vector(kN, rng));
  const std::vector<float> x_vals = round_to_bf16(random_vector(kM * kK, rng));
  const DeviceBuffer w = DeviceBuffer::from_host(w_bits);
  const DeviceBuffer bias = DeviceBuffer::from_host(bias_bits);
  const DeviceBuffer x = DeviceBuffer::from_host(to_bf16(x_vals));
  DeviceBuffer y(static_cast<size_t>(kM * kN) * 2);
  auto ctx = MatmulCudaContext::create();
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const Problem pr{kM, kN, kK, &x, &w, &bias, &y, 0, kN};  // 1152: rows 16-byte aligned
  run_gpu(pr, *ctx, stream);  // warm-up: chooses and caches the algorithm
  ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));

  // Global capture mode rejects unsafe calls (cudaMalloc, synchronisation) made while capturing.
  cudaGraph_t graph;
  ROOFLINE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  run_gpu(pr, *ctx, stream);
  ROOFLINE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  ROOFLINE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  y.poison();
  ROOFLINE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> got;
  ASSERT_TRUE(extract(y.to_host<uint16_t>(), kM, kN, 0, kN, &got));
  EXPECT_TRUE(all_close(got, run_cpu(x_vals, w_bits, &bias_bits, kM, kN, kK), atol_for(kK), kRtol));
  ROOFLINE_CUDA_CHECK(cudaGraphExecDestroy(exec));
  ROOFLINE_CUDA_CHECK(cudaGraphDestroy(graph));
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace roofline
