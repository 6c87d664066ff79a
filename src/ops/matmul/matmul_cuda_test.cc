// matmul_cuda / matmul_bias_cuda / matmul_residual_cuda against their CPU twins on the same bf16
// inputs, on every element: every weight of kMatmulCudaTestWeights (the projections of Llama-3-8B,
// Qwen2.5-7B and Qwen2.5-0.5B, odd sizes) with every m of kMatmulCudaTestMs, through each
// implementation — cuBLASLt forced, the skinny kernel forced (m <= 64, k a multiple of 8), and the
// measured selection — with no epilogue, bias and residual, into a dense y and into a column range
// of a wider y (row stride > n; every element outside the range must stay untouched; the strided
// residual runs in place, y = y + x·Wᵀ). Plus: the cuBLASLt algorithm cache and the implementation
// choice are made once per problem; every forced split count of the skinny kernel gives the same
// bits run after run (its arrival counters reset themselves); warmed-up calls of each
// implementation capture into a CUDA graph and replay (twice) to the right result; a call that
// meets an unmeasured problem inside a capture runs cuBLASLt; a second context takes the first
// one's measured choice; bad input aborts with its reason. The RMSNorm prologue: every
// implementation and epilogue against the CPU twin (rms_norm_cpu, then the GEMM), rows of x at
// scales 1/4 to 4 so that a row normalised by another row's 1 / rms is far off; and in a graph.
// The SwiGLU epilogue (gate and up rows of one weight, y = silu(gate) · up): every implementation,
// with and without the prologue, against the CPU twin.
// The RoPE epilogue (q|k|v rows; q rotated to its output, k rotated and v into the paged cache):
// every implementation, with and without bias and the prologue, against the CPU twin, and the
// skinny kernel's fused form bit for bit against its product followed by qkv_rope_cuda. The skinny
// kernel's few-token variant (m <= 4) forced on every weight at m = 1 and 3, against the twin and
// bit for bit against the two-block variant. The logit tile summaries (the LM head's, for the
// sampler): summarize_logit_tiles_cuda against its CPU oracle (dtypes, row layouts, tile sizes,
// non-finite rows; captured once and replayed for new epochs), and every implementation's
// summaries of its own y against the oracle, with y bit for bit the call's without them.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ops/matmul/matmul.h"
#include "ops/matmul/matmul_shapes.h"
#include "ops/matmul/matmul_skinny.h"
#include "ops/matmul/matmul_wide.h"
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
// tensor-core steps; the skinny kernel's chunks, warps and splits). So |gpu - cpu| <=
// 2^-8·|y32'| + |y32' - y32| (round to nearest, 8 significant bits), i.e. rtol 2^-8 and an atol
// that bounds the fp32 order difference. That difference is a sum of ~K roundings of partial sums
// of size ~rms(y): a random walk of size sqrt(K)·2^-24·rms(y); we allow 16× that with 2^-23
// (tensor-core steps may truncate rather than round, which biases them), which also covers the
// drift of fully biased truncation over the K/16 tensor-core steps. With inputs in [-1, 1],
// rms(y) = sqrt(K/9 + 1/3) (bias included), so the atol grows as sqrt(K)·sqrt(K): 1e-5 at K = 72,
// 1.3e-3 at K = 4096, 9e-3 at K = 14336, while a wrong element (missing term, wrong row or column,
// missing bias or residual) is off by ~0.3 or more. The residual (in [-2, 2]) adds to y after the
// sum, in fp32 on both sides, so it only enters through rtol·|ref|.
constexpr double kRtol = 1.0 / 256.0;
double atol_for(int64_t k) {
  const double kd = static_cast<double>(k);
  return 16.0 * std::sqrt(kd) * std::ldexp(1.0, -23) * std::sqrt(kd / 9.0 + 1.0 / 3.0);
}

constexpr MatmulEpilogue kEpilogues[] = {MatmulEpilogue::kNone, MatmulEpilogue::kBias,
                                         MatmulEpilogue::kResidual};
const char* epilogue_name(MatmulEpilogue e) {
  return e == MatmulEpilogue::kNone   ? "no epilogue"
         : e == MatmulEpilogue::kBias ? "bias"
                                      : "residual";
}
const char* impl_name(MatmulImpl impl) {
  switch (impl) {
    case MatmulImpl::kCublas:
      return "cuBLASLt";
    case MatmulImpl::kSkinny:
      return "skinny";
    case MatmulImpl::kWide:
      return "wide";
    case MatmulImpl::kAuto:
      break;
  }
  return "auto";
}

// Whether an implementation takes the problem (the others abort by design; tested below). The
// skinny and the wide kernel take the same decode problems (the wide one runs the RMSNorm prologue
// and the SwiGLU and RoPE epilogues as kernels of their own).
bool skinny_takes(int64_t m, int64_t k) { return m <= kMatmulSkinnyMaxM && k % 8 == 0; }
bool decode_only(MatmulImpl impl) {
  return impl == MatmulImpl::kSkinny || impl == MatmulImpl::kWide;
}
// cuBLASLt's bias epilogue rounds once only for n, k multiples of 8 with aligned y (matmul.h).
bool cublas_bias_takes(const MatmulWeightShape& s) { return s.n % 8 == 0 && s.k % 8 == 0; }
bool runs(MatmulImpl impl, MatmulEpilogue e, const MatmulWeightShape& s, int64_t m) {
  switch (impl) {
    case MatmulImpl::kCublas:
      return e != MatmulEpilogue::kBias || cublas_bias_takes(s);
    case MatmulImpl::kSkinny:
    case MatmulImpl::kWide:
      return skinny_takes(m, s.k);
    case MatmulImpl::kAuto:
      return e != MatmulEpilogue::kBias || cublas_bias_takes(s) || skinny_takes(m, s.k);
  }
  return false;
}

// Where y sits in its buffer: the dense [m, n] (an odd n makes rows only 2-byte aligned), or
// columns [5, 5 + n) of rows of n + 8 (y's pointer 2-byte aligned). With bias on cuBLASLt, y and
// its rows must be 16-byte aligned (matmul.h): columns [8, 8 + n) of rows of n + 11 rounded up to
// a multiple of 8 — used for bias under every implementation, so their problems line up.
struct Layout {
  int64_t offset;  // elements
  int64_t stride;  // elements
};
int64_t round_up_8(int64_t v) { return (v + 7) / 8 * 8; }
Layout y_layout(int64_t n, MatmulEpilogue e, bool strided) {
  if (!strided) return {0, n};
  return e == MatmulEpilogue::kBias ? Layout{8, round_up_8(n + 11)} : Layout{5, n + 8};
}
constexpr uint16_t kPoisonBits = 0xffff;  // DeviceBuffer::poison: a bf16 NaN

struct Inputs {
  const DeviceBuffer* x;
  const DeviceBuffer* w;
  const DeviceBuffer* bias;
  const DeviceBuffer* norm = nullptr;  // the RMSNorm prologue's weight [k], when set
  DeviceBuffer* normed = nullptr;      // its scratch [m, k]
};
constexpr float kNormEps = 1e-6f;

// Runs y = x·Wᵀ (+ epilogue) on the GPU into a fresh poisoned buffer laid out as `layout`; the
// residual (bf16 bits of [m, n]) is placed in y's buffer itself when `in_place`, else in its own
// buffer with y's layout. Returns the whole downloaded buffer.
std::vector<uint16_t> run_gpu(const Inputs& in, int64_t m, int64_t n, int64_t k, MatmulEpilogue e,
                              const std::vector<uint16_t>& residual_bits, Layout layout,
                              bool in_place, MatmulCudaContext& ctx, cudaStream_t stream) {
  const size_t elems = static_cast<size_t>(m * layout.stride);
  std::vector<uint16_t> placed(elems, kPoisonBits);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      placed[static_cast<size_t>(i * layout.stride + layout.offset + j)] =
          residual_bits[static_cast<size_t>(i * n + j)];
  DeviceBuffer y = in_place ? DeviceBuffer::from_host(placed) : DeviceBuffer(elems * 2);
  if (!in_place) y.poison();
  const DeviceBuffer residual = e == MatmulEpilogue::kResidual && !in_place
                                    ? DeviceBuffer::from_host(placed)
                                    : DeviceBuffer();
  MatmulParams p;
  p.x = in.x->get();
  p.w = in.w->get();
  p.w_dtype = DType::kBF16;
  p.bias = in.bias->get();
  p.bias_dtype = DType::kBF16;
  p.y = y.get<uint16_t>() + layout.offset;
  if (e == MatmulEpilogue::kResidual)
    p.residual = (in_place ? y.get<uint16_t>() : residual.get<uint16_t>()) + layout.offset;
  p.dtype = DType::kBF16;
  p.m = m;
  p.n = n;
  p.k = k;
  p.y_row_stride = layout.stride;
  if (in.norm != nullptr) {
    p.norm_weight = in.norm->get();
    p.norm_weight_dtype = DType::kBF16;
    p.norm_eps = kNormEps;
    p.normed = in.normed->get();
  }
  switch (e) {
    case MatmulEpilogue::kNone:
      matmul_cuda(p, ctx, stream);
      break;
    case MatmulEpilogue::kBias:
      matmul_bias_cuda(p, ctx, stream);
      break;
    case MatmulEpilogue::kResidual:
      matmul_residual_cuda(p, ctx, stream);
      break;
  }
  ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return y.to_host<uint16_t>();
}

// y [m, n] of the CPU twin on the same (bf16-valued) inputs.
std::vector<float> run_cpu(const std::vector<float>& x, const std::vector<uint16_t>& w,
                           const std::vector<uint16_t>& bias, const std::vector<float>& residual,
                           int64_t m, int64_t n, int64_t k, MatmulEpilogue e,
                           const std::vector<uint16_t>* norm = nullptr) {
  std::vector<float> y(static_cast<size_t>(m * n));
  testing::poison(y);
  std::vector<float> normed(static_cast<size_t>(m * k));
  MatmulParams p;
  p.x = x.data();
  p.w = w.data();
  p.w_dtype = DType::kBF16;
  p.bias = bias.data();
  p.bias_dtype = DType::kBF16;
  p.residual = residual.data();
  p.y = y.data();
  p.m = m;
  p.n = n;
  p.k = k;
  p.y_row_stride = n;
  if (norm != nullptr) {
    p.norm_weight = norm->data();
    p.norm_weight_dtype = DType::kBF16;
    p.norm_eps = kNormEps;
    p.normed = normed.data();
  }
  switch (e) {
    case MatmulEpilogue::kNone:
      matmul_cpu(p);
      break;
    case MatmulEpilogue::kBias:
      matmul_bias_cpu(p);
      break;
    case MatmulEpilogue::kResidual:
      matmul_residual_cpu(p);
      break;
  }
  return y;
}

// The [m, n] range of a downloaded y with row stride `stride` starting at `offset`; every element
// outside it must still hold the poison.
::testing::AssertionResult extract(const std::vector<uint16_t>& y_bits, int64_t m, int64_t n,
                                   Layout layout, std::vector<float>* out) {
  out->clear();
  for (int64_t i = 0; i < static_cast<int64_t>(y_bits.size()); ++i) {
    const int64_t rel = i - layout.offset;
    const int64_t row = rel >= 0 ? rel / layout.stride : -1;
    const int64_t col = rel >= 0 ? rel % layout.stride : -1;
    const bool inside = row >= 0 && row < m && col < n;
    if (inside) {
      out->push_back(bf16_bits_to_f32(y_bits[static_cast<size_t>(i)]));
    } else if (y_bits[static_cast<size_t>(i)] != kPoisonBits) {
      return ::testing::AssertionFailure() << "element " << i << " outside y's range was written";
    }
  }
  return ::testing::AssertionSuccess();
}

std::unique_ptr<MatmulCudaContext> context(MatmulImpl impl) {
  auto ctx = MatmulCudaContext::create();
  ctx->set_impl(impl);
  return ctx;
}

// The params of y[m, n] (row stride `stride`) = x · Wᵀ, bf16 on the device: what the tests of
// single calls fill before adding what is particular to them.
MatmulParams bf16_params(const DeviceBuffer& x, const DeviceBuffer& w, DeviceBuffer& y, int64_t m,
                         int64_t n, int64_t k, int64_t stride) {
  MatmulParams p;
  p.x = x.get();
  p.w = w.get();
  p.w_dtype = DType::kBF16;
  p.bias_dtype = DType::kBF16;
  p.norm_weight_dtype = DType::kBF16;
  p.y = y.get();
  p.dtype = DType::kBF16;
  p.m = m;
  p.n = n;
  p.k = k;
  p.y_row_stride = stride;
  return p;
}

class MatmulCudaTest : public ::testing::TestWithParam<MatmulWeightShape> {};

TEST_P(MatmulCudaTest, MatchesCpuTwinForEveryMImplementationAndEpilogue) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  const MatmulWeightShape shape = GetParam();
  const int64_t n = shape.n;
  const int64_t k = shape.k;
  auto rng = make_rng(static_cast<uint64_t>(n) * 100003 + static_cast<uint64_t>(k));
  const std::vector<uint16_t> w_bits = to_bf16(random_vector(n * k, rng));
  const std::vector<uint16_t> bias_bits = to_bf16(random_vector(n, rng));
  const DeviceBuffer w = DeviceBuffer::from_host(w_bits);
  const DeviceBuffer bias = DeviceBuffer::from_host(bias_bits);
  const MatmulImpl impls[] = {MatmulImpl::kCublas, MatmulImpl::kSkinny, MatmulImpl::kAuto,
                              MatmulImpl::kWide};
  std::unique_ptr<MatmulCudaContext> ctxs[] = {context(impls[0]), context(impls[1]),
                                               context(impls[2]), context(impls[3])};
  // The legacy default stream: the uploads (cudaMemcpy) and the poison (cudaMemset) run on it, so
  // every call is ordered after them.
  const cudaStream_t stream = nullptr;

  for (const int64_t m : kMatmulCudaTestMs) {
    const std::vector<float> x_vals = round_to_bf16(random_vector(m * k, rng));
    const std::vector<uint16_t> residual_bits = to_bf16(random_vector(m * n, rng, -2.0f, 2.0f));
    const std::vector<float> residual_vals = from_bf16(residual_bits);
    const DeviceBuffer x = DeviceBuffer::from_host(to_bf16(x_vals));
    for (const MatmulEpilogue e : kEpilogues) {
      const std::vector<float> expected =
          run_cpu(x_vals, w_bits, bias_bits, residual_vals, m, n, k, e);
      for (int i = 0; i < 4; ++i) {
        if (!runs(impls[i], e, shape, m)) continue;
        for (const bool strided : {false, true}) {
          const Layout layout = y_layout(n, e, strided);
          const bool in_place = e == MatmulEpilogue::kResidual && strided;
          SCOPED_TRACE(std::string(shape.name) + ", m = " + std::to_string(m) + ", " +
                       impl_name(impls[i]) + ", " + epilogue_name(e) +
                       (in_place ? " in place" : "") + ", y columns [" +
                       std::to_string(layout.offset) + ", " + std::to_string(layout.offset + n) +
                       ") of rows of " + std::to_string(layout.stride));
          const std::vector<uint16_t> y = run_gpu({&x, &w, &bias}, m, n, k, e, residual_bits,
                                                  layout, in_place, *ctxs[i], stream);
          if (impls[i] != MatmulImpl::kAuto) {
            EXPECT_EQ(ctxs[i]->last_impl(), impls[i]);
          }
          std::vector<float> got;
          ASSERT_TRUE(extract(y, m, n, layout, &got));
          EXPECT_TRUE(all_close(got, expected, atol_for(k), kRtol));
        }
      }
    }
  }

  // Every problem is now cached: running them again (fresh x) queries no cuBLASLt heuristic and
  // measures no implementation choice.
  const int64_t queries = ctxs[0]->num_heuristic_queries();
  const int64_t problems = ctxs[0]->num_cached_problems();
  const int64_t measurements = ctxs[2]->num_impl_measurements();
  const int64_t variants = cublas_bias_takes(shape) ? 6 : 4;
  EXPECT_EQ(problems, variants * static_cast<int64_t>(std::size(kMatmulCudaTestMs)));
  EXPECT_EQ(ctxs[0]->num_impl_measurements(), 0);  // forced: nothing to choose
  EXPECT_EQ(ctxs[1]->num_impl_measurements(), 0);
  EXPECT_EQ(ctxs[3]->num_impl_measurements(), 0);
  for (const int64_t m : kMatmulCudaTestMs) {
    const DeviceBuffer x = DeviceBuffer::from_host(to_bf16(random_vector(m * k, rng)));
    const std::vector<uint16_t> residual_bits(static_cast<size_t>(m * n), 0);
    for (const MatmulEpilogue e : kEpilogues) {
      for (const int i : {0, 2}) {
        if (!runs(impls[i], e, shape, m)) continue;
        for (const bool strided : {false, true}) {
          run_gpu({&x, &w, &bias}, m, n, k, e, residual_bits, y_layout(n, e, strided),
                  e == MatmulEpilogue::kResidual && strided, *ctxs[i], stream);
        }
      }
    }
  }
  EXPECT_EQ(ctxs[0]->num_heuristic_queries(), queries);
  EXPECT_EQ(ctxs[0]->num_cached_problems(), problems);
  EXPECT_EQ(ctxs[2]->num_impl_measurements(), measurements);
  EXPECT_EQ(ctxs[2]->num_unmeasured_captures(), 0);
}

INSTANTIATE_TEST_SUITE_P(Weights, MatmulCudaTest, ::testing::ValuesIn(kMatmulCudaTestWeights),
                         [](const ::testing::TestParamInfo<MatmulWeightShape>& info) {
                           std::string name = info.param.name;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

// A random m-row problem on weight shape s with the residual epilogue, uploaded, and its CPU twin's
// answer: what the split tests run under every split count.
struct ResidualProblem {
  template <typename Rng>
  ResidualProblem(const MatmulWeightShape& s, int64_t m, Rng& rng) {
    const std::vector<uint16_t> w_bits = to_bf16(random_vector(s.n * s.k, rng));
    const std::vector<uint16_t> bias_bits = to_bf16(random_vector(s.n, rng));
    const std::vector<float> x_vals = round_to_bf16(random_vector(m * s.k, rng));
    residual_bits = to_bf16(random_vector(m * s.n, rng, -2.0f, 2.0f));
    w = DeviceBuffer::from_host(w_bits);
    bias = DeviceBuffer::from_host(bias_bits);
    x = DeviceBuffer::from_host(to_bf16(x_vals));
    expected = run_cpu(x_vals, w_bits, bias_bits, from_bf16(residual_bits), m, s.n, s.k,
                       MatmulEpilogue::kResidual);
  }
  std::vector<uint16_t> residual_bits;
  DeviceBuffer w, bias, x;
  std::vector<float> expected;
};

TEST(MatmulCudaWideTest, EverySplitCountGivesTheSameBitsEveryRun) {
  // The wide kernel forced to 1, 2, 3, 5 and 8 K splits (clusters of that many blocks, merged by
  // bulk copies between their shared memories, each block finishing a run of the rows; m = 17 and
  // 64 give every block odd rows) on Llama-3-8B's o projection, Qwen2.5-0.5B's down and odd shapes
  // (n not a multiple of the 128-row tile, K not of the 64-wide chunk, a K shorter than the
  // splits asked): each matches the CPU twin with the residual added in place, and each gives the
  // same bits in three runs (the splits are summed in split order).
  ROOFLINE_SKIP_WITHOUT_GPU();
  const MatmulWeightShape shapes[] = {{"llama3-8b o", 4096, 4096},
                                      {"qwen2.5-0.5b down", 896, 4864},
                                      {"odd 131x200", 131, 200},
                                      {"odd 33x4104", 33, 4104}};
  auto ctx = context(MatmulImpl::kWide);
  auto rng = make_rng(77);
  for (const auto& s : shapes) {
    for (const int64_t m : {1, 17, 64}) {
      const ResidualProblem problem(s, m, rng);
      const DeviceBuffer &x = problem.x, &w = problem.w, &bias = problem.bias;
      const std::vector<uint16_t>& residual_bits = problem.residual_bits;
      const std::vector<float>& expected = problem.expected;
      for (const int splits : {1, 2, 3, 5, 8}) {
        const MatmulWideLaunch l = matmul_wide_cuda_launch(m, s.n, s.k, splits);
        SCOPED_TRACE(std::string(s.name) + ", m = " + std::to_string(m) + ", splits " +
                     std::to_string(splits) + " (planned " + std::to_string(l.splits) + ")");
        ctx->set_wide_splits(splits);
        std::vector<uint16_t> first;
        for (int run = 0; run < 3; ++run) {
          const std::vector<uint16_t> y =
              run_gpu({&x, &w, &bias}, m, s.n, s.k, MatmulEpilogue::kResidual, residual_bits,
                      {0, s.n}, true, *ctx, nullptr);
          EXPECT_EQ(ctx->last_impl(), MatmulImpl::kWide);
          if (run == 0) {
            first = y;
            std::vector<float> got;
            ASSERT_TRUE(extract(y, m, s.n, {0, s.n}, &got));
            EXPECT_TRUE(all_close(got, expected, atol_for(s.k), kRtol));
          } else {
            ASSERT_EQ(y, first) << "run " << run << " differs from run 0";
          }
        }
      }
      ctx->set_wide_splits(0);
    }
  }
}

TEST(MatmulCudaSkinnyTest, EverySplitCountGivesTheSameBitsEveryRun) {
  // Llama-3-8B's o projection, Qwen2.5-0.5B's down and an odd shape with a K tail, forced to 1, 2,
  // 3, 7 and 16 splits: each matches the CPU twin, and each is deterministic (the partials are
  // summed in split order) across three runs — which also shows the arrival counters return to
  // zero after every launch (a stale counter would let a block reduce before the other splits had
  // written). Launches of one tile per block merge in clusters (Qwen's down and the odd shape,
  // whose 9 chunks allow at most 4 splits): the same again with clusters refused gives the same
  // bits.
  ROOFLINE_SKIP_WITHOUT_GPU();
  const MatmulWeightShape shapes[] = {
      {"llama3-8b o", 4096, 4096}, {"qwen2.5-0.5b down", 896, 4864}, {"odd 33x4104", 33, 4104}};
  auto ctx = context(MatmulImpl::kSkinny);
  auto rng = make_rng(99);
  for (const auto& s : shapes) {
    for (const int64_t m : {1, 8, 64}) {
      const ResidualProblem problem(s, m, rng);
      const DeviceBuffer &x = problem.x, &w = problem.w, &bias = problem.bias;
      const std::vector<uint16_t>& residual_bits = problem.residual_bits;
      const std::vector<float>& expected = problem.expected;
      for (const int splits : {1, 2, 3, 7, 16}) {
        SCOPED_TRACE(std::string(s.name) + ", m = " + std::to_string(m) + ", splits " +
                     std::to_string(splits));
        ctx->set_skinny_splits(splits);
        std::vector<uint16_t> first;
        for (int run = 0; run < 3; ++run) {
          const std::vector<uint16_t> y =
              run_gpu({&x, &w, &bias}, m, s.n, s.k, MatmulEpilogue::kResidual, residual_bits,
                      {0, s.n}, false, *ctx, nullptr);
          if (run == 0) {
            first = y;
            std::vector<float> got;
            ASSERT_TRUE(extract(y, m, s.n, {0, s.n}, &got));
            EXPECT_TRUE(all_close(got, expected, atol_for(s.k), kRtol));
          } else {
            ASSERT_EQ(y, first) << "run " << run << " differs from run 0";
          }
        }
        if (s.n == 896 && m == 1 && splits == 2) {
          // 56 clusters of two blocks: they all fit on a Hopper GPU at once.
          int device = 0, sms = 0;
          ROOFLINE_CUDA_CHECK(cudaGetDevice(&device));
          ROOFLINE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
          const MatmulSkinnyLaunch l = matmul_skinny_launch(m, s.n, s.k, sms, splits);
          EXPECT_TRUE(matmul_skinny_cuda_merges_in_clusters(l)) << "the cluster merge never ran";
        }
        ctx->set_skinny_cluster_merge(false);
        const std::vector<uint16_t> through_workspace =
            run_gpu({&x, &w, &bias}, m, s.n, s.k, MatmulEpilogue::kResidual, residual_bits,
                    {0, s.n}, false, *ctx, nullptr);
        ctx->set_skinny_cluster_merge(true);
        ASSERT_EQ(through_workspace, first) << "the workspace merge differs from the cluster merge";
      }
    }
  }
}

// The prologue's tolerance: on top of atol_for(k), the GPU rounds each normalised x (cuBLASLt: the
// rms_norm kernel's bf16 output; the skinny kernel: x · norm_weight in bf16) with relative error
// <= 2^-9, which the sum carries as a random walk over K products of rms 1/3 (w and the normalised
// x both of rms 1/sqrt(3) here): 6 sigma is 2^-9 · 6 · sqrt(K) / 3 = 2^-8 · sqrt(K) — 0.25 at K =
// 4096, against y of rms ~21. Normalising a row by another row's 1 / rms (rows differ 16x in
// scale) or dropping the norm weight is off by far more on most elements.
double norm_atol_for(int64_t k) {
  return atol_for(k) + std::ldexp(1.0, -8) * std::sqrt(static_cast<double>(k));
}

TEST(MatmulCudaNormTest, PrologueMatchesCpuTwinForEveryImplementationAndEpilogue) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  const MatmulWeightShape shapes[] = {{"llama3-8b qkv", 6144, 4096},
                                      {"qwen2.5-0.5b qkv", 1152, 896},
                                      {"qwen2.5-0.5b gate_up", 9728, 896},
                                      {"odd 33x4104", 33, 4104}};
  // The fifth: the skinny kernel with the prologue apart (rms_norm_cuda, then the plain product).
  const MatmulImpl impls[] = {MatmulImpl::kCublas, MatmulImpl::kSkinny, MatmulImpl::kAuto,
                              MatmulImpl::kWide, MatmulImpl::kSkinny};
  std::unique_ptr<MatmulCudaContext> ctxs[] = {context(impls[0]), context(impls[1]),
                                               context(impls[2]), context(impls[3]),
                                               context(impls[4])};
  ctxs[4]->set_skinny_norm(MatmulSkinnyNorm::kApart);
  auto rng = make_rng(31);
  for (const auto& s : shapes) {
    const std::vector<uint16_t> w_bits = to_bf16(random_vector(s.n * s.k, rng));
    const std::vector<uint16_t> bias_bits = to_bf16(random_vector(s.n, rng));
    const std::vector<uint16_t> norm_bits = to_bf16(random_vector(s.k, rng));
    const DeviceBuffer w = DeviceBuffer::from_host(w_bits);
    const DeviceBuffer bias = DeviceBuffer::from_host(bias_bits);
    const DeviceBuffer norm = DeviceBuffer::from_host(norm_bits);
    for (const int64_t m : kMatmulCudaTestMs) {
      std::vector<float> x_vals = random_vector(m * s.k, rng);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < s.k; ++j)
          x_vals[static_cast<size_t>(i * s.k + j)] *= std::ldexp(1.0f, static_cast<int>(i % 5) - 2);
      x_vals = round_to_bf16(x_vals);
      const std::vector<uint16_t> residual_bits = to_bf16(random_vector(m * s.n, rng, -2.0f, 2.0f));
      const DeviceBuffer x = DeviceBuffer::from_host(to_bf16(x_vals));
      DeviceBuffer normed(static_cast<size_t>(m * s.k) * 2);
      for (const MatmulEpilogue e : kEpilogues) {
        const std::vector<float> expected = run_cpu(
            x_vals, w_bits, bias_bits, from_bf16(residual_bits), m, s.n, s.k, e, &norm_bits);
        for (int i = 0; i < 5; ++i) {
          if (!runs(impls[i], e, s, m)) continue;
          const Layout layout = y_layout(s.n, e, false);
          SCOPED_TRACE(std::string(s.name) + ", m = " + std::to_string(m) + ", " +
                       impl_name(impls[i]) + (i == 4 ? " after rms_norm" : "") + ", " +
                       epilogue_name(e) + ", RMSNorm prologue");
          const std::vector<uint16_t> y = run_gpu({&x, &w, &bias, &norm, &normed}, m, s.n, s.k, e,
                                                  residual_bits, layout, false, *ctxs[i], nullptr);
          if (impls[i] != MatmulImpl::kAuto) {
            EXPECT_EQ(ctxs[i]->last_impl(), impls[i]);
            // Apart on cuBLASLt, the wide kernel and where set; fused in the forced skinny kernel.
            EXPECT_EQ(ctxs[i]->last_norm_apart(), i != 1);
          } else if (ctxs[i]->last_impl() != MatmulImpl::kSkinny) {
            EXPECT_TRUE(ctxs[i]->last_norm_apart());  // only the skinny kernel fuses it
          }
          std::vector<float> got;
          ASSERT_TRUE(extract(y, m, s.n, layout, &got));
          EXPECT_TRUE(all_close(got, expected, norm_atol_for(s.k), kRtol));
        }
      }
    }
  }
}

// The SwiGLU epilogue's tolerance: y = silu(g) · u moves by about |u|·δg + |silu(g)|·δu, where
// g and u (rms sqrt(K/9 + 1/3) here) carry the GEMM's atol (the prologue's, with the norm); 2 rms
// bounds the factor on most elements and the rest fall under rtol. rtol: y's own bf16 rounding
// plus, on cuBLASLt, the bf16 rounding of g and u before silu_mul (2^-9 each).
double swiglu_atol_for(int64_t k, bool norm) {
  const double g = 2.0 * std::sqrt(static_cast<double>(k) / 9.0 + 1.0 / 3.0);
  return 2.0 * g * (norm ? norm_atol_for(k) : atol_for(k));
}
constexpr double kSwigluRtol = 3.0 / 256.0;

TEST(MatmulCudaSwigluTest, EpilogueMatchesCpuTwinForEveryImplementation) {
  // y [m, I] = silu(x·W[j]) · (x·W[I + j]) on cuBLASLt (GEMM into the scratch, then silu_mul), the
  // skinny kernel (gate and up rows paired in one tile) and the selection, with and without the
  // RMSNorm prologue, against matmul_cpu with the same parameters; every element of y.
  ROOFLINE_SKIP_WITHOUT_GPU();
  const MatmulWeightShape shapes[] = {{"llama3-8b gate_up", 28672, 4096},
                                      {"qwen2.5-0.5b gate_up", 9728, 896},
                                      {"odd 2x37 by 4104", 74, 4104}};
  const MatmulImpl impls[] = {MatmulImpl::kCublas, MatmulImpl::kSkinny, MatmulImpl::kAuto,
                              MatmulImpl::kWide};
  std::unique_ptr<MatmulCudaContext> ctxs[] = {context(impls[0]), context(impls[1]),
                                               context(impls[2]), context(impls[3])};
  auto rng = make_rng(41);
  for (const auto& s : shapes) {
    const int64_t half = s.n / 2;
    const std::vector<uint16_t> w_bits = to_bf16(random_vector(s.n * s.k, rng));
    const std::vector<uint16_t> norm_bits = to_bf16(random_vector(s.k, rng));
    const DeviceBuffer w = DeviceBuffer::from_host(w_bits);
    const DeviceBuffer norm = DeviceBuffer::from_host(norm_bits);
    for (const int64_t m : kMatmulCudaTestMs) {
      if (s.n * s.k > (int64_t{1} << 26) && m > 64) continue;  // the CPU twin's time
      const std::vector<float> x_vals = round_to_bf16(random_vector(m * s.k, rng));
      const DeviceBuffer x = DeviceBuffer::from_host(to_bf16(x_vals));
      DeviceBuffer normed(static_cast<size_t>(m * s.k) * 2),
          gate_up(static_cast<size_t>(m * s.n) * 2);
      for (const bool with_norm : {false, true}) {
        std::vector<float> expected(static_cast<size_t>(m * half)),
            cpu_gate_up(static_cast<size_t>(m * s.n));
        std::vector<float> cpu_normed(static_cast<size_t>(m * s.k));
        // The same call on either side: x, W, the norm weight and the scratch pointers differ.
        const auto params = [&](const void* x_ptr, const void* w_ptr, const void* norm_ptr,
                                void* y_ptr, void* gate_up_ptr, void* normed_ptr, DType dtype) {
          MatmulParams q;
          q.x = x_ptr;
          q.w = w_ptr;
          q.w_dtype = DType::kBF16;
          q.y = y_ptr;
          q.dtype = dtype;
          q.m = m;
          q.n = s.n;
          q.k = s.k;
          q.y_row_stride = half;
          q.swiglu = true;
          q.gate_up = gate_up_ptr;
          if (with_norm) {
            q.norm_weight = norm_ptr;
            q.norm_weight_dtype = DType::kBF16;
            q.norm_eps = kNormEps;
            q.normed = normed_ptr;
          }
          return q;
        };
        matmul_cpu(params(x_vals.data(), w_bits.data(), norm_bits.data(), expected.data(),
                          cpu_gate_up.data(), cpu_normed.data(), DType::kF32));
        for (int i = 0; i < 4; ++i) {
          if (decode_only(impls[i]) && !skinny_takes(m, s.k)) continue;
          SCOPED_TRACE(std::string(s.name) + ", m = " + std::to_string(m) + ", " +
                       impl_name(impls[i]) + (with_norm ? ", RMSNorm prologue" : ""));
          DeviceBuffer y(static_cast<size_t>(m * half) * 2);
          y.poison();
          matmul_cuda(params(x.get(), w.get(), norm.get(), y.get(), gate_up.get(), normed.get(),
                             DType::kBF16),
                      *ctxs[i], nullptr);
          ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(nullptr));
          if (impls[i] != MatmulImpl::kAuto) {
            EXPECT_EQ(ctxs[i]->last_impl(), impls[i]);
          }
          EXPECT_TRUE(all_close(from_bf16(y.to_host<uint16_t>()), expected,
                                swiglu_atol_for(s.k, with_norm), kSwigluRtol));
        }
      }
    }
  }
}

// Two skinny contexts whose launches must give the same bits (`what` names them in failures), on
// every weight of kMatmulCudaTestWeights the skinny kernel takes at each m of `ms`: with each
// epilogue, with the RMSNorm prologue (and without it unless `norm_only`), and the SwiGLU epilogue
// with the prologue on the gate_up weights, each against the CPU twin and `one` bit for bit against
// `two`.
void expect_same_bits(MatmulCudaContext& one_ctx, MatmulCudaContext& two_ctx,
                      std::initializer_list<int64_t> ms, bool norm_only, uint64_t seed,
                      const char* what) {
  MatmulCudaContext* one = &one_ctx;
  MatmulCudaContext* two = &two_ctx;
  auto rng = make_rng(seed);
  for (const int64_t m : ms) {
    for (const auto& s : kMatmulCudaTestWeights) {
      if (!skinny_takes(m, s.k)) continue;
      SCOPED_TRACE(std::string(s.name) + ", m = " + std::to_string(m));
      const std::vector<uint16_t> w_bits = to_bf16(random_vector(s.n * s.k, rng));
      const std::vector<uint16_t> bias_bits = to_bf16(random_vector(s.n, rng));
      const std::vector<uint16_t> norm_bits = to_bf16(random_vector(s.k, rng));
      const std::vector<uint16_t> residual_bits = to_bf16(random_vector(m * s.n, rng, -2.0f, 2.0f));
      const std::vector<float> x_vals = round_to_bf16(random_vector(m * s.k, rng));
      const DeviceBuffer w = DeviceBuffer::from_host(w_bits);
      const DeviceBuffer bias = DeviceBuffer::from_host(bias_bits);
      const DeviceBuffer norm = DeviceBuffer::from_host(norm_bits);
      const DeviceBuffer x = DeviceBuffer::from_host(to_bf16(x_vals));
      DeviceBuffer normed(static_cast<size_t>(m * s.k) * 2);
      for (const bool with_norm : {false, true}) {
        if (!with_norm && norm_only) continue;
        const Inputs in{&x, &w, &bias, with_norm ? &norm : nullptr, with_norm ? &normed : nullptr};
        for (const MatmulEpilogue e : kEpilogues) {
          SCOPED_TRACE(std::string(epilogue_name(e)) + (with_norm ? ", RMSNorm prologue" : ""));
          const std::vector<float> expected =
              run_cpu(x_vals, w_bits, bias_bits, from_bf16(residual_bits), m, s.n, s.k, e,
                      with_norm ? &norm_bits : nullptr);
          const std::vector<uint16_t> y_one =
              run_gpu(in, m, s.n, s.k, e, residual_bits, {0, s.n}, false, *one, nullptr);
          const std::vector<uint16_t> y_two =
              run_gpu(in, m, s.n, s.k, e, residual_bits, {0, s.n}, false, *two, nullptr);
          EXPECT_TRUE(all_close(from_bf16(y_one), expected,
                                with_norm ? norm_atol_for(s.k) : atol_for(s.k), kRtol));
          ASSERT_EQ(y_one, y_two) << what << " differ";
        }
      }
      if (std::string(s.name).find("gate_up") == std::string::npos) continue;
      // SwiGLU with the prologue, as a decoder layer's gate_up runs.
      const int64_t half = s.n / 2;
      std::vector<float> expected(static_cast<size_t>(m * half)),
          cpu_gate_up(static_cast<size_t>(m * s.n)), cpu_normed(static_cast<size_t>(m * s.k));
      std::vector<uint16_t> ys[2];
      DeviceBuffer gate_up(static_cast<size_t>(m * s.n) * 2);
      for (int side = 0; side < 3; ++side) {  // the CPU twin, then the two contexts
        const bool cpu = side == 0;
        DeviceBuffer y(static_cast<size_t>(m * half) * 2);
        y.poison();
        MatmulParams q;
        q.x = cpu ? static_cast<const void*>(x_vals.data()) : x.get();
        q.w = cpu ? static_cast<const void*>(w_bits.data()) : w.get();
        q.w_dtype = DType::kBF16;
        q.y = cpu ? static_cast<void*>(expected.data()) : y.get();
        q.dtype = cpu ? DType::kF32 : DType::kBF16;
        q.m = m;
        q.n = s.n;
        q.k = s.k;
        q.y_row_stride = half;
        q.swiglu = true;
        q.gate_up = cpu ? static_cast<void*>(cpu_gate_up.data()) : gate_up.get();
        q.norm_weight = cpu ? static_cast<const void*>(norm_bits.data()) : norm.get();
        q.norm_weight_dtype = DType::kBF16;
        q.norm_eps = kNormEps;
        q.normed = cpu ? static_cast<void*>(cpu_normed.data()) : normed.get();
        if (cpu) {
          matmul_cpu(q);
          continue;
        }
        matmul_cuda(q, side == 1 ? *one : *two, nullptr);
        ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(nullptr));
        ys[side - 1] = y.to_host<uint16_t>();
      }
      EXPECT_TRUE(all_close(from_bf16(ys[0]), expected, swiglu_atol_for(s.k, true), kSwigluRtol))
          << "SwiGLU";
      ASSERT_EQ(ys[0], ys[1]) << "SwiGLU: " << what << " differ";
    }
  }
}

TEST(MatmulCudaSkinnyTest, FewTokenVariantMatchesCpuTwinAndTheTwoBlockVariantBitForBit) {
  // The few-token variant (three blocks per SM, 4 rows of x a stage) forced on every weight of
  // kMatmulCudaTestWeights at m = 1 and 3 (a stage row of x left stale) — the plan picks it itself
  // only where the tiles fill more than two blocks per SM and no more than three (Llama-3-8B's and
  // Qwen2.5-7B's q|k|v), or more with tiles of at most two chunks (Qwen2.5-0.5B's gate_up), which
  // the other tests cover through the plan — with each epilogue, with
  // and without the RMSNorm prologue, and the SwiGLU epilogue on the gate_up weights: against the
  // CPU twin, and bit for bit against the two-block variant (the same products summed in the same
  // order). Launches that split K take the two-block variant either way.
  ROOFLINE_SKIP_WITHOUT_GPU();
  std::unique_ptr<MatmulCudaContext> one = context(MatmulImpl::kSkinny);
  std::unique_ptr<MatmulCudaContext> two = context(MatmulImpl::kSkinny);
  one->set_skinny_few_tokens(MatmulSkinnyFewTokens::kOn);
  two->set_skinny_few_tokens(MatmulSkinnyFewTokens::kOff);
  expect_same_bits(*one, *two, {1, 3}, false, 47, "the few-token and two-block variants");
}

TEST(MatmulCudaNormTest, BlockCopiesMatchCpuTwinAndWarpSlicesBitForBit) {
  // The RMSNorm prologue's two copy layouts (MatmulSkinnyLaunch::norm_warp_slices; the selection
  // times both) multiply the same products in the same order: at every m the skinny kernel takes
  // (m = 1, 3, 8, 17, 33: the few-token and two-block variants, 1-8 token tiles), with each
  // epilogue and with SwiGLU, against the CPU twin and bit for bit against each other.
  ROOFLINE_SKIP_WITHOUT_GPU();
  std::unique_ptr<MatmulCudaContext> block = context(MatmulImpl::kSkinny);
  std::unique_ptr<MatmulCudaContext> slices = context(MatmulImpl::kSkinny);
  block->set_skinny_norm(MatmulSkinnyNorm::kFusedBlockCopies);
  slices->set_skinny_norm(MatmulSkinnyNorm::kFused);
  expect_same_bits(*block, *slices, {1, 3, 8, 17, 33}, true, 59, "block copies and warp slices");
  EXPECT_TRUE(block->last_norm_block_copies());
  EXPECT_FALSE(slices->last_norm_block_copies());
}

// The RoPE epilogue's problems: the q|k|v projections of Llama-3-8B and Qwen2.5-0.5B, and head
// dims 256 and 32 (a tile pairs 8 dims of each half of a head: 1 and 16 tiles per head).
struct RopeShape {
  const char* name;
  int64_t heads, kv_heads, head_dim, k;
};
constexpr RopeShape kRopeShapes[] = {{"llama3-8b qkv", 32, 8, 128, 4096},
                                     {"qwen2.5-0.5b qkv", 14, 2, 64, 896},
                                     {"head_dim 256", 8, 2, 256, 1032},
                                     {"head_dim 32", 5, 1, 32, 264}};
constexpr int64_t kRopeBlockSize = 16;

// The step inputs of m tokens: positions (0, then random below 40k) and the slot map into caches
// of 2m + 2 slots rounded up to whole 16-position blocks: token t writes slot 2t + 1, except
// token 1 (a padding row, slot -1) and token 2 (a slot past the cache: skipped).
struct RopeSteps {
  int64_t slots;
  std::vector<int32_t> positions;
  std::vector<int64_t> slot_mapping;
};
RopeSteps rope_steps(int64_t m, std::mt19937_64& rng) {
  RopeSteps r;
  r.slots = (2 * m + 2 + kRopeBlockSize - 1) / kRopeBlockSize * kRopeBlockSize;
  std::uniform_int_distribution<int32_t> pos(0, 40000);
  for (int64_t t = 0; t < m; ++t) {
    r.positions.push_back(t == 0 ? 0 : pos(rng));
    r.slot_mapping.push_back(t == 1 ? -1 : t == 2 ? r.slots + 7 : 2 * t + 1);
  }
  return r;
}

// qkv_rope's shape for `s` with caches of `slots` slots, bf16 (pointers unset).
QkvRopeParams rope_shape(const RopeShape& s, int64_t slots) {
  QkvRopeParams r;
  r.num_heads = s.heads;
  r.num_kv_heads = s.kv_heads;
  r.head_dim = s.head_dim;
  r.block_size = kRopeBlockSize;
  r.num_blocks = slots / kRopeBlockSize;
  r.dtype = DType::kBF16;
  r.kv_dtype = DType::kBF16;
  return r;
}

// One call's RoPE destinations (poisoned) and step inputs on the device.
struct RopeIo {
  int64_t slots;
  DeviceBuffer d_positions, d_slots, d_inv_freq, q_out, k_cache, v_cache;

  RopeIo(const RopeShape& s, int64_t m, const RopeSteps& steps, const std::vector<float>& inv_freq)
      : slots(steps.slots) {
    d_positions = DeviceBuffer::from_host(steps.positions);
    d_slots = DeviceBuffer::from_host(steps.slot_mapping);
    d_inv_freq = DeviceBuffer::from_host(inv_freq);
    q_out = DeviceBuffer(static_cast<size_t>(m * s.heads * s.head_dim) * 2);
    k_cache = DeviceBuffer(static_cast<size_t>(slots * s.kv_heads * s.head_dim) * 2);
    v_cache = DeviceBuffer(static_cast<size_t>(slots * s.kv_heads * s.head_dim) * 2);
    q_out.poison();
    k_cache.poison();
    v_cache.poison();
  }
  QkvRopeParams params(const RopeShape& s) const {
    QkvRopeParams r = rope_shape(s, slots);
    r.q_out = q_out.get();
    r.positions = d_positions.get<int32_t>();
    r.slot_mapping = d_slots.get<int64_t>();
    r.k_cache = k_cache.get();
    r.v_cache = v_cache.get();
    r.inv_freq = d_inv_freq.get<float>();
    return r;
  }
};

// The poisoned slots of a downloaded cache must stay poisoned; the written ones go to `out` in
// slot order (bf16 bits), and `expected` gets the CPU cache's same slots.
::testing::AssertionResult written_slots(const std::vector<uint16_t>& got,
                                         const std::vector<float>& cpu, const RopeSteps& steps,
                                         int64_t slot_elems, std::vector<uint16_t>* out,
                                         std::vector<float>* expected) {
  std::vector<bool> written(static_cast<size_t>(steps.slots), false);
  for (const int64_t slot : steps.slot_mapping)
    if (slot >= 0 && slot < steps.slots) written[static_cast<size_t>(slot)] = true;
  for (int64_t slot = 0; slot < steps.slots; ++slot) {
    for (int64_t e = 0; e < slot_elems; ++e) {
      const size_t at = static_cast<size_t>(slot * slot_elems + e);
      if (written[static_cast<size_t>(slot)]) {
        out->push_back(got[at]);
        expected->push_back(cpu[at]);
      } else if (got[at] != kPoisonBits) {
        return ::testing::AssertionFailure() << "slot " << slot << " was written by no token";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(MatmulCudaRopeTest, EpilogueMatchesCpuTwinAndTheUnfusedKernelsForEveryImplementation) {
  // The q|k|v projection with the RoPE epilogue (rotated q to its output, rotated k and v into the
  // paged cache at each token's slot) on cuBLASLt (GEMM, then qkv_rope_cuda), the skinny kernel
  // (rows i and i + D/2 of a head paired in one tile) and the selection, with and without bias and
  // the RMSNorm prologue, against matmul_cpu with the same parameters on every element of q and
  // of the cache (slots no token writes must stay untouched). The skinny kernel's fused epilogue
  // must give the same bits as its own product followed by qkv_rope_cuda.
  ROOFLINE_SKIP_WITHOUT_GPU();
  const MatmulImpl impls[] = {MatmulImpl::kCublas, MatmulImpl::kSkinny, MatmulImpl::kAuto,
                              MatmulImpl::kWide};
  std::unique_ptr<MatmulCudaContext> ctxs[] = {context(impls[0]), context(impls[1]),
                                               context(impls[2]), context(impls[3])};
  auto rng = make_rng(53);
  for (const auto& s : kRopeShapes) {
    const int64_t n = (s.heads + 2 * s.kv_heads) * s.head_dim;
    const int64_t kv_elems = s.kv_heads * s.head_dim;
    std::vector<float> inv_freq(static_cast<size_t>(s.head_dim / 2));
    for (size_t i = 0; i < inv_freq.size(); ++i)
      inv_freq[i] = static_cast<float>(
          1.0 / std::pow(10000.0, 2.0 * static_cast<double>(i) / static_cast<double>(s.head_dim)));
    const std::vector<uint16_t> w_bits = to_bf16(random_vector(n * s.k, rng));
    const std::vector<uint16_t> bias_bits = to_bf16(random_vector(n, rng));
    const std::vector<uint16_t> norm_bits = to_bf16(random_vector(s.k, rng));
    const DeviceBuffer w = DeviceBuffer::from_host(w_bits);
    const DeviceBuffer bias = DeviceBuffer::from_host(bias_bits);
    const DeviceBuffer norm = DeviceBuffer::from_host(norm_bits);
    for (const int64_t m : kMatmulCudaTestMs) {
      if (n * s.k > (int64_t{1} << 24) && m > 64) continue;  // the CPU twin's time
      const std::vector<float> x_vals = round_to_bf16(random_vector(m * s.k, rng));
      const DeviceBuffer x = DeviceBuffer::from_host(to_bf16(x_vals));
      DeviceBuffer normed(static_cast<size_t>(m * s.k) * 2),
          product(static_cast<size_t>(m * n) * 2);
      for (const bool with_bias : {false, true}) {
        for (const bool with_norm : {false, true}) {
          const auto params = [&](const void* x_ptr, const void* w_ptr, const void* bias_ptr,
                                  const void* norm_ptr, void* y_ptr, void* normed_ptr,
                                  DType dtype) {
            MatmulParams q;
            q.x = x_ptr;
            q.w = w_ptr;
            q.w_dtype = DType::kBF16;
            q.bias = bias_ptr;
            q.bias_dtype = DType::kBF16;
            q.y = y_ptr;
            q.dtype = dtype;
            q.m = m;
            q.n = n;
            q.k = s.k;
            q.y_row_stride = n;
            if (with_norm) {
              q.norm_weight = norm_ptr;
              q.norm_weight_dtype = DType::kBF16;
              q.norm_eps = kNormEps;
              q.normed = normed_ptr;
            }
            return q;
          };
          const auto call = [&](const MatmulParams& q, MatmulCudaContext& ctx) {
            if (with_bias) {
              matmul_bias_cuda(q, ctx, nullptr);
            } else {
              matmul_cuda(q, ctx, nullptr);
            }
            ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(nullptr));
          };

          // The CPU twin: f32 product, q and caches.
          const RopeSteps steps = rope_steps(m, rng);
          std::vector<float> cpu_product(static_cast<size_t>(m * n)),
              cpu_normed(static_cast<size_t>(m * s.k)),
              cpu_q(static_cast<size_t>(m * s.heads * s.head_dim)),
              cpu_k(static_cast<size_t>(steps.slots * kv_elems)),
              cpu_v(static_cast<size_t>(steps.slots * kv_elems));
          testing::poison(cpu_k);
          testing::poison(cpu_v);
          MatmulParams cpu =
              params(x_vals.data(), w_bits.data(), bias_bits.data(), norm_bits.data(),
                     cpu_product.data(), cpu_normed.data(), DType::kF32);
          cpu.qkv_rope = true;
          cpu.rope = rope_shape(s, steps.slots);
          cpu.rope.q_out = cpu_q.data();
          cpu.rope.k_cache = cpu_k.data();
          cpu.rope.v_cache = cpu_v.data();
          // qkv_rope_cpu aborts on a slot past the cache (a scheduler bug on the host); the GPU
          // skips it, which the twin's padding slot -1 expresses.
          std::vector<int64_t> cpu_slots = steps.slot_mapping;
          for (int64_t& slot : cpu_slots) slot = slot < steps.slots ? slot : -1;
          cpu.rope.positions = steps.positions.data();
          cpu.rope.slot_mapping = cpu_slots.data();
          cpu.rope.inv_freq = inv_freq.data();
          cpu.rope.kv_dtype = DType::kF32;
          if (with_bias) {
            matmul_bias_cpu(cpu);
          } else {
            matmul_cpu(cpu);
          }
          // Tolerance: the GEMM's, twice (a rotated value mixes two sums with |cos|, |sin| <= 1),
          // plus the bf16 rounding of the product before the rotation on the GPU (2^-9 of each
          // of two sums, bounded by the largest product) and of the result (rtol).
          double max_product = 0.0;
          for (const float v : cpu_product)
            max_product = std::max(max_product, std::fabs(double{v}));
          const double atol =
              2.0 * (with_norm ? norm_atol_for(s.k) : atol_for(s.k)) + std::ldexp(max_product, -8);

          // The skinny kernel's product followed by qkv_rope_cuda: what its fused epilogue must
          // equal bit for bit.
          RopeIo unfused(s, m, steps, inv_freq);
          if (skinny_takes(m, s.k)) {
            call(params(x.get(), w.get(), bias.get(), norm.get(), product.get(), normed.get(),
                        DType::kBF16),
                 *ctxs[1]);
            QkvRopeParams r = unfused.params(s);
            r.qkv = product.get();
            r.num_tokens = m;
            qkv_rope_cuda(r, nullptr);
            ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(nullptr));
          }

          for (int i = 0; i < 4; ++i) {
            if (decode_only(impls[i]) && !skinny_takes(m, s.k)) continue;
            SCOPED_TRACE(std::string(s.name) + ", m = " + std::to_string(m) + ", " +
                         impl_name(impls[i]) + (with_bias ? ", bias" : "") +
                         (with_norm ? ", RMSNorm prologue" : ""));
            RopeIo gpu(s, m, steps, inv_freq);
            MatmulParams q = params(x.get(), w.get(), bias.get(), norm.get(), product.get(),
                                    normed.get(), DType::kBF16);
            q.qkv_rope = true;
            q.rope = gpu.params(s);
            call(q, *ctxs[i]);
            if (impls[i] != MatmulImpl::kAuto) {
              EXPECT_EQ(ctxs[i]->last_impl(), impls[i]);
            }
            const std::vector<uint16_t> q_bits = gpu.q_out.to_host<uint16_t>();
            EXPECT_TRUE(all_close(from_bf16(q_bits), cpu_q, atol, kRtol)) << "q";
            std::vector<uint16_t> k_bits, v_bits;
            std::vector<float> k_expected, v_expected;
            const std::vector<uint16_t> k_all = gpu.k_cache.to_host<uint16_t>();
            const std::vector<uint16_t> v_all = gpu.v_cache.to_host<uint16_t>();
            ASSERT_TRUE(written_slots(k_all, cpu_k, steps, kv_elems, &k_bits, &k_expected)) << "k";
            ASSERT_TRUE(written_slots(v_all, cpu_v, steps, kv_elems, &v_bits, &v_expected)) << "v";
            EXPECT_TRUE(all_close(from_bf16(k_bits), k_expected, atol, kRtol)) << "k";
            EXPECT_TRUE(all_close(from_bf16(v_bits), v_expected, atol, kRtol)) << "v";
            if (impls[i] == MatmulImpl::kSkinny) {
              EXPECT_EQ(q_bits, unfused.q_out.to_host<uint16_t>());
              EXPECT_EQ(k_all, unfused.k_cache.to_host<uint16_t>());
              EXPECT_EQ(v_all, unfused.v_cache.to_host<uint16_t>());
            }
          }
        }
      }
    }
  }
}

TEST(MatmulCudaDeathTest, BadInputAbortsWithItsReason) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  constexpr int64_t kM = 8, kN = 129, kK = 72;
  const DeviceBuffer x(kM * kK * 2 + 16), w(kN * kK * 2), bias(kN * 2);
  DeviceBuffer y(kM * kN * 2);
  MatmulParams p = bf16_params(x, w, y, kM, kN, kK, kN);
  p.bias = bias.get();
  // cuBLASLt would round the bias epilogue twice on n = 129.
  EXPECT_DEATH(
      {
        auto ctx = context(MatmulImpl::kCublas);
        matmul_bias_cuda(p, *ctx, nullptr);
      },
      "matmul_bias_cuda needs n, k");
  // The skinny and the wide kernel's domains, each forced: k a multiple of 8, x 16-byte aligned,
  // m <= 64 (the message names the kernel that refused).
  for (const MatmulImpl impl : {MatmulImpl::kSkinny, MatmulImpl::kWide}) {
    const std::string kernel = std::string("the ") + impl_name(impl) + " matmul ";
    const auto expect_abort = [&](const MatmulParams& bad, const std::string& reason) {
      EXPECT_DEATH(
          {
            auto ctx = context(impl);
            matmul_cuda(bad, *ctx, nullptr);
          },
          reason);
    };
    MatmulParams q = p;
    q.k = 67;
    expect_abort(q, kernel + "needs k to be a multiple of 8");
    q = p;
    q.x = x.get<uint8_t>() + 2;
    expect_abort(q, kernel + "needs x and W 16-byte aligned");
    q = p;
    q.m = 65;
    expect_abort(q, kernel + "takes 1 to 64 rows");
  }
  MatmulParams q = p;
  q.dtype = DType::kF32;
  EXPECT_DEATH(
      {
        auto ctx = context(MatmulImpl::kAuto);
        matmul_cuda(q, *ctx, nullptr);
      },
      "takes bf16");
  q = p;
  q.residual = nullptr;
  EXPECT_DEATH(
      {
        auto ctx = context(MatmulImpl::kAuto);
        matmul_residual_cuda(q, *ctx, nullptr);
      },
      "needs a residual");
  // The RMSNorm prologue: its scratch is required; the skinny kernel takes a bf16, 16-byte aligned
  // norm weight.
  const DeviceBuffer norm(kK * 2 + 16), normed(kM * kK * 2);
  q = p;
  q.norm_weight = norm.get();
  q.norm_weight_dtype = DType::kBF16;
  EXPECT_DEATH(
      {
        auto ctx = context(MatmulImpl::kAuto);
        matmul_cuda(q, *ctx, nullptr);
      },
      "needs params.normed");
  q.normed = normed.get();
  {
    MatmulParams sw = p;  // the SwiGLU epilogue: its scratch is required, no other epilogue
    sw.n = 128;
    sw.y_row_stride = 64;
    sw.swiglu = true;
    EXPECT_DEATH(
        {
          auto ctx = context(MatmulImpl::kAuto);
          matmul_cuda(sw, *ctx, nullptr);
        },
        "needs params.gate_up");
    sw.gate_up = normed.get();
    EXPECT_DEATH(
        {
          auto ctx = context(MatmulImpl::kAuto);
          matmul_bias_cuda(sw, *ctx, nullptr);
        },
        "no bias or residual");
  }
  {
    // The logit tile summaries: they need their epoch, tiles of 1 to 4096 tokens and the plain,
    // bias or residual epilogue.
    const DeviceBuffer words(kM * kN * 8), counts(kM * 8), epoch(4);
    MatmulParams summarized = p;
    summarized.summaries = {words.get<uint64_t>(), counts.get<uint64_t>(), nullptr, 16};
    const auto expect_abort = [&](const MatmulParams& bad, const char* reason) {
      EXPECT_DEATH(
          {
            auto ctx = context(MatmulImpl::kAuto);
            matmul_cuda(bad, *ctx, nullptr);
          },
          reason);
    };
    expect_abort(summarized, "need their words, row counts and epoch");
    summarized.summaries.epoch = epoch.get<uint32_t>();
    summarized.summaries.tile_tokens = 0;
    expect_abort(summarized, "tile_tokens must be in");
    summarized.summaries.tile_tokens = 16;
    summarized.n = 128;
    summarized.y_row_stride = 64;
    summarized.swiglu = true;
    summarized.gate_up = normed.get();
    expect_abort(summarized, "plain, bias or residual epilogue only");
  }
  q.norm_weight = norm.get<uint8_t>() + 2;
  EXPECT_DEATH(
      {
        auto ctx = context(MatmulImpl::kSkinny);
        matmul_cuda(q, *ctx, nullptr);
      },
      "norm weight 16-byte aligned");
  q.norm_weight = norm.get();
  q.norm_weight_dtype = DType::kF32;
  EXPECT_DEATH(
      {
        auto ctx = context(MatmulImpl::kSkinny);
        matmul_cuda(q, *ctx, nullptr);
      },
      "bf16 norm weight");
}

// One warmed-up call per implementation (and epilogue) captured into a graph; the graph is
// replayed twice into a poisoned y. Global capture mode rejects unsafe calls (cudaMalloc,
// synchronisation) made while capturing.
TEST(MatmulCudaGraphTest, WarmedUpCallsCaptureAndReplay) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr int64_t kM = 17, kN = 4096, kK = 4096;  // the skinny kernel splits K here
  auto rng = make_rng(7);
  const std::vector<uint16_t> w_bits = to_bf16(random_vector(kN * kK, rng));
  const std::vector<uint16_t> bias_bits = to_bf16(random_vector(kN, rng));
  const std::vector<float> x_vals = round_to_bf16(random_vector(kM * kK, rng));
  const std::vector<uint16_t> residual_bits = to_bf16(random_vector(kM * kN, rng, -2.0f, 2.0f));
  const DeviceBuffer w = DeviceBuffer::from_host(w_bits);
  const DeviceBuffer bias = DeviceBuffer::from_host(bias_bits);
  const DeviceBuffer x = DeviceBuffer::from_host(to_bf16(x_vals));
  const DeviceBuffer residual = DeviceBuffer::from_host(residual_bits);
  DeviceBuffer y(static_cast<size_t>(kM * kN) * 2);
  // Capture needs a stream of its own; it does not wait for the legacy stream's uploads and
  // poison, so each is followed by a device synchronisation.
  ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize());
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  MatmulParams p = bf16_params(x, w, y, kM, kN, kK, kN);
  p.bias = bias.get();
  p.residual = residual.get();
  const std::vector<uint16_t> norm_bits = to_bf16(random_vector(kK, rng));
  const DeviceBuffer norm = DeviceBuffer::from_host(norm_bits);
  DeviceBuffer normed(static_cast<size_t>(kM * kK) * 2);
  for (const bool with_norm : {false, true})
    for (const MatmulImpl impl : {MatmulImpl::kCublas, MatmulImpl::kSkinny, MatmulImpl::kAuto}) {
      for (const MatmulEpilogue e : kEpilogues) {
        SCOPED_TRACE(std::string(impl_name(impl)) + ", " + epilogue_name(e) +
                     (with_norm ? ", RMSNorm prologue" : ""));
        p.norm_weight = with_norm ? norm.get() : nullptr;
        p.norm_weight_dtype = DType::kBF16;
        p.norm_eps = kNormEps;
        p.normed = with_norm ? normed.get() : nullptr;
        auto ctx = context(impl);
        const auto call = [&] {
          if (e == MatmulEpilogue::kNone) matmul_cuda(p, *ctx, stream);
          if (e == MatmulEpilogue::kBias) matmul_bias_cuda(p, *ctx, stream);
          if (e == MatmulEpilogue::kResidual) matmul_residual_cuda(p, *ctx, stream);
        };
        call();  // warm-up: chooses and caches the algorithm (and, under kAuto, the implementation)
        ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
        cudaGraph_t graph;
        ROOFLINE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        call();
        ROOFLINE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
        EXPECT_EQ(ctx->num_unmeasured_captures(), 0);
        cudaGraphExec_t exec;
        ROOFLINE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        const std::vector<float> expected =
            run_cpu(x_vals, w_bits, bias_bits, from_bf16(residual_bits), kM, kN, kK, e,
                    with_norm ? &norm_bits : nullptr);
        for (int replay = 0; replay < 2; ++replay) {
          y.poison();
          ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize());
          ROOFLINE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
          ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
          std::vector<float> got;
          ASSERT_TRUE(extract(y.to_host<uint16_t>(), kM, kN, {0, kN}, &got));
          EXPECT_TRUE(all_close(got, expected, with_norm ? norm_atol_for(kK) : atol_for(kK), kRtol))
              << "replay " << replay;
        }
        ROOFLINE_CUDA_CHECK(cudaGraphExecDestroy(exec));
        ROOFLINE_CUDA_CHECK(cudaGraphDestroy(graph));
      }
    }
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(MatmulCudaGraphTest, UnmeasuredProblemInsideACaptureRunsCublas) {
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr int64_t kM = 4, kN = 1152, kK = 896;
  auto rng = make_rng(8);
  const std::vector<uint16_t> w_bits = to_bf16(random_vector(kN * kK, rng));
  const std::vector<float> x_vals = round_to_bf16(random_vector(kM * kK, rng));
  const DeviceBuffer w = DeviceBuffer::from_host(w_bits);
  const DeviceBuffer x = DeviceBuffer::from_host(to_bf16(x_vals));
  DeviceBuffer y(static_cast<size_t>(kM * kN) * 2);
  // Capture needs a stream of its own; it does not wait for the legacy stream's uploads and
  // poison, so each is followed by a device synchronisation.
  ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize());
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const MatmulParams p = bf16_params(x, w, y, kM, kN, kK, kN);
  matmul_cuda_forget_shared_choices();  // earlier tests of this process may have measured it
  auto ctx = context(MatmulImpl::kAuto);
  // cuBLASLt's own algorithm choice is made outside the capture (a heuristic query is host-only,
  // but warm it the way the backend does); the implementation choice is deliberately left unmade.
  ctx->set_impl(MatmulImpl::kCublas);
  matmul_cuda(p, *ctx, stream);
  ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
  ctx->set_impl(MatmulImpl::kAuto);
  cudaGraph_t graph;
  ROOFLINE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  matmul_cuda(p, *ctx, stream);
  ROOFLINE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  EXPECT_EQ(ctx->num_unmeasured_captures(), 1);
  EXPECT_EQ(ctx->num_impl_measurements(), 0);
  EXPECT_EQ(ctx->last_impl(), MatmulImpl::kCublas);
  cudaGraphExec_t exec;
  ROOFLINE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  y.poison();
  ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize());
  ROOFLINE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> got;
  ASSERT_TRUE(extract(y.to_host<uint16_t>(), kM, kN, {0, kN}, &got));
  const std::vector<uint16_t> no_bias(kN, 0);
  EXPECT_TRUE(all_close(got,
                        run_cpu(x_vals, w_bits, no_bias, {}, kM, kN, kK, MatmulEpilogue::kNone),
                        atol_for(kK), kRtol));
  // Outside the capture the same problem is measured once, then cached.
  matmul_cuda(p, *ctx, stream);
  matmul_cuda(p, *ctx, stream);
  ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
  EXPECT_EQ(ctx->num_impl_measurements(), 1);
  // It timed the skinny kernel and several of cuBLASLt's algorithms (cuBLASLt's heuristic offers
  // more than one for this shape), not one of each.
  EXPECT_GT(ctx->num_timed_candidates(), 2);
  const std::vector<uint16_t> first = y.to_host<uint16_t>();
  // A second context of the process takes the first one's choices — implementation and cuBLASLt
  // algorithm — instead of measuring (its own timings could disagree, and two runners must compute
  // the same function): the same bits.
  const MatmulImpl chosen = ctx->last_impl();
  auto other = context(MatmulImpl::kAuto);
  y.poison();
  ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize());
  matmul_cuda(p, *other, stream);
  ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
  EXPECT_EQ(other->num_impl_measurements(), 0);
  EXPECT_EQ(other->num_timed_candidates(), 0);
  EXPECT_EQ(other->last_impl(), chosen);
  EXPECT_EQ(y.to_host<uint16_t>(), first);
  ROOFLINE_CUDA_CHECK(cudaGraphExecDestroy(exec));
  ROOFLINE_CUDA_CHECK(cudaGraphDestroy(graph));
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(MatmulCudaNormTest, SelectionTimesThePrologueFusedAndApartAndRunsItsChoice) {
  // With the RMSNorm prologue, the measured selection times the skinny kernel three times, fused
  // in warp slices, fused in block copies and after rms_norm_cuda, so a fold of a norm into its
  // GEMM can lose nothing to the two kernels it replaced: two candidates more than with the
  // prologue only fused one way (either way), and the same cuBLASLt ones.
  // Whatever it chose matches the CPU twin, and a second context runs the same choice bit for bit.
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr int64_t kM = 1, kN = 4096, kK = 896;
  auto rng = make_rng(9);
  const std::vector<uint16_t> w_bits = to_bf16(random_vector(kN * kK, rng));
  const std::vector<uint16_t> norm_bits = to_bf16(random_vector(kK, rng));
  const std::vector<float> x_vals = round_to_bf16(random_vector(kM * kK, rng));
  const DeviceBuffer w = DeviceBuffer::from_host(w_bits);
  const DeviceBuffer norm = DeviceBuffer::from_host(norm_bits);
  const DeviceBuffer x = DeviceBuffer::from_host(to_bf16(x_vals));
  DeviceBuffer normed(static_cast<size_t>(kM * kK) * 2);
  DeviceBuffer y(static_cast<size_t>(kM * kN) * 2);
  MatmulParams p = bf16_params(x, w, y, kM, kN, kK, kN);
  p.norm_weight = norm.get();
  p.norm_weight_dtype = DType::kBF16;
  p.norm_eps = kNormEps;
  p.normed = normed.get();
  int64_t timed[3] = {0, 0, 0};
  const MatmulSkinnyNorm modes[3] = {MatmulSkinnyNorm::kFused, MatmulSkinnyNorm::kFusedBlockCopies,
                                     MatmulSkinnyNorm::kAuto};
  for (int i = 0; i < 3; ++i) {
    matmul_cuda_forget_shared_choices();
    auto ctx = context(MatmulImpl::kAuto);
    ctx->set_skinny_norm(modes[i]);
    matmul_cuda(p, *ctx, nullptr);
    ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(ctx->num_impl_measurements(), 1);
    timed[i] = ctx->num_timed_candidates();
    if (modes[i] != MatmulSkinnyNorm::kAuto && ctx->last_impl() == MatmulImpl::kSkinny) {
      EXPECT_FALSE(ctx->last_norm_apart());
      EXPECT_EQ(ctx->last_norm_block_copies(), modes[i] == MatmulSkinnyNorm::kFusedBlockCopies);
    }
  }
  EXPECT_EQ(timed[1], timed[0]);
  EXPECT_EQ(timed[2], timed[0] + 2);
  // The kAuto context's choice (still the process's): correct, and taken by another context.
  auto first = context(MatmulImpl::kAuto);
  y.poison();
  matmul_cuda(p, *first, nullptr);
  ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(first->num_impl_measurements(), 0);
  const std::vector<uint16_t> bits = y.to_host<uint16_t>();
  std::vector<float> got;
  ASSERT_TRUE(extract(bits, kM, kN, {0, kN}, &got));
  const std::vector<uint16_t> no_bias(kN, 0);
  EXPECT_TRUE(all_close(
      got, run_cpu(x_vals, w_bits, no_bias, {}, kM, kN, kK, MatmulEpilogue::kNone, &norm_bits),
      norm_atol_for(kK), kRtol));
  auto second = context(MatmulImpl::kAuto);
  y.poison();
  matmul_cuda(p, *second, nullptr);
  ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(second->last_impl(), first->last_impl());
  EXPECT_EQ(second->last_norm_apart(), first->last_norm_apart());
  EXPECT_EQ(second->last_norm_block_copies(), first->last_norm_block_copies());
  EXPECT_EQ(y.to_host<uint16_t>(), bits);
}

// The device side of the logit tile summaries of `rows` rows of `vocab` logits: words and row
// counts holding an older epoch's words of the largest keys (and a count of 12345), which a
// writer of `epoch` must beat, and the epoch itself.
struct DeviceSummaries {
  DeviceSummaries(int64_t rows, int64_t vocab, int64_t tile_tokens, uint32_t epoch)
      : tiles(logit_tiles(vocab, tile_tokens)), tile_tokens(tile_tokens), epoch(epoch) {
    words = DeviceBuffer::from_host(
        std::vector<uint64_t>(static_cast<size_t>(rows * tiles),
                              (uint64_t{epoch - 1} << logit_tile::kEpochShift) | 0xfffffffffffull));
    counts = DeviceBuffer::from_host(
        std::vector<uint64_t>(static_cast<size_t>(rows), (uint64_t{epoch - 1} << 32) | 12345u));
    device_epoch = DeviceBuffer::from_host(std::vector<uint32_t>{epoch});
  }
  LogitTileSummaries view() const {
    return {words.get<uint64_t>(), counts.get<uint64_t>(), device_epoch.get<uint32_t>(),
            tile_tokens};
  }
  // The next step's epoch, for a graph replay.
  void set_epoch(uint32_t e) {
    epoch = e;
    ROOFLINE_CUDA_CHECK(cudaMemcpy(device_epoch.get(), &e, 4, cudaMemcpyHostToDevice));
    ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize());
  }

  int64_t tiles;
  int64_t tile_tokens;
  uint32_t epoch;
  DeviceBuffer words, counts, device_epoch;
};

// The GPU's summaries against summarize_logit_tiles_cpu of `logits` (the host copy of what the GPU
// summarised: [rows, vocab] of dtype, row stride `stride`): every word bit for bit, and every
// row's count as the sampler reads it (nonfinite_count: a count word the writer left stale, for a
// row without NaN or inf, reads as 0, as the oracle's fresh one does). `nonfinite_rows` counts the
// rows whose oracle count is not 0.
::testing::AssertionResult matches_oracle(const DeviceSummaries& got, const void* logits,
                                          DType dtype, int64_t rows, int64_t vocab, int64_t stride,
                                          int64_t* nonfinite_rows = nullptr) {
  std::vector<uint64_t> words(static_cast<size_t>(rows * got.tiles)),
      counts(static_cast<size_t>(rows));
  const uint32_t epoch = got.epoch;
  summarize_logit_tiles_cpu(logits, dtype, rows, vocab, stride,
                            {words.data(), counts.data(), &epoch, got.tile_tokens});
  const std::vector<uint64_t> got_words = got.words.to_host<uint64_t>();
  const std::vector<uint64_t> got_counts = got.counts.to_host<uint64_t>();
  int64_t wrong = 0, first = -1;
  for (size_t i = 0; i < words.size(); ++i) {
    if (got_words[i] == words[i]) continue;
    if (first < 0) first = static_cast<int64_t>(i);
    ++wrong;
  }
  if (wrong > 0) {
    const size_t i = static_cast<size_t>(first);
    return ::testing::AssertionFailure()
           << wrong << " of " << words.size() << " words differ; the first, row "
           << first / got.tiles << " tile " << first % got.tiles << ": got 0x" << std::hex
           << got_words[i] << ", expected 0x" << words[i] << std::dec << "; "
           << testing::seed_note();
  }
  if (nonfinite_rows != nullptr) *nonfinite_rows = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const uint32_t want = logit_tile::nonfinite_count(counts[static_cast<size_t>(r)], epoch);
    const uint32_t have = logit_tile::nonfinite_count(got_counts[static_cast<size_t>(r)], epoch);
    if (have != want)
      return ::testing::AssertionFailure()
             << "row " << r << " counts " << have << " non-finite logits, the oracle " << want;
    if (nonfinite_rows != nullptr && want > 0) ++*nonfinite_rows;
  }
  return ::testing::AssertionSuccess();
}

// `rows` rows of `vocab` logits of the awkward kinds, in f32 (the caller rounds to bf16 if it
// wants): row 0 in steps of 1/4 (ties for every tile's maximum) with -0 and +0, row 1 with NaN,
// +inf and -inf scattered, row 2 all NaN, row 3 and on plain random values.
std::vector<float> awkward_logits(int64_t rows, int64_t vocab, std::mt19937_64& rng) {
  std::vector<float> v = random_vector(rows * vocab, rng, -8.0f, 8.0f);
  std::uniform_int_distribution<int> pick(0, 9);
  for (int64_t i = 0; i < vocab; ++i) {
    float& tie = v[static_cast<size_t>(i)];
    tie = std::round(tie * 0.5f) / 4.0f;
    if (tie == 0.0f) tie = pick(rng) < 5 ? -0.0f : 0.0f;
    if (rows > 1) {
      float& x = v[static_cast<size_t>(vocab + i)];
      const int kind = pick(rng);
      x = kind == 0   ? std::nanf("")
          : kind == 1 ? std::numeric_limits<float>::infinity()
          : kind == 2 ? -std::numeric_limits<float>::infinity()
                      : x;
    }
    if (rows > 2) v[static_cast<size_t>(2 * vocab + i)] = std::nanf("");
  }
  return v;
}

TEST(LogitTilesCudaTest, MatchesTheCpuOracle) {
  // summarize_logit_tiles_cuda on f32 and bf16 logits of 1, 7, 1000 and 128256 tokens a row, in
  // dense rows, rows of vocab + 8 and rows of vocab + 3 starting one element in (not 16-byte
  // aligned: element loads), for tiles of 1, 4, 8, 16, 37, 64, 128, 256 and 4096 tokens (where a
  // row has at most 16384 of them; 16-byte aligned rows of 4-128 f32 or 8-256 bf16 go to the
  // short-tile kernel, the rest to the general one): every word and count of 4 awkward rows against
  // the CPU oracle, over buffers of an older epoch's largest words.
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr int64_t kRows = 4;
  auto rng = make_rng(83);
  uint32_t epoch = 100;
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (const int64_t vocab : {1, 7, 1000, 128256}) {
      std::vector<float> values = awkward_logits(kRows, vocab, rng);
      if (dtype == DType::kBF16) values = round_to_bf16(values);
      for (const auto& [pad, offset] : {std::pair<int64_t, int64_t>{0, 0}, {8, 0}, {3, 1}}) {
        const int64_t stride = vocab + pad;
        // The rows in their layout, as f32 and as the dtype's bytes; padding holds NaN, which the
        // summaries must not see.
        std::vector<float> laid(static_cast<size_t>(offset + kRows * stride), std::nanf(""));
        for (int64_t r = 0; r < kRows; ++r)
          std::copy_n(values.begin() + r * vocab, vocab, laid.begin() + offset + r * stride);
        const std::vector<uint16_t> laid_bf16 = to_bf16(laid);
        const DeviceBuffer logits = dtype == DType::kF32 ? DeviceBuffer::from_host(laid)
                                                         : DeviceBuffer::from_host(laid_bf16);
        const void* host = dtype == DType::kF32 ? static_cast<const void*>(laid.data() + offset)
                                                : laid_bf16.data() + offset;
        const void* device = logits.get<uint8_t>() + offset * dtype_size_bytes(dtype);
        for (const int64_t tile_tokens : {1, 4, 8, 16, 37, 64, 128, 256, 4096}) {
          if (logit_tiles(vocab, tile_tokens) > kLogitTileMaxTiles) continue;
          SCOPED_TRACE(std::string(dtype == DType::kF32 ? "f32" : "bf16") + ", vocab " +
                       std::to_string(vocab) + ", rows of " + std::to_string(stride) +
                       " from element " + std::to_string(offset) + ", tiles of " +
                       std::to_string(tile_tokens));
          DeviceSummaries got(kRows, vocab, tile_tokens, ++epoch);
          summarize_logit_tiles_cuda(device, dtype, kRows, vocab, stride, got.view(), nullptr);
          ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(nullptr));
          int64_t nonfinite_rows = 0;
          EXPECT_TRUE(matches_oracle(got, host, dtype, kRows, vocab, stride, &nonfinite_rows));
          EXPECT_GE(nonfinite_rows, 1);  // rows 1 and 2 (row 1 of one token may draw no NaN)
        }
      }
    }
  }
}

TEST(LogitTilesCudaTest, CapturedOnceReplaysEachStepsEpoch) {
  // One capture of summarize_logit_tiles_cuda, replayed for three steps, each with new logits in
  // the same buffer and the next epoch: the words each replay leaves are that step's, beating the
  // step before's (the epoch is read on the device, never baked into the graph).
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr int64_t kRows = 3, kVocab = 151936, kTileTokens = 128;
  auto rng = make_rng(89);
  DeviceBuffer logits(static_cast<size_t>(kRows * kVocab) * 2);
  DeviceSummaries got(kRows, kVocab, kTileTokens, 40);
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  ROOFLINE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  summarize_logit_tiles_cuda(logits.get(), DType::kBF16, kRows, kVocab, kVocab, got.view(), stream);
  ROOFLINE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  ROOFLINE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (const uint32_t epoch : {40u, 41u, 42u}) {
    SCOPED_TRACE("epoch " + std::to_string(epoch));
    const std::vector<uint16_t> host = to_bf16(awkward_logits(kRows, kVocab, rng));
    ROOFLINE_CUDA_CHECK(
        cudaMemcpy(logits.get(), host.data(), host.size() * 2, cudaMemcpyHostToDevice));
    got.set_epoch(epoch);
    ROOFLINE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_TRUE(matches_oracle(got, host.data(), DType::kBF16, kRows, kVocab, kVocab));
  }
  ROOFLINE_CUDA_CHECK(cudaGraphExecDestroy(exec));
  ROOFLINE_CUDA_CHECK(cudaGraphDestroy(graph));
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
}

// An [n, k] bf16 weight on the device made of kPoolRows random rows repeated (so the LM heads
// upload in a moment; a logit repeats only kPoolRows columns later, in another tile of any size the
// tests use but 4096). With `nonfinite`, row 5 holds one +inf (its outputs are ±inf) and row n - 1
// is NaN.
DeviceBuffer pooled_weight(int64_t n, int64_t k, bool nonfinite, std::mt19937_64& rng) {
  constexpr int64_t kPoolRows = 1009;
  const std::vector<uint16_t> pool = to_bf16(random_vector(std::min(n, kPoolRows) * k, rng));
  DeviceBuffer w(static_cast<size_t>(n * k) * 2);
  for (int64_t r = 0; r < n; r += kPoolRows)
    ROOFLINE_CUDA_CHECK(cudaMemcpy(w.get<uint16_t>() + r * k, pool.data(),
                                   static_cast<size_t>(std::min(kPoolRows, n - r) * k) * 2,
                                   cudaMemcpyHostToDevice));
  if (nonfinite) {
    std::vector<uint16_t> row(pool.begin(), pool.begin() + k);
    row[static_cast<size_t>(k / 2)] = f32_to_bf16_bits(std::numeric_limits<float>::infinity());
    ROOFLINE_CUDA_CHECK(cudaMemcpy(w.get<uint16_t>() + 5 * k, row.data(),
                                   static_cast<size_t>(k) * 2, cudaMemcpyHostToDevice));
    std::fill(row.begin(), row.end(), f32_to_bf16_bits(std::nanf("")));
    ROOFLINE_CUDA_CHECK(cudaMemcpy(w.get<uint16_t>() + (n - 1) * k, row.data(),
                                   static_cast<size_t>(k) * 2, cudaMemcpyHostToDevice));
  }
  ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize());
  return w;
}

// An LM-head-like problem of the summaries tests: its weight, the epilogue's operands, the RMSNorm
// prologue where `norm`, and y's row stride.
struct SummaryCase {
  const char* name;
  int64_t n, k;
  int64_t tile_tokens;
  MatmulEpilogue epilogue;
  bool norm;
  bool nonfinite;  // pooled_weight's +inf and NaN rows
  int64_t y_pad;   // y's rows are n + y_pad long
  std::vector<int64_t> ms;
};

// Runs p through `impl`'s context and returns y's buffer ([m, stride] bf16 bits), poisoned first.
std::vector<uint16_t> run_summarized(MatmulParams p, MatmulEpilogue e, MatmulCudaContext& ctx,
                                     DeviceBuffer& y) {
  y.poison();
  p.y = y.get();
  if (e == MatmulEpilogue::kNone) matmul_cuda(p, ctx, nullptr);
  if (e == MatmulEpilogue::kBias) matmul_bias_cuda(p, ctx, nullptr);
  if (e == MatmulEpilogue::kResidual) matmul_residual_cuda(p, ctx, nullptr);
  ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  return y.to_host<uint16_t>();
}

TEST(MatmulCudaSummariesTest, EveryImplementationLeavesTheOracleOfItsOwnY) {
  // The LM heads of Qwen2.5-0.5B and Llama-3-8B with the final norm fused (the RMSNorm prologue),
  // and other vocabularies with bias, residual, non-finite outputs, a row stride past n and
  // n % 16 = 1 (GPT-2's 50257: the last column block holds one output), at m <= 64 on the skinny
  // and the wide kernel (the skinny kernel writing the summaries in its epilogue for tiles of a
  // multiple of 16 tokens: 16, 48, 64, 128 here; the wide kernel for tiles that divide its own:
  // 8, 16, 64, 128; otherwise, as for 37, the product and then summarize_logit_tiles_cuda) and at
  // m = 65 and 200 on cuBLASLt (then summarize_logit_tiles_cuda); the 1000-token vocabulary also
  // on cuBLASLt at m <= 64 and on the selection. Each call starts from an older epoch's largest
  // words; its summaries must be exactly the CPU oracle's of the y it stored, and that y, bit for
  // bit, the same call's without them (forced implementations: the selection may choose differently
  // with them).
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr MatmulEpilogue kPlain = MatmulEpilogue::kNone, kBias = MatmulEpilogue::kBias,
                           kResidual = MatmulEpilogue::kResidual;
  const SummaryCase cases[] = {
      {"qwen2.5-0.5b lm head", 151936, 896, 128, kPlain, true, false, 0, {1, 3, 8, 64, 200}},
      {"llama3-8b lm head", 128256, 4096, 128, kPlain, true, false, 0, {1, 3, 64, 65}},
      {"32000x4096, rows of n + 8", 32000, 4096, 16, kBias, false, false, 8, {3, 64, 200}},
      {"1000x896 non-finite", 1000, 896, 16, kPlain, false, true, 0, {1, 3, 8, 64, 65, 200}},
      {"1000x896 non-finite, tiles of 8", 1000, 896, 8, kResidual, false, true, 0, {2, 64}},
      {"32000x896, tiles of 64", 32000, 896, 64, kBias, true, false, 0, {5, 33}},
      {"32000x896 non-finite, tiles of 48", 32000, 896, 48, kPlain, false, true, 0, {1, 17}},
      {"151936x896, tiles of 37", 151936, 896, 37, kResidual, false, false, 0, {1, 8, 65}},
      {"50257x896 non-finite", 50257, 896, 128, kPlain, false, true, 0, {1, 3, 64, 65}},
  };
  // One context per implementation, indexed by MatmulImpl.
  std::unique_ptr<MatmulCudaContext> ctxs[] = {
      context(MatmulImpl::kAuto), context(MatmulImpl::kCublas), context(MatmulImpl::kSkinny),
      context(MatmulImpl::kWide)};
  static_assert(
      static_cast<int>(MatmulImpl::kAuto) == 0 && static_cast<int>(MatmulImpl::kCublas) == 1 &&
      static_cast<int>(MatmulImpl::kSkinny) == 2 && static_cast<int>(MatmulImpl::kWide) == 3);
  auto rng = make_rng(97);
  uint32_t epoch = 1000;
  for (const SummaryCase& c : cases) {
    const DeviceBuffer w = pooled_weight(c.n, c.k, c.nonfinite, rng);
    const DeviceBuffer bias = DeviceBuffer::from_host(to_bf16(random_vector(c.n, rng)));
    const DeviceBuffer norm = DeviceBuffer::from_host(to_bf16(random_vector(c.k, rng)));
    const int64_t stride = c.n + c.y_pad;
    for (const int64_t m : c.ms) {
      const DeviceBuffer x = DeviceBuffer::from_host(to_bf16(random_vector(m * c.k, rng)));
      const DeviceBuffer residual =
          DeviceBuffer::from_host(to_bf16(random_vector(m * stride, rng, -2.0f, 2.0f)));
      DeviceBuffer normed(static_cast<size_t>(m * c.k) * 2), y(static_cast<size_t>(m * stride) * 2);
      MatmulParams p = bf16_params(x, w, y, m, c.n, c.k, stride);
      p.bias = bias.get();
      p.residual = residual.get();
      if (c.norm) {
        p.norm_weight = norm.get();
        p.norm_eps = kNormEps;
        p.normed = normed.get();
      }
      // The skinny and the wide kernel (m <= 64) or cuBLASLt; on the small vocabulary every
      // implementation.
      std::vector<MatmulImpl> impls = {MatmulImpl::kCublas};
      if (m <= kMatmulSkinnyMaxM) impls = {MatmulImpl::kSkinny, MatmulImpl::kWide};
      if (c.n == 1000 && m <= kMatmulSkinnyMaxM) impls.push_back(MatmulImpl::kCublas);
      if (c.n == 1000) impls.push_back(MatmulImpl::kAuto);
      for (const MatmulImpl impl : impls) {
        SCOPED_TRACE(std::string(c.name) + ", m = " + std::to_string(m) + ", " + impl_name(impl) +
                     ", tiles of " + std::to_string(c.tile_tokens));
        MatmulCudaContext& ctx = *ctxs[static_cast<int>(impl)];
        DeviceSummaries got(m, c.n, c.tile_tokens, ++epoch);
        MatmulParams q = p;
        q.summaries = got.view();
        const std::vector<uint16_t> y_bits = run_summarized(q, c.epilogue, ctx, y);
        if (impl != MatmulImpl::kAuto) {
          EXPECT_EQ(ctx.last_impl(), impl);
          EXPECT_TRUE(run_summarized(p, c.epilogue, ctx, y) == y_bits)
              << "y differs from the call's without summaries";
        }
        int64_t nonfinite_rows = 0;
        EXPECT_TRUE(
            matches_oracle(got, y_bits.data(), DType::kBF16, m, c.n, stride, &nonfinite_rows));
        if (c.nonfinite) {
          EXPECT_EQ(nonfinite_rows, m);
        }
      }
    }
  }
}

TEST(MatmulCudaSummariesTest, CapturedCallsReplayEachStepsEpoch) {
  // A warmed-up call with summaries captured once on the skinny and once on the wide kernel
  // (which write them in their epilogues) and once on cuBLASLt (then summarize_logit_tiles_cuda),
  // each replayed for two steps
  // with the next epoch: every replay leaves the oracle's summaries of its y in its own epoch,
  // beating the replay before's (the epoch is read on the device, never baked into the graph).
  ROOFLINE_SKIP_WITHOUT_GPU();
  constexpr int64_t kM = 8, kN = 32000, kK = 896, kTileTokens = 128;
  auto rng = make_rng(101);
  const DeviceBuffer w = pooled_weight(kN, kK, false, rng);
  const DeviceBuffer x = DeviceBuffer::from_host(to_bf16(random_vector(kM * kK, rng)));
  DeviceBuffer y(static_cast<size_t>(kM * kN) * 2);
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const MatmulImpl impl : {MatmulImpl::kSkinny, MatmulImpl::kWide, MatmulImpl::kCublas}) {
    auto ctx = context(impl);
    DeviceSummaries got(kM, kN, kTileTokens, 60);
    MatmulParams p = bf16_params(x, w, y, kM, kN, kK, kN);
    p.summaries = got.view();
    matmul_cuda(p, *ctx, stream);  // warm-up: the cuBLASLt plan is made outside the capture
    ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
    cudaGraph_t graph;
    ROOFLINE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    matmul_cuda(p, *ctx, stream);
    ROOFLINE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec;
    ROOFLINE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (const uint32_t epoch : {61u, 62u}) {
      SCOPED_TRACE(std::string(impl_name(impl)) + ", epoch " + std::to_string(epoch));
      got.set_epoch(epoch);
      y.poison();
      ROOFLINE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
      EXPECT_TRUE(matches_oracle(got, y.to_host<uint16_t>().data(), DType::kBF16, kM, kN, kN));
    }
    ROOFLINE_CUDA_CHECK(cudaGraphExecDestroy(exec));
    ROOFLINE_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace roofline
