// rms_norm_cpu and rms_norm_residual_cpu, computed as Hugging Face's LlamaRMSNorm does in fp32:
//   variance = mean(x^2); y = (x * rsqrt(variance + eps)) * weight
// (x scaled first, then the weight, the order torch multiplies in). The sum of squares is kept in
// 8 float lanes: fp32 accumulation like the GPU kernel, and a shape the compiler can vectorise.
// Memory bound: reads 4·hidden bytes and writes 4·hidden per row (the fused form reads and writes
// the residual too), parallel over rows.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "ops/rms_norm/rms_norm.h"

namespace roofline {

namespace {

constexpr int kLanes = 8;

float sum_of_squares(const float* x, int64_t n) {
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += x[i + l] * x[i + l];
  }
  for (; i < n; ++i) lanes[0] += x[i] * x[i];
  float sum = 0.0f;
  for (int l = 0; l < kLanes; ++l) sum += lanes[l];
  return sum;
}

// out = (x * inv_rms) * weight. x may alias out: each element is read before it is written.
void scale_row(const float* x, const float* weight, float inv_rms, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * inv_rms) * weight[i];
}

float inv_rms(float sum_sq, int64_t hidden, float eps) {
  return 1.0f / std::sqrt(sum_sq / static_cast<float>(hidden) + eps);
}

std::vector<float> weight_as_f32(const void* weight, DType dtype, int64_t hidden) {
  ROOFLINE_CHECK(is_float_dtype(dtype));
  std::vector<float> w(static_cast<size_t>(hidden));
  convert_to_f32(weight, dtype, hidden, w.data());
  return w;
}

// Rows per chunk: waking the pool costs tens of microseconds, as long as streaming ~256 KB.
int64_t min_rows_per_chunk(int64_t hidden) { return std::max<int64_t>(1, 65536 / hidden); }

}  // namespace

void rms_norm_cpu(const RmsNormParams& p) {
  ROOFLINE_CHECK(p.num_rows >= 0 && p.hidden > 0);
  ROOFLINE_CHECK_MSG(p.dtype == DType::kF32, "the CPU backend computes in f32");
  if (p.num_rows == 0) return;
  ROOFLINE_CHECK(p.x != nullptr && p.weight != nullptr && p.out != nullptr);
  const std::vector<float> w = weight_as_f32(p.weight, p.weight_dtype, p.hidden);
  ThreadPool::global().parallel_for(
      p.num_rows, min_rows_per_chunk(p.hidden), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const float* x = static_cast<const float*>(p.x) + r * p.hidden;
          const float scale = inv_rms(sum_of_squares(x, p.hidden), p.hidden, p.eps);
          scale_row(x, w.data(), scale, p.hidden, static_cast<float*>(p.out) + r * p.hidden);
        }
      });
}

void rms_norm_residual_cpu(const RmsNormResidualParams& p) {
  ROOFLINE_CHECK(p.num_rows >= 0 && p.hidden > 0);
  ROOFLINE_CHECK_MSG(p.dtype == DType::kF32, "the CPU backend computes in f32");
  if (p.num_rows == 0) return;
  ROOFLINE_CHECK(p.x != nullptr && p.residual_in != nullptr && p.residual_out != nullptr &&
                 p.weight != nullptr && p.out != nullptr);
  const std::vector<float> w = weight_as_f32(p.weight, p.weight_dtype, p.hidden);
  ThreadPool::global().parallel_for(
      p.num_rows, min_rows_per_chunk(p.hidden), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const float* x = static_cast<const float*>(p.x) + r * p.hidden;
          const float* res_in = static_cast<const float*>(p.residual_in) + r * p.hidden;
          float* res_out = static_cast<float*>(p.residual_out) + r * p.hidden;
          // The sum is written first and normalised from res_out, so residual_out may alias
          // residual_in and out may alias x.
          for (int64_t i = 0; i < p.hidden; ++i) res_out[i] = res_in[i] + x[i];
          const float scale = inv_rms(sum_of_squares(res_out, p.hidden), p.hidden, p.eps);
          scale_row(res_out, w.data(), scale, p.hidden, static_cast<float*>(p.out) + r * p.hidden);
        }
      });
}

}  // namespace roofline
