// qkv_rope_cuda bandwidth on the GPU, bf16 activations and cache, llama3-8b heads (32 q, 8 kv,
// head_dim 128), without and with the q/k norm (Qwen3), beside the 4.28 TB/s copy ceiling. Bytes
// are the minimum the op must move: read q|k|v (T·(32 + 2·8)·128 elements), write q (T·32·128)
// and K, V into the cache (2·T·8·128), plus positions and slots; 201 MB at 8192 tokens. Slots are
// contiguous, as in a prefill. Inputs and outputs rotate through enough copies to defeat L2.
// Every kernel variant (qkv_rope_cuda_variant.h) is timed, one line each; "default" marks the
// launcher's. Target (issue): >= 75% of the ceiling at 8192 tokens. Prints a message and exits 0
// without a GPU.
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "ops/qkv_rope/qkv_rope.h"
#include "ops/qkv_rope/qkv_rope_cuda_variant.h"
#include "ops/testing/gpu_bench_buffers.h"
#include "ops/testing/gpu_bench_util.h"

namespace roofline {
namespace {

constexpr int64_t kHeads = 32, kKvHeads = 8, kHeadDim = 128, kBlockSize = 16;

struct Buffers {
  bench::GpuArray qkv, q_out, k_cache, v_cache;
};

void run_shape(int64_t tokens, bool qk_norm) {
  const int64_t row = (kHeads + 2 * kKvHeads) * kHeadDim;
  const int64_t num_blocks = (tokens + kBlockSize - 1) / kBlockSize;
  const size_t qkv_bytes = static_cast<size_t>(tokens * row * 2);
  const size_t q_bytes = static_cast<size_t>(tokens * kHeads * kHeadDim * 2);
  const size_t cache_bytes = static_cast<size_t>(num_blocks * kBlockSize * kKvHeads * kHeadDim * 2);
  const int copies = bench::rotation_count(qkv_bytes + q_bytes + 2 * cache_bytes);
  std::vector<Buffers> sets;
  for (int i = 0; i < copies; ++i) {
    Buffers b{bench::GpuArray(qkv_bytes), bench::GpuArray(q_bytes), bench::GpuArray(cache_bytes),
              bench::GpuArray(cache_bytes)};
    b.qkv.fill_bf16(-2.0f, 2.0f, 1 + i);
    sets.push_back(std::move(b));
  }
  // Positions 1000.. (a prefill continuing a sequence), slots 0.. in order.
  std::vector<int32_t> positions(static_cast<size_t>(tokens));
  std::iota(positions.begin(), positions.end(), 1000);
  std::vector<int64_t> slots(static_cast<size_t>(tokens));
  std::iota(slots.begin(), slots.end(), 0);
  std::vector<float> inv_freq(kHeadDim / 2);
  for (size_t i = 0; i < inv_freq.size(); ++i)
    inv_freq[i] = 1.0f / std::pow(500000.0f, static_cast<float>(2 * i) / kHeadDim);
  bench::GpuArray d_positions(positions.size() * 4), d_slots(slots.size() * 8), d_inv_freq(256 * 4);
  ROOFLINE_CUDA_CHECK(cudaMemcpy(d_positions.get(), positions.data(), positions.size() * 4,
                                 cudaMemcpyHostToDevice));
  ROOFLINE_CUDA_CHECK(
      cudaMemcpy(d_slots.get(), slots.data(), slots.size() * 8, cudaMemcpyHostToDevice));
  ROOFLINE_CUDA_CHECK(
      cudaMemcpy(d_inv_freq.get(), inv_freq.data(), inv_freq.size() * 4, cudaMemcpyHostToDevice));
  bench::GpuArray norm_weight(kHeadDim * 2);
  norm_weight.fill_bf16(0.5f, 1.5f, 9);

  for (int v = 0; v < kQkvRopeNumVariants; ++v) {
    const double ms = bench::median_ms([&](int i) {
      const Buffers& b = sets[static_cast<size_t>(i % copies)];
      QkvRopeParams p;
      p.qkv = b.qkv.get();
      p.q_out = b.q_out.get();
      p.positions = d_positions.get<int32_t>();
      p.slot_mapping = d_slots.get<int64_t>();
      p.k_cache = b.k_cache.get();
      p.v_cache = b.v_cache.get();
      p.inv_freq = d_inv_freq.get<float>();
      if (qk_norm) {
        p.q_norm_weight = norm_weight.get();
        p.k_norm_weight = norm_weight.get();
        p.norm_weight_dtype = DType::kBF16;
      }
      p.num_tokens = tokens;
      p.num_heads = kHeads;
      p.num_kv_heads = kKvHeads;
      p.head_dim = kHeadDim;
      p.block_size = kBlockSize;
      p.num_blocks = num_blocks;
      p.dtype = DType::kBF16;
      p.kv_dtype = DType::kBF16;
      qkv_rope_cuda_variant(p, v, nullptr);
    });
    const double bytes = static_cast<double>(qkv_bytes + q_bytes) +
                         static_cast<double>(tokens * 2 * kKvHeads * kHeadDim * 2) +
                         static_cast<double>(tokens * (4 + 8));
    const std::string name = std::string("qkv_rope bf16 32/8x128 ") + std::to_string(tokens) +
                             (qk_norm ? " tokens, q/k norm " : " tokens ") +
                             kQkvRopeVariants[v].name +
                             (v == kQkvRopeDefaultVariant ? " (default)" : "");
    bench::print_bandwidth(name.c_str(), ms, bytes);
  }
}

}  // namespace
}  // namespace roofline

int main() {
  if (!roofline::bench::gpu_present()) {
    std::printf("qkv_rope_cuda_bench: no CUDA device, skipped\n");
    return 0;
  }
  roofline::run_shape(8192, false);  // the target shape
  roofline::run_shape(8192, true);
  roofline::run_shape(1, false);  // decode, for information: launch latency dominates
  roofline::run_shape(64, false);
  return 0;
}
