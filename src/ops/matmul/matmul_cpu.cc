// matmul_cpu / matmul_bias_cpu / matmul_residual_cpu: y[i][j] = sum_k x[i][k] * W[j][k]
// (+ bias[j] | + residual[i][j]), fp32 accumulation. With the RMSNorm prologue (p.norm_weight),
// rms_norm_cpu writes the normalised rows to p.normed first and the GEMM reads them: the same
// arithmetic as the unfused rms_norm and matmul the CPU backend ran before the fusion. The SwiGLU
// and RoPE epilogues likewise write the product (to p.gate_up, p.y) and run silu_mul_cpu /
// qkv_rope_cpu over it. With logit tile summaries (p.summaries), summarize_logit_tiles_cpu runs
// over y once it is written.
//
// The hot loop of the CPU backend. Work is split over n (output columns) in tiles of kColTile
// weight rows; a thread converts its tile to f32 once (f16/bf16 weights) into a thread-local
// buffer, then reuses it for all m rows of x. The micro-kernel dots one x row with kColBlock weight
// rows at a time, so each x element loaded feeds kColBlock products; every dot keeps kLanes float
// partial sums, a fixed-width inner loop that -O2 turns into SIMD without reassociating a single
// scalar sum (which it may not do without -ffast-math).
// Bound: decode (m = 1) reads n·k·dtype_size bytes of weights for 2·n·k FLOPs: memory bound;
// prefill is compute bound.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "ops/matmul/matmul.h"

namespace roofline {

namespace {

constexpr int kLanes = 8;  // two SSE / one AVX register of partial sums per dot
constexpr int kColBlock =
    4;  // weight rows per micro-kernel call: 4·8 accumulators fit in registers
constexpr int64_t kColTile = 16;  // weight rows converted per tile: 16·k floats stay in L2
// Multiply-adds below which a tile is too small to hand to another thread.
constexpr int64_t kMinMacsPerChunk = 1 << 16;

static_assert(kColBlock == 4, "dot_block below is written out for four weight rows");

// out[c] = dot(x, w + c·k) for c < kColBlock.
void dot_block(const float* x, const float* w, int64_t k, float* out) {
  float acc[kColBlock][kLanes] = {};
  const float* w0 = w;
  const float* w1 = w + k;
  const float* w2 = w + 2 * k;
  const float* w3 = w + 3 * k;
  int64_t i = 0;
  for (; i + kLanes <= k; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const float xv = x[i + l];
      acc[0][l] += xv * w0[i + l];
      acc[1][l] += xv * w1[i + l];
      acc[2][l] += xv * w2[i + l];
      acc[3][l] += xv * w3[i + l];
    }
  }
  for (; i < k; ++i) {
    acc[0][0] += x[i] * w0[i];
    acc[1][0] += x[i] * w1[i];
    acc[2][0] += x[i] * w2[i];
    acc[3][0] += x[i] * w3[i];
  }
  for (int c = 0; c < kColBlock; ++c) {
    float s = 0.0f;
    for (int l = 0; l < kLanes; ++l) s += acc[c][l];
    out[c] = s;
  }
}

// Weight rows to f32, in blocks of 8 so the loops vectorise (a scalar conversion would cost more
// than the dot products it feeds). bf16 is a 16-bit shift. f16 takes the shift-and-rebias path
// when a block holds only normal numbers and zeros, the exact scalar conversion otherwise.
void bf16_to_f32(const uint16_t* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint32_t bits[8];
    for (int l = 0; l < 8; ++l) bits[l] = static_cast<uint32_t>(src[i + l]) << 16;
    std::memcpy(dst + i, bits, sizeof(bits));
  }
  for (; i < n; ++i) dst[i] = bf16_bits_to_f32(src[i]);
}

void f16_to_f32(const uint16_t* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint32_t bits[8];
    uint32_t special = 0;
    for (int l = 0; l < 8; ++l) {
      const uint32_t h = src[i + l];
      const uint32_t exp = h & 0x7c00u;
      const uint32_t magnitude = h & 0x7fffu;
      // Subnormal (exponent 0, mantissa != 0) or inf/NaN (exponent 31) need the exact path.
      special |=
          static_cast<uint32_t>(exp == 0x7c00u) | static_cast<uint32_t>(exp == 0 && magnitude != 0);
      const uint32_t rebias = magnitude != 0 ? (112u << 23) : 0u;  // 127 - 15, zero stays zero
      bits[l] = ((h & 0x8000u) << 16) | ((magnitude << 13) + rebias);
    }
    if (special) {
      for (int l = 0; l < 8; ++l) dst[i + l] = f16_bits_to_f32(src[i + l]);
    } else {
      std::memcpy(dst + i, bits, sizeof(bits));
    }
  }
  for (; i < n; ++i) dst[i] = f16_bits_to_f32(src[i]);
}

void weights_to_f32(const void* src, DType dtype, int64_t n, float* dst) {
  switch (dtype) {
    case DType::kBF16:
      bf16_to_f32(static_cast<const uint16_t*>(src), n, dst);
      return;
    case DType::kF16:
      f16_to_f32(static_cast<const uint16_t*>(src), n, dst);
      return;
    default:
      convert_to_f32(src, dtype, n, dst);
      return;
  }
}

float dot(const float* x, const float* w, int64_t k) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= k; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += x[i + l] * w[i + l];
  }
  for (; i < k; ++i) acc[0] += x[i] * w[i];
  float s = 0.0f;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

void matmul_impl(const MatmulParams& p, MatmulEpilogue epilogue);

// The prologue: normalise x into p.normed, then the GEMM over it.
void matmul_with_norm(const MatmulParams& p, MatmulEpilogue epilogue) {
  ROOFLINE_CHECK_MSG(p.normed != nullptr, "the matmul's RMSNorm prologue needs params.normed");
  ROOFLINE_CHECK(p.dtype == DType::kF32);
  if (p.m == 0) return;
  rms_norm_cpu(matmul_prologue_norm(p));
  matmul_impl(matmul_prologue_product(p), epilogue);
}

void matmul_impl(const MatmulParams& p, MatmulEpilogue epilogue) {
  const char* no_summaries = matmul_summaries_unsupported_reason(p);
  ROOFLINE_CHECK_MSG(no_summaries == nullptr, no_summaries);
  if (p.norm_weight != nullptr) return matmul_with_norm(p, epilogue);
  if (p.swiglu) {
    const char* unsupported = matmul_swiglu_unsupported_reason(p, epilogue);
    ROOFLINE_CHECK_MSG(unsupported == nullptr, unsupported);
    matmul_impl(matmul_swiglu_product(p), epilogue);
    silu_mul_cpu(matmul_swiglu_activation(p));
    return;
  }
  if (p.qkv_rope) {
    const char* unsupported = matmul_rope_unsupported_reason(p, epilogue);
    ROOFLINE_CHECK_MSG(unsupported == nullptr, unsupported);
    matmul_impl(matmul_rope_product(p), epilogue);
    qkv_rope_cpu(matmul_rope_pass(p));
    return;
  }
  const bool with_bias = epilogue == MatmulEpilogue::kBias;
  const bool with_residual = epilogue == MatmulEpilogue::kResidual;
  ROOFLINE_CHECK(p.m >= 0 && p.n > 0 && p.k > 0);
  ROOFLINE_CHECK(p.y_row_stride >= p.n);
  ROOFLINE_CHECK(is_float_dtype(p.w_dtype));
  ROOFLINE_CHECK(p.dtype == DType::kF32);  // the CPU backend keeps activations in f32
  if (p.m == 0) return;
  ROOFLINE_CHECK(p.x != nullptr && p.w != nullptr && p.y != nullptr);
  std::vector<float> bias;
  if (with_bias) {
    ROOFLINE_CHECK(p.bias != nullptr && is_float_dtype(p.bias_dtype));
    bias.resize(static_cast<size_t>(p.n));
    convert_to_f32(p.bias, p.bias_dtype, p.n, bias.data());
  }
  ROOFLINE_CHECK(!with_residual || p.residual != nullptr);
  const auto* residual_rows = static_cast<const float*>(p.residual);
  const int64_t num_tiles = (p.n + kColTile - 1) / kColTile;
  const int64_t macs_per_tile = p.m * p.k * kColTile;
  const int64_t min_tiles = std::max<int64_t>(1, kMinMacsPerChunk / macs_per_tile);
  const auto* w_bytes = static_cast<const uint8_t*>(p.w);
  const int64_t w_row_bytes = p.k * dtype_size_bytes(p.w_dtype);
  const auto* x_rows = static_cast<const float*>(p.x);
  auto* y_rows = static_cast<float*>(p.y);

  ThreadPool::global().parallel_for(
      num_tiles, min_tiles, [&](int64_t tile_begin, int64_t tile_end) {
        // One buffer per thread, grown once to the largest k seen: no allocation per call.
        thread_local std::vector<float> converted;
        for (int64_t tile = tile_begin; tile < tile_end; ++tile) {
          const int64_t j0 = tile * kColTile;
          const int64_t cols = std::min(kColTile, p.n - j0);
          const float* w;
          if (p.w_dtype == DType::kF32) {
            w = static_cast<const float*>(p.w) + j0 * p.k;
          } else {
            converted.resize(static_cast<size_t>(kColTile * p.k));
            weights_to_f32(w_bytes + j0 * w_row_bytes, p.w_dtype, cols * p.k, converted.data());
            w = converted.data();
          }
          for (int64_t i = 0; i < p.m; ++i) {
            const float* x = x_rows + i * p.k;
            float* y = y_rows + i * p.y_row_stride + j0;
            // The residual may be y itself: the dots go to a local tile first, and each residual
            // element is read before the same element of y is written.
            float dots[kColTile];
            float* out = with_residual ? dots : y;
            int64_t c = 0;
            for (; c + kColBlock <= cols; c += kColBlock) dot_block(x, w + c * p.k, p.k, out + c);
            for (; c < cols; ++c) out[c] = dot(x, w + c * p.k, p.k);
            if (with_bias) {
              for (c = 0; c < cols; ++c) y[c] += bias[static_cast<size_t>(j0 + c)];
            }
            if (with_residual) {
              const float* r = residual_rows + i * p.y_row_stride + j0;
              for (c = 0; c < cols; ++c) y[c] = dots[c] + r[c];
            }
          }
        }
      });
  if (p.summaries.words != nullptr)
    summarize_logit_tiles_cpu(p.y, p.dtype, p.m, p.n, p.y_row_stride, p.summaries);
}

}  // namespace

void matmul_cpu(const MatmulParams& p) { matmul_impl(p, MatmulEpilogue::kNone); }

void matmul_bias_cpu(const MatmulParams& p) { matmul_impl(p, MatmulEpilogue::kBias); }

void matmul_residual_cpu(const MatmulParams& p) { matmul_impl(p, MatmulEpilogue::kResidual); }

}  // namespace roofline
