// matmul_cpu / matmul_bias_cpu against naive double loops, plus: f16/bf16 weights give exactly the
// f32 result over the converted weights, and y_row_stride writes only its own column range; the
// RMSNorm prologue and the SwiGLU and RoPE epilogues equal the unfused ops; the logit tile
// summaries are summarize_logit_tiles_cpu's of the call's own y, and the skinny CUDA kernel's plan
// for them (fused for whole 16-column tiles, never split).
#include "ops/matmul/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "ops/matmul/matmul_measure.h"
#include "ops/matmul/matmul_shapes.h"
#include "ops/matmul/matmul_skinny.h"
#include "ops/rms_norm/rms_norm.h"
#include "ops/testing/op_test_util.h"

namespace roofline {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::make_rng;
using testing::poison;
using testing::random_vector;

// Inputs in [-1, 1]. A k-term fp32 sum accumulates rounding error that grows with k (up to
// k·2^-24·sum|x·w| in the worst case, about sqrt(k) times smaller typically): 1e-5 holds for short
// sums, and the absolute tolerance grows linearly with k beyond 256 (1.6e-4 at k = 4096).
double atol_for(int64_t k) { return 1e-5 * std::max<double>(1.0, static_cast<double>(k) / 256.0); }
constexpr double kRtol = 1e-5;

// Weights held in a dtype, with their exact f32 values.
struct Weights {
  DType dtype;
  std::vector<float> values;   // [n, k] what the op should compute with
  std::vector<uint16_t> bits;  // [n, k] storage when dtype is f16 or bf16
  const void* data() const {
    return dtype == DType::kF32 ? static_cast<const void*>(values.data()) : bits.data();
  }
};

// The params of y[m, n] (row stride y_row_stride) = x · Wᵀ for W stored as `w` in `w_dtype`:
// what every test fills before adding what is particular to it.
MatmulParams params_for(const float* x, const void* w, DType w_dtype, float* y, int64_t m,
                        int64_t n, int64_t k, int64_t y_row_stride) {
  MatmulParams p;
  p.x = x;
  p.w = w;
  p.w_dtype = w_dtype;
  p.y = y;
  p.m = m;
  p.n = n;
  p.k = k;
  p.y_row_stride = y_row_stride;
  return p;
}

Weights make_weights(DType dtype, int64_t count, std::mt19937_64& rng) {
  Weights w{dtype, random_vector(count, rng), {}};
  if (dtype == DType::kF32) return w;
  for (float& v : w.values) {
    const uint16_t b = dtype == DType::kF16 ? f32_to_f16_bits(v) : f32_to_bf16_bits(v);
    w.bits.push_back(b);
    v = dtype == DType::kF16 ? f16_bits_to_f32(b) : bf16_bits_to_f32(b);
  }
  return w;
}

// [m, n] = x · Wᵀ (+ bias) in double.
std::vector<double> reference_matmul(const std::vector<float>& x, const std::vector<float>& w,
                                     const std::vector<float>* bias, int64_t m, int64_t n,
                                     int64_t k) {
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = bias ? (*bias)[static_cast<size_t>(j)] : 0.0;
      for (int64_t c = 0; c < k; ++c) {
        sum += static_cast<double>(x[static_cast<size_t>(i * k + c)]) *
               w[static_cast<size_t>(j * k + c)];
      }
      y[static_cast<size_t>(i * n + j)] = sum;
    }
  }
  return y;
}

uint64_t salt(const MatmulShape& s, DType dtype, int variant) {
  return ((static_cast<uint64_t>(s.m) * 10007 + s.n) * 10007 + s.k) * 64 +
         static_cast<uint64_t>(dtype) * 8 + variant;
}

class MatmulTest : public ::testing::TestWithParam<std::tuple<MatmulShape, DType>> {};

TEST_P(MatmulTest, MatchesReference) {
  const auto [shape, dtype] = GetParam();
  const auto [m, n, k] = shape;
  auto rng = make_rng(salt(shape, dtype, 0));
  auto x = random_vector(m * k, rng);
  const Weights w = make_weights(dtype, n * k, rng);
  std::vector<float> y(static_cast<size_t>(m * n));
  poison(y);
  MatmulParams p = params_for(x.data(), w.data(), dtype, y.data(), m, n, k, n);
  matmul_cpu(p);
  EXPECT_TRUE(all_close(y, reference_matmul(x, w.values, nullptr, m, n, k), atol_for(k), kRtol));

  // A half-precision weight must give exactly the f32 matmul over its converted values.
  if (dtype != DType::kF32) {
    std::vector<float> y_f32(y.size());
    poison(y_f32);
    MatmulParams p_f32 = p;
    p_f32.w = w.values.data();
    p_f32.w_dtype = DType::kF32;
    p_f32.y = y_f32.data();
    matmul_cpu(p_f32);
    EXPECT_TRUE(all_equal(y, y_f32));
  }
}

TEST_P(MatmulTest, BiasMatchesReference) {
  const auto [shape, dtype] = GetParam();
  const auto [m, n, k] = shape;
  auto rng = make_rng(salt(shape, dtype, 1));
  auto x = random_vector(m * k, rng);
  const Weights w = make_weights(dtype, n * k, rng);
  const Weights bias = make_weights(dtype, n, rng);  // biases come in the checkpoint's dtype
  std::vector<float> y(static_cast<size_t>(m * n));
  poison(y);
  MatmulParams p = params_for(x.data(), w.data(), dtype, y.data(), m, n, k, n);
  p.bias = bias.data();
  p.bias_dtype = dtype;
  matmul_bias_cpu(p);
  EXPECT_TRUE(
      all_close(y, reference_matmul(x, w.values, &bias.values, m, n, k), atol_for(k), kRtol));
}

TEST_P(MatmulTest, ResidualMatchesReferenceAlsoInPlace) {
  // y = x · Wᵀ + residual into columns [kLeft, kLeft + n) of wider rows (the residual shares y's
  // row stride), once from a separate residual and once in place (residual == y).
  const auto [shape, dtype] = GetParam();
  const auto [m, n, k] = shape;
  constexpr int64_t kLeft = 3;
  constexpr float kSentinel = -4321.0f;
  const int64_t stride = kLeft + n + 2;
  auto rng = make_rng(salt(shape, dtype, 3));
  auto x = random_vector(m * k, rng);
  const Weights w = make_weights(dtype, n * k, rng);
  const std::vector<float> residual_dense = random_vector(m * n, rng, -4.0f, 4.0f);
  std::vector<double> expected = reference_matmul(x, w.values, nullptr, m, n, k);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] += residual_dense[i];
  // The residual laid out like y: its range holds the values, the rest the sentinel.
  std::vector<float> residual(static_cast<size_t>(m * stride), kSentinel);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      residual[static_cast<size_t>(i * stride + kLeft + j)] =
          residual_dense[static_cast<size_t>(i * n + j)];

  for (const bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in place" : "separate residual");
    std::vector<float> y = residual;
    if (!in_place) {
      for (float& v : y) v = kSentinel;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          y[static_cast<size_t>(i * stride + kLeft + j)] = std::nanf("");
    }
    MatmulParams p = params_for(x.data(), w.data(), dtype, y.data() + kLeft, m, n, k, stride);
    p.residual = (in_place ? y.data() : residual.data()) + kLeft;
    matmul_residual_cpu(p);
    std::vector<float> written;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < stride; ++j) {
        const float v = y[static_cast<size_t>(i * stride + j)];
        if (j < kLeft || j >= kLeft + n) {
          ASSERT_EQ(v, kSentinel) << "row " << i << " column " << j << " is outside the range";
        } else {
          written.push_back(v);
        }
      }
    }
    EXPECT_TRUE(all_close(written, expected, atol_for(k) + 4e-6, kRtol));
  }
}

TEST_P(MatmulTest, RmsNormPrologueEqualsRmsNormThenMatmul) {
  // With the prologue each of the three matmuls gives exactly rms_norm_cpu's rows into `normed`
  // and then the plain op over them: the CPU backend's numbers do not move when the graph fuses.
  const auto [shape, dtype] = GetParam();
  const auto [m, n, k] = shape;
  auto rng = make_rng(salt(shape, dtype, 3));
  const auto x = random_vector(m * k, rng, -3.0f, 3.0f);
  const Weights w = make_weights(dtype, n * k, rng);
  const Weights bias = make_weights(dtype, n, rng);
  const Weights norm = make_weights(dtype, k, rng);
  const auto residual = random_vector(m * n, rng);
  std::vector<float> normed_ref(static_cast<size_t>(m * k));
  RmsNormParams rn;
  rn.x = x.data();
  rn.weight = norm.data();
  rn.weight_dtype = dtype;
  rn.out = normed_ref.data();
  rn.num_rows = m;
  rn.hidden = k;
  rn.eps = 1e-5f;
  rms_norm_cpu(rn);
  for (const MatmulEpilogue e :
       {MatmulEpilogue::kNone, MatmulEpilogue::kBias, MatmulEpilogue::kResidual}) {
    SCOPED_TRACE(static_cast<int>(e));
    std::vector<float> y(static_cast<size_t>(m * n)), y_ref(y.size()), normed(normed_ref.size());
    poison(y);
    poison(y_ref);
    poison(normed);
    MatmulParams ref = params_for(normed_ref.data(), w.data(), dtype, y_ref.data(), m, n, k, n);
    ref.bias = bias.data();
    ref.bias_dtype = dtype;
    ref.residual = residual.data();
    MatmulParams p = ref;
    p.x = x.data();
    p.y = y.data();
    p.norm_weight = norm.data();
    p.norm_weight_dtype = dtype;
    p.norm_eps = 1e-5f;
    p.normed = normed.data();
    const auto run = [e](const MatmulParams& q) {
      if (e == MatmulEpilogue::kNone) matmul_cpu(q);
      if (e == MatmulEpilogue::kBias) matmul_bias_cpu(q);
      if (e == MatmulEpilogue::kResidual) matmul_residual_cpu(q);
    };
    run(ref);
    run(p);
    EXPECT_TRUE(all_equal(normed, normed_ref));
    EXPECT_TRUE(all_equal(y, y_ref));
  }
}

TEST_P(MatmulTest, SwigluEpilogueEqualsMatmulThenSiluMul) {
  // n = 2I rows of gate then up: y [m, I] is exactly silu_mul_cpu over the plain product, which the
  // call leaves in `gate_up`; with the RMSNorm prologue as well.
  const auto [shape, dtype] = GetParam();
  const auto [m, n_half, k] = shape;
  const int64_t n = 2 * n_half;
  auto rng = make_rng(salt(shape, dtype, 4));
  const auto x = random_vector(m * k, rng, -3.0f, 3.0f);
  const Weights w = make_weights(dtype, n * k, rng);
  const Weights norm = make_weights(dtype, k, rng);
  for (const bool with_norm : {false, true}) {
    SCOPED_TRACE(with_norm);
    std::vector<float> product(static_cast<size_t>(m * n)),
        act_ref(static_cast<size_t>(m * n_half));
    std::vector<float> y(act_ref.size()), gate_up(product.size()),
        normed(static_cast<size_t>(m * k));
    poison(y);
    poison(gate_up);
    MatmulParams ref = params_for(x.data(), w.data(), dtype, product.data(), m, n, k, n);
    if (with_norm) {
      ref.norm_weight = norm.data();
      ref.norm_weight_dtype = dtype;
      ref.normed = normed.data();
    }
    matmul_cpu(ref);
    SiluMulParams s;
    s.gate_up = product.data();
    s.out = act_ref.data();
    s.num_tokens = m;
    s.intermediate = n_half;
    silu_mul_cpu(s);
    MatmulParams p = ref;
    p.y = y.data();
    p.y_row_stride = n_half;
    p.swiglu = true;
    p.gate_up = gate_up.data();
    matmul_cpu(p);
    EXPECT_TRUE(all_equal(gate_up, product));
    EXPECT_TRUE(all_equal(y, act_ref));
  }
}

TEST_P(MatmulTest, RowStrideWritesOnlyItsColumns) {
  // Two weights writing adjacent column ranges of one [m, left + n + right] buffer, as q|k|v do.
  const auto [shape, dtype] = GetParam();
  const auto [m, n, k] = shape;
  constexpr int64_t kLeft = 5;
  constexpr int64_t kRight = 3;
  constexpr float kSentinel = 12345.0f;
  const int64_t stride = kLeft + n + kRight;
  auto rng = make_rng(salt(shape, dtype, 2));
  auto x = random_vector(m * k, rng);
  const Weights w = make_weights(dtype, n * k, rng);
  std::vector<float> y(static_cast<size_t>(m * stride), kSentinel);
  const MatmulParams p = params_for(x.data(), w.data(), dtype, y.data() + kLeft, m, n, k, stride);
  matmul_cpu(p);
  const auto expected = reference_matmul(x, w.values, nullptr, m, n, k);
  std::vector<float> written;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < stride; ++j) {
      const float v = y[static_cast<size_t>(i * stride + j)];
      if (j < kLeft || j >= kLeft + n) {
        ASSERT_EQ(v, kSentinel) << "row " << i << " column " << j << " is outside the range";
      } else {
        written.push_back(v);
      }
    }
  }
  EXPECT_TRUE(all_close(written, expected, atol_for(k), kRtol));
}

TEST(MatmulTest, HalfWeightSpecialValuesConvertExactly) {
  // f16 zeros, subnormals, the largest normal and infinities, mixed with ordinary values in blocks
  // of every alignment: the f16 weight must act exactly as its f32 conversion.
  constexpr int64_t kM = 3, kN = 5, kK = 37;
  const uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x83ff, 0x0200,
                               0x7bff, 0xfbff, 0x7c00, 0x0400, 0x3c00};
  auto rng = make_rng(11);
  auto x = random_vector(kM * kK, rng);
  std::vector<uint16_t> w16(static_cast<size_t>(kN * kK));
  std::uniform_int_distribution<int> pick(0, 2 * static_cast<int>(std::size(specials)) - 1);
  for (auto& b : w16) {
    const int i = pick(rng);
    b = i < static_cast<int>(std::size(specials))
            ? specials[i]
            : f32_to_f16_bits(std::uniform_real_distribution<float>(-1, 1)(rng));
  }
  std::vector<float> w32(w16.size());
  for (size_t i = 0; i < w16.size(); ++i) w32[i] = f16_bits_to_f32(w16[i]);
  std::vector<float> y16(static_cast<size_t>(kM * kN)), y32(y16.size());
  poison(y16);
  poison(y32);
  MatmulParams p = params_for(x.data(), w16.data(), DType::kF16, y16.data(), kM, kN, kK, kN);
  matmul_cpu(p);
  p.w = w32.data();
  p.w_dtype = DType::kF32;
  p.y = y32.data();
  matmul_cpu(p);
  EXPECT_TRUE(all_equal(y16, y32));
}

// The fused forms' requirements, shared by every implementation (matmul.h), with their messages.
TEST(MatmulTest, SwigluAndPrologueRejectWhatTheyCannotRun) {
  EXPECT_EQ(matmul_swiglu_unsupported_reason(MatmulParams{}, MatmulEpilogue::kNone),
            std::string("the matmul's SwiGLU epilogue needs params.gate_up ([m, n] scratch)"));
  std::vector<float> x(2 * 8, 1.0f), w(6 * 8, 1.0f), y(2 * 3), gate_up(2 * 6), normed(2 * 8),
      norm(8, 1.0f);
  MatmulParams p = params_for(x.data(), w.data(), DType::kF32, y.data(), 2, 6, 8, 3);
  p.swiglu = true;
  p.gate_up = gate_up.data();
  EXPECT_EQ(matmul_swiglu_unsupported_reason(p, MatmulEpilogue::kNone), nullptr);
  EXPECT_NE(matmul_swiglu_unsupported_reason(p, MatmulEpilogue::kBias), nullptr);
  p.y_row_stride = 6;  // y must be the dense [m, n / 2] activation
  EXPECT_NE(matmul_swiglu_unsupported_reason(p, MatmulEpilogue::kNone), nullptr);
  EXPECT_DEATH(matmul_cpu(p), "no bias or residual, and a dense y");
  p.y_row_stride = 3;
  p.gate_up = nullptr;
  EXPECT_DEATH(matmul_cpu(p), "needs params.gate_up");
  // The prologue's GEMM reads the normalised rows and runs no second prologue.
  p.gate_up = gate_up.data();
  p.norm_weight = norm.data();
  p.norm_weight_dtype = DType::kF32;
  p.normed = normed.data();
  const MatmulParams q = matmul_prologue_product(p);
  EXPECT_EQ(q.x, normed.data());
  EXPECT_EQ(q.norm_weight, nullptr);
  EXPECT_TRUE(q.swiglu);  // the epilogue stays
  p.normed = nullptr;
  EXPECT_DEATH(matmul_cpu(p), "needs params.normed");
}

// The RoPE epilogue's problem: 3 q heads and 1 KV head of 8 dims (n = 40), k = 37, 5 tokens at
// positions 0, 3, 1000, 4, 7 into caches of 4 blocks of 4 slots; token 3 is a padding row (slot
// -1).
struct RopeCase {
  static constexpr int64_t kM = 5, kK = 37, kHeads = 3, kKvHeads = 1, kHeadDim = 8, kSlots = 16;
  static constexpr int64_t kN = (kHeads + 2 * kKvHeads) * kHeadDim;
  std::vector<int32_t> positions = {0, 3, 1000, 4, 7};
  std::vector<int64_t> slots = {5, 0, 15, -1, 9};
  std::vector<float> inv_freq = {1.0f, 0.1f, 0.01f, 0.001f};
  std::vector<float> q = std::vector<float>(kM * kHeads * kHeadDim);
  std::vector<float> k_cache = std::vector<float>(kSlots * kKvHeads * kHeadDim);
  std::vector<float> v_cache = std::vector<float>(kSlots * kKvHeads * kHeadDim);
  RopeCase() {
    poison(q);
    poison(k_cache);
    poison(v_cache);
  }
  QkvRopeParams params() {
    QkvRopeParams r;
    r.q_out = q.data();
    r.positions = positions.data();
    r.slot_mapping = slots.data();
    r.k_cache = k_cache.data();
    r.v_cache = v_cache.data();
    r.inv_freq = inv_freq.data();
    r.num_heads = kHeads;
    r.num_kv_heads = kKvHeads;
    r.head_dim = kHeadDim;
    r.block_size = 4;
    r.num_blocks = kSlots / 4;
    return r;
  }
};

TEST(MatmulTest, RopeEpilogueEqualsMatmulThenQkvRope) {
  // The q|k|v product lands in y (the scratch) and q, K and V are exactly qkv_rope_cpu's over it;
  // with bias and with the RMSNorm prologue as well.
  auto rng = make_rng(61);
  using C = RopeCase;
  const auto x = random_vector(C::kM * C::kK, rng, -3.0f, 3.0f);
  const auto w = random_vector(C::kN * C::kK, rng);
  const auto bias = random_vector(C::kN, rng);
  const auto norm = random_vector(C::kK, rng);
  for (const bool with_bias : {false, true}) {
    for (const bool with_norm : {false, true}) {
      SCOPED_TRACE(std::to_string(with_bias) + std::to_string(with_norm));
      std::vector<float> product(C::kN * C::kM), y(product.size()), normed(C::kM * C::kK);
      poison(y);
      RopeCase want, got;
      MatmulParams ref =
          params_for(x.data(), w.data(), DType::kF32, product.data(), C::kM, C::kN, C::kK, C::kN);
      ref.bias = bias.data();
      ref.bias_dtype = DType::kF32;
      if (with_norm) {
        ref.norm_weight = norm.data();
        ref.norm_weight_dtype = DType::kF32;
        ref.normed = normed.data();
      }
      with_bias ? matmul_bias_cpu(ref) : matmul_cpu(ref);
      QkvRopeParams r = want.params();
      r.qkv = product.data();
      r.num_tokens = C::kM;
      qkv_rope_cpu(r);

      MatmulParams p = ref;
      p.y = y.data();
      p.qkv_rope = true;
      p.rope = got.params();
      with_bias ? matmul_bias_cpu(p) : matmul_cpu(p);
      EXPECT_TRUE(all_equal(y, product));
      EXPECT_TRUE(all_equal(got.q, want.q));
      // Bit for bit, the untouched slots' poison (NaN) included.
      EXPECT_EQ(std::memcmp(got.k_cache.data(), want.k_cache.data(), got.k_cache.size() * 4), 0);
      EXPECT_EQ(std::memcmp(got.v_cache.data(), want.v_cache.data(), got.v_cache.size() * 4), 0);
      EXPECT_TRUE(std::isnan(got.k_cache[4 * RopeCase::kHeadDim]));  // slot 4: no token
    }
  }
}

TEST(MatmulTest, RopeEpilogueRejectsWhatItCannotRun) {
  using C = RopeCase;
  std::vector<float> x(C::kM * C::kK), w(C::kN * C::kK), y(C::kM * (C::kN + 8));
  RopeCase io;
  MatmulParams p =
      params_for(x.data(), w.data(), DType::kF32, y.data(), C::kM, C::kN, C::kK, C::kN);
  p.qkv_rope = true;
  p.rope = io.params();
  EXPECT_EQ(matmul_rope_unsupported_reason(p, MatmulEpilogue::kNone), nullptr);
  EXPECT_EQ(matmul_rope_unsupported_reason(p, MatmulEpilogue::kBias), nullptr);
  EXPECT_NE(matmul_rope_unsupported_reason(p, MatmulEpilogue::kResidual), nullptr);
  p.y_row_stride = C::kN + 8;  // the product's scratch must be dense
  EXPECT_NE(matmul_rope_unsupported_reason(p, MatmulEpilogue::kNone), nullptr);
  EXPECT_DEATH(matmul_cpu(p), "needs a dense y");
  p.y_row_stride = C::kN;
  p.rope.num_kv_heads = 2;  // n no longer the q|k|v width
  EXPECT_DEATH(matmul_cpu(p), "head_dim, head_dim even");
  p.rope.num_kv_heads = 1;
  p.swiglu = true;
  EXPECT_NE(matmul_rope_unsupported_reason(p, MatmulEpilogue::kNone), nullptr);
  // The product a non-fusing implementation runs first, and the qkv_rope after it.
  p.swiglu = false;
  const MatmulParams q = matmul_rope_product(p);
  EXPECT_FALSE(q.qkv_rope);
  const QkvRopeParams r = matmul_rope_pass(p);
  EXPECT_EQ(r.qkv, y.data());
  EXPECT_EQ(r.num_tokens, C::kM);
  EXPECT_EQ(r.q_out, io.q.data());
}

// Summary words and row counts of m rows of n logits, filled with an older epoch's words of the
// largest keys (and a count of 12345), which a writer of `epoch` must beat.
struct SummaryBuffers {
  SummaryBuffers(int64_t m, int64_t n, int64_t tile_tokens, uint32_t epoch)
      : words(static_cast<size_t>(m * logit_tiles(n, tile_tokens)),
              (uint64_t{epoch - 1} << logit_tile::kEpochShift) | 0xfffffffffffull),
        counts(static_cast<size_t>(m), (uint64_t{epoch - 1} << 32) | 12345u),
        epoch(epoch),
        tile_tokens(tile_tokens) {}
  LogitTileSummaries view() { return {words.data(), counts.data(), &epoch, tile_tokens}; }
  std::vector<uint64_t> words, counts;
  uint32_t epoch;
  int64_t tile_tokens;
};

TEST(MatmulTest, LogitTileSummariesAreTheOraclesOfTheStoredY) {
  // With each epilogue (the RMSNorm prologue on two cases), into columns [0, n) of rows of n + 3,
  // for tiles of 1, 16, 37 and 128 tokens: y is the call's without summaries, bit for bit, and the
  // summaries are exactly summarize_logit_tiles_cpu's of that y (bias and residual included), over
  // buffers that held an older epoch's largest words. Weight row 5 holds one +inf (its outputs are
  // ±inf) and row n - 1 a NaN, so every row counts non-finite logits.
  struct Case {
    int64_t m, n, k;
    MatmulEpilogue e;
    bool norm;
  };
  constexpr Case kCases[] = {{3, 1000, 67, MatmulEpilogue::kNone, false},
                             {1, 37, 8, MatmulEpilogue::kBias, false},
                             {5, 131, 130, MatmulEpilogue::kResidual, true},
                             {2, 1152, 896, MatmulEpilogue::kBias, true}};
  auto rng = make_rng(71);
  for (const Case& c : kCases) {
    const int64_t stride = c.n + 3;
    const auto x = random_vector(c.m * c.k, rng);
    auto w = random_vector(c.n * c.k, rng);
    w[static_cast<size_t>(5 * c.k + c.k / 2)] = std::numeric_limits<float>::infinity();
    w[static_cast<size_t>((c.n - 1) * c.k)] = std::numeric_limits<float>::quiet_NaN();
    const auto bias = random_vector(c.n, rng);
    const auto residual = random_vector(c.m * stride, rng);
    const auto norm = random_vector(c.k, rng);
    std::vector<float> normed(static_cast<size_t>(c.m * c.k));
    for (const int64_t tile_tokens : {1, 16, 37, 128}) {
      SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) +
                   ", tiles of " + std::to_string(tile_tokens));
      std::vector<float> y(static_cast<size_t>(c.m * stride)), y_ref(y.size());
      poison(y);
      poison(y_ref);
      MatmulParams p =
          params_for(x.data(), w.data(), DType::kF32, y_ref.data(), c.m, c.n, c.k, stride);
      p.bias = bias.data();
      p.residual = residual.data();
      if (c.norm) {
        p.norm_weight = norm.data();
        p.normed = normed.data();
      }
      const auto run = [&c](const MatmulParams& q) {
        if (c.e == MatmulEpilogue::kNone) matmul_cpu(q);
        if (c.e == MatmulEpilogue::kBias) matmul_bias_cpu(q);
        if (c.e == MatmulEpilogue::kResidual) matmul_residual_cpu(q);
      };
      run(p);
      SummaryBuffers got(c.m, c.n, tile_tokens, 9), want(c.m, c.n, tile_tokens, 9);
      p.y = y.data();
      p.summaries = got.view();
      run(p);
      EXPECT_TRUE(all_equal(y, y_ref));
      summarize_logit_tiles_cpu(y_ref.data(), DType::kF32, c.m, c.n, stride, want.view());
      EXPECT_EQ(got.words, want.words);
      EXPECT_EQ(got.counts, want.counts);
      for (const uint64_t count : want.counts) EXPECT_GE(logit_tile::nonfinite_count(count, 9), 2u);
    }
  }
}

TEST(MatmulTest, LogitTileSummariesRejectWhatTheyCannotDescribe) {
  std::vector<float> x(2 * 8, 1.0f), w(6 * 8, 1.0f), y(2 * 6), gate_up(2 * 6);
  SummaryBuffers buffers(2, 6, 4, 3);
  MatmulParams p = params_for(x.data(), w.data(), DType::kF32, y.data(), 2, 6, 8, 6);
  EXPECT_EQ(matmul_summaries_unsupported_reason(p), nullptr);  // off
  p.summaries = buffers.view();
  EXPECT_EQ(matmul_summaries_unsupported_reason(p), nullptr);
  MatmulParams q = p;
  q.summaries.epoch = nullptr;
  EXPECT_DEATH(matmul_cpu(q), "need their words, row counts and epoch");
  for (const int64_t tile_tokens : {0, 5000}) {
    q = p;
    q.summaries.tile_tokens = tile_tokens;
    EXPECT_DEATH(matmul_cpu(q), "tile_tokens must be in");
  }
  q = p;
  q.summaries.tile_tokens = 1;
  q.n = kLogitTileMaxTiles + 1;  // more tiles than the sampler keeps on chip
  EXPECT_NE(matmul_summaries_unsupported_reason(q), nullptr);
  // The SwiGLU and RoPE epilogues' y is no row of logits.
  q = p;
  q.n = 12;
  q.y_row_stride = 6;
  q.swiglu = true;
  q.gate_up = gate_up.data();
  EXPECT_EQ(matmul_swiglu_unsupported_reason(q, MatmulEpilogue::kNone), nullptr);
  EXPECT_DEATH(matmul_cpu(q), "plain, bias or residual epilogue only");
  q = p;
  q.qkv_rope = true;
  EXPECT_NE(matmul_summaries_unsupported_reason(q), nullptr);
}

TEST(MatmulSkinnySummaries, FusedForWholeColumnBlocksAndNeverSplit) {
  // The skinny CUDA kernel's plan (pure host functions): it writes the summaries itself where a
  // tile is whole 16-column blocks, and a launch with them keeps K whole (only its unsplit
  // epilogue writes them), as for Qwen2.5-0.5B's down projection, which splits without them.
  MatmulParams p;
  p.n = 896;
  p.k = 4864;
  SummaryBuffers buffers(1, p.n, 16, 2);
  EXPECT_FALSE(matmul_skinny_fuses_summaries(p));
  EXPECT_FALSE(matmul_skinny_no_split(p));
  EXPECT_GT(matmul_skinny_launch(1, p.n, p.k, 132, 0, matmul_skinny_no_split(p)).splits, 1);
  p.summaries = buffers.view();
  EXPECT_TRUE(matmul_skinny_no_split(p));
  EXPECT_EQ(matmul_skinny_launch(1, p.n, p.k, 132, 0, matmul_skinny_no_split(p)).splits, 1);
  for (const int64_t tile_tokens : {16, 128, 4096}) {
    p.summaries.tile_tokens = tile_tokens;
    EXPECT_TRUE(matmul_skinny_fuses_summaries(p)) << tile_tokens;
  }
  for (const int64_t tile_tokens : {1, 8, 24, 37}) {
    p.summaries.tile_tokens = tile_tokens;
    EXPECT_FALSE(matmul_skinny_fuses_summaries(p)) << tile_tokens;
  }
}

TEST(MatmulSkinnySummaries, TileReciprocalDividesEveryColumnOfARow) {
  // The epilogue's (column · m) >> 40 for column / tile_tokens: every tile size the skinny kernel
  // fuses (multiples of 16 up to kLogitTileMaxTokens), at each tile's first and last column and
  // the largest column a row of kLogitTileMaxTiles tiles can have.
  for (int64_t d = 16; d <= kLogitTileMaxTokens; d += 16) {
    const uint64_t m = matmul_skinny_tile_reciprocal(d);
    const int64_t last = std::min<int64_t>(kLogitTileMaxTiles * d, int64_t{1} << 26) - 1;
    std::vector<int64_t> tiles = {0, 1, 7};
    for (int64_t tile = std::max<int64_t>(0, (last + 1) / d - 64); tile < (last + 1) / d; ++tile)
      tiles.push_back(tile);
    for (const int64_t tile : tiles) {
      for (const int64_t col : {tile * d, tile * d + d - 1}) {
        ASSERT_EQ(static_cast<int64_t>((static_cast<uint64_t>(col) * m) >> 40), col / d)
            << "column " << col << " in tiles of " << d;
      }
    }
    ASSERT_EQ(static_cast<int64_t>((static_cast<uint64_t>(last) * m) >> 40), last / d) << d;
  }
}

TEST(MatmulCudaMBucket, NextPowerOfTwo) {
  // The CUDA backend's algorithm buckets (a pure host heuristic, so tested here).
  EXPECT_EQ(matmul_cuda_m_bucket(0), 1);
  EXPECT_EQ(matmul_cuda_m_bucket(1), 1);
  EXPECT_EQ(matmul_cuda_m_bucket(2), 2);
  EXPECT_EQ(matmul_cuda_m_bucket(3), 4);
  EXPECT_EQ(matmul_cuda_m_bucket(17), 32);
  EXPECT_EQ(matmul_cuda_m_bucket(64), 64);
  EXPECT_EQ(matmul_cuda_m_bucket(733), 1024);
  EXPECT_EQ(matmul_cuda_m_bucket(8192), 8192);
  EXPECT_EQ(matmul_cuda_m_bucket(8193), 16384);
  for (int64_t m = 1; m <= 5000; ++m) {
    const int64_t b = matmul_cuda_m_bucket(m);
    ASSERT_TRUE(b >= m && (b & (b - 1)) == 0 && (b == 1 || b / 2 < m)) << "m " << m;
  }
}

TEST(MatmulMeasureChain, ShortWeightsChainOverColdCopiesLargeOnesRunAlone) {
  // The CUDA selection's timing plan (a pure host function, so tested here), at an H100's / H200's
  // 50 MiB of L2 with the measurement's scratch of twice that.
  constexpr int64_t kL2 = int64_t{50} << 20;
  constexpr int64_t kScratch = 2 * kL2;
  const auto check_cold = [&](const MatmulMeasureChain& c, int64_t bytes, int64_t scratch) {
    ASSERT_GE(c.calls, 2);
    ASSERT_LE(c.calls, kMatmulMeasureMaxChainCalls);
    EXPECT_LE(c.calls * bytes, kMatmulMeasureChainBytes);
    // Every copy fits the scratch with W's offset within an alignment unit.
    EXPECT_GE(c.copy_stride, bytes + kMatmulMeasureCopyAlign - 1);
    EXPECT_EQ(c.copy_stride % kMatmulMeasureCopyAlign, 0);
    EXPECT_LE(c.copies * c.copy_stride, scratch);
    // A copy is read again only after L2's size of the others.
    EXPECT_GE((c.copies - 1) * bytes, kL2);
  };
  // Qwen2.5-0.5B's q|k|v (1152 x 896 bf16): eight calls over ~50 copies.
  const int64_t qkv = 1152 * 896 * 2;
  const MatmulMeasureChain q = matmul_measure_chain(qkv, kL2, kScratch);
  check_cold(q, qkv, kScratch);
  EXPECT_EQ(q.calls, 8);
  EXPECT_EQ(q.copies, kScratch / q.copy_stride);
  // Its gate_up (9728 x 896): two calls (48 MiB of weights at most), over the six copies that fit.
  const int64_t gate_up = 9728 * 896 * 2;
  const MatmulMeasureChain g = matmul_measure_chain(gate_up, kL2, kScratch);
  check_cold(g, gate_up, kScratch);
  EXPECT_EQ(g.calls, 2);
  EXPECT_EQ(g.copies, 6);
  // A weight that needs only a few copies takes no more than 2 L2 + 1 of them.
  const MatmulMeasureChain tiny = matmul_measure_chain(4096, kL2, int64_t{1} << 40);
  check_cold(tiny, 4096, int64_t{1} << 40);
  EXPECT_EQ(tiny.copies, 2 * kL2 / 4096 + 1);
  // Llama-3-8B's o (32 MiB) and anything larger: one call after a flush, as before chains.
  for (const int64_t bytes : {int64_t{4096} * 4096 * 2, int64_t{6144} * 4096 * 2,
                              int64_t{151936} * 896 * 2, kMatmulMeasureChainBytes + 1}) {
    const MatmulMeasureChain c = matmul_measure_chain(bytes, kL2, kScratch);
    EXPECT_EQ(c.calls, 1) << bytes;
    EXPECT_EQ(c.copies, 0) << bytes;
  }
  // No scratch, or too little for the copies to leave L2 between reads: one call.
  for (const int64_t scratch : {int64_t{0}, kL2, kL2 / 2}) {
    const MatmulMeasureChain c = matmul_measure_chain(gate_up, kL2, scratch);
    EXPECT_EQ(c.calls, 1) << scratch;
    EXPECT_EQ(c.copies, 0) << scratch;
  }
  // A weight so small that the copies the scratch holds (each a whole alignment unit or more)
  // hold less than L2 of it: its copies would stay in L2, so one call after a flush.
  const MatmulMeasureChain small = matmul_measure_chain(48, kL2, kScratch);
  EXPECT_EQ(small.calls, 1);
  EXPECT_EQ(small.copies, 0);
  // Degenerate sizes: nothing to chain.
  EXPECT_EQ(matmul_measure_chain(0, kL2, kScratch).calls, 1);
  EXPECT_EQ(matmul_measure_chain(-5, kL2, kScratch).copies, 0);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulTest,
                         ::testing::Combine(::testing::ValuesIn(kMatmulTestShapes),
                                            ::testing::Values(DType::kF32, DType::kF16,
                                                              DType::kBF16)));

}  // namespace
}  // namespace roofline
