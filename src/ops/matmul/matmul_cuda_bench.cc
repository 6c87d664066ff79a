// matmul_cuda benchmark (bf16): Llama-3-8B's and Qwen2.5-0.5B's decode GEMMs at m = 1, 2, 4, 8,
// 16, 32, 64 as weight bandwidth (weight bytes / time, the memory-bound ceiling) beside the
// 4.28 TB/s copy ceiling, for
// each implementation in one run — the skinny kernel forced ("skinny"), cuBLASLt forced ("cublas"),
// the wide kernel forced ("wide") and the measured selection ("selected") — then a line of skinny
// times per split count (for tuning matmul_skinny.h; "*" marks matmul_skinny_launch's choice), and
// for o and down at m = 1, 8 the residual epilogue on both implementations; the RMSNorm prologue
// (the qkv and gate_up GEMMs of Llama-3-8B and Qwen2.5-0.5B at m = 1, 8) on both (the skinny
// kernel's in warp slices and in block copies), cuBLASLt's time
// including its rms_norm kernel, beside the same GEMM without it, for gate_up the prologue with the
// SwiGLU epilogue (cuBLASLt:
// + its silu_mul kernel) and for qkv the prologue with the RoPE epilogue (cuBLASLt: + its qkv_rope
// kernel; one token's K and V into the cache). Then one prefill of m = 8192 tokens per weight as
// TFLOP/s beside the 783 TFLOP/s bf16 GEMM ceiling. `matmul_cuda_bench [decode] [prologue]
// [prefill]` runs only the sections named (all by default), `verbose` adds the selector's
// measurements (the times its choices rest on); `shape N K`, `wide [N K M]`, `mlp`, `summaries`
// and `trace [wide | qwen]` are the modes below (run_shape, run_wide, run_mlp, run_summaries,
// run_trace); anything else gets a usage line. Method (as HARDWARE.md's cuBLAS table): 16
// back-to-back calls captured in one CUDA graph (launch latency excluded), each on the next of
// `rotation_count` weight copies so L2 does not serve the weights; median of 50 graph launches
// after warm-up (20 for the split sweep).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda_check.h"
#include "core/log.h"
#include "ops/matmul/matmul.h"
#include "ops/matmul/matmul_shapes.h"
#include "ops/matmul/matmul_skinny.h"
#include "ops/matmul/matmul_wide.h"
#include "ops/testing/gpu_bench_buffers.h"
#include "ops/testing/gpu_bench_util.h"

namespace roofline {
namespace {

constexpr int kCallsPerGraph = 16;

using bench::DeviceMemory;
using bench::random_bf16;

// A random bf16 x [m, k] and a y [m, n] on the device, and the plain product's parameters over
// them (the caller sets W call by call).
struct DecodeProblem {
  DeviceMemory x, y;
  MatmulParams p;
  DecodeProblem(int64_t m, int64_t n, int64_t k)
      : x(static_cast<size_t>(m * k) * 2), y(static_cast<size_t>(m * n) * 2) {
    const std::vector<uint16_t> x_host = random_bf16(m * k, 11);
    ROOFLINE_CUDA_CHECK(
        cudaMemcpy(x.ptr, x_host.data(), x_host.size() * 2, cudaMemcpyHostToDevice));
    p.x = x.ptr;
    p.w_dtype = DType::kBF16;
    p.y = y.ptr;
    p.dtype = DType::kBF16;
    p.m = m;
    p.n = n;
    p.k = k;
    p.y_row_stride = n;
  }
};

// Median ms of one call of y[m, n] = x · Wᵀ (+ y: the residual epilogue in place, with
// `residual`), over weight copies rotated call by call.
// With `norm`, each call has the RMSNorm prologue; with `swiglu`, the SwiGLU epilogue (W's n rows
// are gate then up, y the [m, n / 2] activation); with `rope` (heads, KV heads, head dim), the
// RoPE epilogue (q to its buffer, K and V into a cache slot per token); with
// `summary_tile_tokens` > 0, the logit tile summaries of y in tiles of that many tokens (one
// epoch for all calls: a word's atomicMax costs the same whether it wins or not).
struct RopeHeads {
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
};
// With trace_names (trace builds, the skinny kernel), also captures the 16 calls once more with
// the phase recorder armed, replays that graph and prints the last replay's phases.
double time_matmul(MatmulCudaContext& ctx, cudaStream_t stream, int64_t m, int64_t n, int64_t k,
                   const std::vector<const DeviceMemory*>& weights, int iters = 50,
                   bool residual = false, bool norm = false, bool swiglu = false,
                   RopeHeads rope = {}, int64_t summary_tile_tokens = 0,
                   [[maybe_unused]] const std::vector<std::string>* trace_names = nullptr,
                   [[maybe_unused]] bool trace_wide = false) {
  DecodeProblem problem(m, n, k);
  MatmulParams& p = problem.p;
  const DeviceMemory& y = problem.y;
  if (residual) {
    ROOFLINE_CUDA_CHECK(cudaMemset(y.ptr, 0, static_cast<size_t>(m * n) * 2));  // finite sums
    p.residual = y.ptr;
  }
  const std::vector<uint16_t> norm_host = random_bf16(k, 12);
  DeviceMemory norm_weight(norm_host.size() * 2), normed(static_cast<size_t>(m * k) * 2);
  if (norm) {
    ROOFLINE_CUDA_CHECK(cudaMemcpy(norm_weight.ptr, norm_host.data(), norm_host.size() * 2,
                                   cudaMemcpyHostToDevice));
    p.norm_weight = norm_weight.ptr;
    p.norm_weight_dtype = DType::kBF16;
    p.normed = normed.ptr;
  }
  DeviceMemory gate_up(swiglu ? static_cast<size_t>(m * n) * 2 : 16);
  if (swiglu) {
    p.swiglu = true;
    p.gate_up = gate_up.ptr;
    p.y_row_stride = n / 2;
  }
  const bool with_rope = rope.head_dim > 0;
  const int64_t kv = rope.kv_heads * rope.head_dim;
  DeviceMemory q_out(with_rope ? static_cast<size_t>(m * rope.heads * rope.head_dim) * 2 : 16);
  DeviceMemory k_cache(with_rope ? static_cast<size_t>(m * kv) * 2 : 16);
  DeviceMemory v_cache(with_rope ? static_cast<size_t>(m * kv) * 2 : 16);
  DeviceMemory positions(static_cast<size_t>(m) * 4), slots(static_cast<size_t>(m) * 8);
  DeviceMemory inv_freq(with_rope ? static_cast<size_t>(rope.head_dim / 2) * 4 : 16);
  if (with_rope) {
    std::vector<int32_t> pos(static_cast<size_t>(m));
    std::vector<int64_t> slot(static_cast<size_t>(m));
    std::vector<float> freq(static_cast<size_t>(rope.head_dim / 2));
    for (int64_t t = 0; t < m; ++t) {
      pos[static_cast<size_t>(t)] = static_cast<int32_t>(512 + t);  // a decode step's positions
      slot[static_cast<size_t>(t)] = t;
    }
    for (size_t i = 0; i < freq.size(); ++i)
      freq[i] = std::pow(500000.0f, -2.0f * static_cast<float>(i) / rope.head_dim);
    ROOFLINE_CUDA_CHECK(
        cudaMemcpy(positions.ptr, pos.data(), pos.size() * 4, cudaMemcpyHostToDevice));
    ROOFLINE_CUDA_CHECK(
        cudaMemcpy(slots.ptr, slot.data(), slot.size() * 8, cudaMemcpyHostToDevice));
    ROOFLINE_CUDA_CHECK(
        cudaMemcpy(inv_freq.ptr, freq.data(), freq.size() * 4, cudaMemcpyHostToDevice));
    p.qkv_rope = true;
    p.rope.q_out = q_out.ptr;
    p.rope.k_cache = k_cache.ptr;
    p.rope.v_cache = v_cache.ptr;
    p.rope.positions = static_cast<const int32_t*>(positions.ptr);
    p.rope.slot_mapping = static_cast<const int64_t*>(slots.ptr);
    p.rope.inv_freq = static_cast<const float*>(inv_freq.ptr);
    p.rope.num_heads = rope.heads;
    p.rope.num_kv_heads = rope.kv_heads;
    p.rope.head_dim = rope.head_dim;
    p.rope.block_size = 1;
    p.rope.num_blocks = m;
    p.rope.kv_dtype = DType::kBF16;
  }
  const int64_t summary_tiles = summary_tile_tokens > 0 ? logit_tiles(n, summary_tile_tokens) : 1;
  DeviceMemory summary_words(static_cast<size_t>(m * summary_tiles) * 8),
      summary_counts(static_cast<size_t>(m) * 8), summary_epoch(4);
  if (summary_tile_tokens > 0) {
    const uint32_t epoch = 1;
    ROOFLINE_CUDA_CHECK(
        cudaMemset(summary_words.ptr, 0, static_cast<size_t>(m * summary_tiles) * 8));
    ROOFLINE_CUDA_CHECK(cudaMemset(summary_counts.ptr, 0, static_cast<size_t>(m) * 8));
    ROOFLINE_CUDA_CHECK(cudaMemcpy(summary_epoch.ptr, &epoch, 4, cudaMemcpyHostToDevice));
    p.summaries.words = static_cast<uint64_t*>(summary_words.ptr);
    p.summaries.nonfinite = static_cast<uint64_t*>(summary_counts.ptr);
    p.summaries.epoch = static_cast<const uint32_t*>(summary_epoch.ptr);
    p.summaries.tile_tokens = summary_tile_tokens;
  }
  bench::settle();
  auto call = [&](int i) {
    p.w = weights[static_cast<size_t>(i) % weights.size()]->ptr;
    if (residual) {
      matmul_residual_cuda(p, ctx, stream);
    } else {
      matmul_cuda(p, ctx, stream);
    }
  };
  for (size_t i = 0; i < weights.size(); ++i) call(static_cast<int>(i));  // choose the algorithm
  ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));

  cudaGraph_t graph;
  ROOFLINE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < kCallsPerGraph; ++i) call(i);
  ROOFLINE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  ROOFLINE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const double ms = bench::median_ms(
      [&](int) { ROOFLINE_CUDA_CHECK(cudaGraphLaunch(exec, stream)); }, 5, iters, stream);
  ROOFLINE_CUDA_CHECK(cudaGraphExecDestroy(exec));
  ROOFLINE_CUDA_CHECK(cudaGraphDestroy(graph));
#if defined(ROOFLINE_PHASE_TRACE)
  if (trace_names != nullptr) {
    // Record space for every block of the 16 calls (a persistent grid: at most two per SM).
    const int64_t capacity = int64_t{kCallsPerGraph} * 2 * bench::sm_count();
    DeviceMemory records(static_cast<size_t>(capacity * kPhaseTraceWords) * 8);
    ROOFLINE_CUDA_CHECK(
        cudaMemset(records.ptr, 0, static_cast<size_t>(capacity * kPhaseTraceWords) * 8));
    bench::settle();
    PhaseTraceRecorder& recorder =
        trace_wide ? matmul_wide_phase_trace() : matmul_skinny_phase_trace();
    recorder.arm(static_cast<uint64_t*>(records.ptr), capacity);
    cudaGraph_t traced;
    ROOFLINE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < kCallsPerGraph; ++i) call(i);
    ROOFLINE_CUDA_CHECK(cudaStreamEndCapture(stream, &traced));
    const auto launches = recorder.disarm();
    cudaGraphExec_t traced_exec;
    ROOFLINE_CUDA_CHECK(cudaGraphInstantiate(&traced_exec, traced, 0));
    for (int r = 0; r < 3; ++r) ROOFLINE_CUDA_CHECK(cudaGraphLaunch(traced_exec, stream));
    ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<uint64_t> host(static_cast<size_t>(capacity * kPhaseTraceWords));
    ROOFLINE_CUDA_CHECK(
        cudaMemcpy(host.data(), records.ptr, host.size() * 8, cudaMemcpyDeviceToHost));
    ROOFLINE_CUDA_CHECK(cudaGraphExecDestroy(traced_exec));
    ROOFLINE_CUDA_CHECK(cudaGraphDestroy(traced));
    if (launches.size() != static_cast<size_t>(kCallsPerGraph)) {
      std::printf("  (no phase records: the calls did not run the %s kernel alone)\n",
                  trace_wide ? "wide" : "skinny");
    } else {
      std::printf("%s",
                  phase_trace_report(phase_trace_analyse(host, launches), *trace_names).c_str());
    }
  }
#endif
  return ms / kCallsPerGraph;
}

// A context that runs every GEMM on `impl`.
std::unique_ptr<MatmulCudaContext> forced(MatmulImpl impl) {
  auto ctx = MatmulCudaContext::create();
  ctx->set_impl(impl);
  return ctx;
}

// The name the output gives the implementation a call ran on.
const char* impl_name(MatmulImpl impl) {
  return impl == MatmulImpl::kSkinny ? "skinny" : impl == MatmulImpl::kWide ? "wide" : "cublas";
}

// Copies of one random [n, k] bf16 weight, as many as rotating through them takes past L2.
struct RotatedWeights {
  std::vector<std::unique_ptr<DeviceMemory>> copies;
  std::vector<const DeviceMemory*> ptrs;
  RotatedWeights(int64_t n, int64_t k, uint64_t seed) {
    const size_t bytes = static_cast<size_t>(n * k) * 2;
    const std::vector<uint16_t> host = random_bf16(n * k, seed);
    for (int c = 0; c < bench::rotation_count(bytes); ++c) {
      copies.push_back(std::make_unique<DeviceMemory>(bytes));
      ROOFLINE_CUDA_CHECK(
          cudaMemcpy(copies.back()->ptr, host.data(), bytes, cudaMemcpyHostToDevice));
      ptrs.push_back(copies.back().get());
    }
    bench::settle();
  }
};

#if defined(ROOFLINE_PHASE_TRACE)
// trace [qwen]: Llama-3-8B's (or Qwen2.5-0.5B's) decode GEMMs on the skinny kernel at m = 1 and 8,
// with and without the RMSNorm prologue, each timed, then one graph of its 16 calls traced phase
// by phase. The small model's are short streams of few column blocks (o and down split K), where a
// call's fixed chain rather than its bytes sets the time (issue 8).
int run_trace(std::span<const MatmulWeightShape> weights) {
  static const std::vector<std::string> kNames = {"entry",
                                                  "first weights issued",
                                                  "PDL wait",
                                                  "first stages' x issued",
                                                  "first stage landed",
                                                  "first tile streamed",
                                                  "first tile's epilogue",
                                                  "other tiles streamed",
                                                  "last epilogue, done"};
  auto skinny = forced(MatmulImpl::kSkinny);
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  bench::settle();
  std::printf(
      "skinny GEMM phases (phase marks compiled in: the times below are a trace build's)\n");
  for (const auto& w : weights) {
    RotatedWeights rotated(w.n, w.k, 1);
    const std::string weight = w.name;
    const bool has_norm = weight.ends_with(" qkv") || weight.ends_with(" gate_up");
    for (const int64_t m : {1, 8}) {
      for (const bool norm : {false, true}) {
        if (norm && !has_norm) continue;
        const std::string name = std::string(w.name) + " " + std::to_string(w.n) + "x" +
                                 std::to_string(w.k) + " m=" + std::to_string(m) +
                                 (norm ? " +norm" : "");
        std::printf("%s\n", name.c_str());
        const double ms = time_matmul(*skinny, stream, m, w.n, w.k, rotated.ptrs, 50, false, norm,
                                      false, {}, 0, &kNames);
        bench::print_bandwidth(name.c_str(), ms, static_cast<double>(w.n * w.k * 2));
      }
    }
  }
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}

// trace wide: Llama-3-8B's decode GEMMs on the wide kernel at m = 1 and 64, each timed, then one
// graph of its 16 calls traced phase by phase (where the m = 64 calls lose their time).
int run_trace_wide() {
  static const std::vector<std::string> kNames = {
      "entry",       "PDL wait",        "first stage landed",    "stages multiplied",
      "sums shared", "outputs written", "cluster released, done"};
  auto wide = forced(MatmulImpl::kWide);
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  bench::settle();
  std::printf("wide GEMM phases (phase marks compiled in: the times below are a trace build's)\n");
  for (const auto& w : kLlama3_8bWeights) {
    RotatedWeights rotated(w.n, w.k, 1);
    for (const int64_t m : {1, 64}) {
      const std::string name = std::string(w.name) + " " + std::to_string(w.n) + "x" +
                               std::to_string(w.k) + " m=" + std::to_string(m);
      std::printf("%s\n", name.c_str());
      const double ms = time_matmul(*wide, stream, m, w.n, w.k, rotated.ptrs, 50, false, false,
                                    false, {}, 0, &kNames, true);
      bench::print_bandwidth(name.c_str(), ms, static_cast<double>(w.n * w.k * 2));
    }
  }
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}
#endif

// shape N K: one weight at m = 1, 2, 4, 8 on the skinny kernel as its plan launches it, on the
// skinny kernel's few-token variant forced (m <= 4, K unsplit: three blocks per SM) and on
// cuBLASLt; plain, with the RMSNorm prologue and, for an even n, with the prologue and the SwiGLU
// epilogue (a gated MLP's gate_up); the prologue forms also with block copies instead of warp
// slices (MatmulSkinnyNorm). For the plan's choices on shapes outside the decode section's models.
int run_shape(int64_t n, int64_t k) {
  auto skinny = forced(MatmulImpl::kSkinny);
  auto few = forced(MatmulImpl::kSkinny);
  few->set_skinny_few_tokens(MatmulSkinnyFewTokens::kOn);
  auto block = forced(MatmulImpl::kSkinny);  // the prologue fused in block copies
  block->set_skinny_norm(MatmulSkinnyNorm::kFusedBlockCopies);
  auto cublas = forced(MatmulImpl::kCublas);
  const int num_sms = bench::sm_count();
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const size_t weight_bytes = static_cast<size_t>(n * k) * 2;
  RotatedWeights rotated(n, k, 1);
  for (const int64_t m : {1, 2, 4, 8}) {
    const MatmulSkinnyLaunch planned = matmul_skinny_launch(m, n, k, num_sms);
    std::printf("%lldx%lld m=%lld: %lld tiles of %lld chunks, %d split(s), planned %s\n",
                static_cast<long long>(n), static_cast<long long>(k), static_cast<long long>(m),
                static_cast<long long>(planned.tiles), static_cast<long long>(planned.num_chunks),
                planned.splits, planned.few_tokens ? "few-token" : "two blocks per SM");
    for (const int form : {0, 1, 2}) {  // plain, + norm, + norm + swiglu
      const bool gated = form == 2;
      if (gated && n % 2 != 0) continue;
      const std::string name = std::to_string(n) + "x" + std::to_string(k) +
                               " m=" + std::to_string(m) +
                               (form == 2   ? " +norm +swiglu"
                                : form == 1 ? " +norm"
                                            : "");
      for (auto& [ctx, tag] : {std::pair<MatmulCudaContext*, const char*>{skinny.get(), "skinny"},
                               {few.get(), "skinny few-token"},
                               {block.get(), "skinny block copies"},
                               {cublas.get(), "cublas"}}) {
        if (ctx == few.get() && (m > kMatmulSkinnyFewTokensMaxM || planned.splits > 1)) continue;
        if (ctx == block.get() && form == 0) continue;
        bench::print_bandwidth(
            (name + " " + tag).c_str(),
            time_matmul(*ctx, stream, m, n, k, rotated.ptrs, 50, false, form > 0, gated),
            static_cast<double>(weight_bytes));
      }
    }
  }
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}

// wide: the wide kernel forced beside cuBLASLt on Llama-3-8B's decode GEMMs at m = 1, 8, 64, with
// its split sweep (the A/B of the wide kernel's variants: ROOFLINE_WIDE_* in the environment).
int run_wide() {
  auto cublas = forced(MatmulImpl::kCublas);
  auto wide = forced(MatmulImpl::kWide);
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  bench::settle();
  for (const auto& w : kLlama3_8bWeights) {
    const size_t weight_bytes = static_cast<size_t>(w.n * w.k) * 2;
    RotatedWeights rotated(w.n, w.k, 1);
    for (const int64_t m : {1, 8, 64}) {
      const std::string name = std::string(w.name) + " " + std::to_string(w.n) + "x" +
                               std::to_string(w.k) + " m=" + std::to_string(m);
      bench::print_bandwidth((name + " wide").c_str(),
                             time_matmul(*wide, stream, m, w.n, w.k, rotated.ptrs),
                             static_cast<double>(weight_bytes));
      bench::print_bandwidth((name + " cublas").c_str(),
                             time_matmul(*cublas, stream, m, w.n, w.k, rotated.ptrs),
                             static_cast<double>(weight_bytes));
      const int chosen = matmul_wide_cuda_launch(m, w.n, w.k).splits;
      std::printf("  wide us by splits:");
      int previous = 0;
      for (const int requested : {1, 2, 3, 4, 5, 6, 8}) {
        const int splits = matmul_wide_cuda_launch(m, w.n, w.k, requested).splits;
        if (splits == previous) continue;
        previous = splits;
        wide->set_wide_splits(requested);
        const double ms = time_matmul(*wide, stream, m, w.n, w.k, rotated.ptrs, 20);
        std::printf(" %d%s:%.1f", splits, splits == chosen ? "*" : "", ms * 1e3);
      }
      wide->set_wide_splits(0);
      std::printf("\n");
    }
  }
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}

// wide N K M: one shape, 10 eager calls of the wide kernel then 10 of cuBLASLt on rotated weights,
// untimed — the launches a profiler (Nsight Compute) is pointed at.
int run_wide_shape(int64_t n, int64_t k, int64_t m) {
  auto cublas = forced(MatmulImpl::kCublas);
  auto wide = forced(MatmulImpl::kWide);
  const RotatedWeights rotated(n, k, 1);
  DecodeProblem problem(m, n, k);
  MatmulParams& p = problem.p;
  for (MatmulCudaContext* ctx : {wide.get(), cublas.get()}) {
    for (int i = 0; i < 10; ++i) {
      p.w = rotated.ptrs[static_cast<size_t>(i) % rotated.ptrs.size()]->ptr;
      matmul_cuda(p, *ctx, nullptr);
    }
    ROOFLINE_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::printf("wide %lldx%lld m=%lld: 10 wide calls, then 10 cuBLASLt calls\n",
              static_cast<long long>(n), static_cast<long long>(k), static_cast<long long>(m));
  return 0;
}

int run(bool decode, bool prologue, bool prefill) {
  // One context per implementation; the selection's measurements happen once per problem, in the
  // warm-up calls before capture.
  auto ctx = MatmulCudaContext::create();
  auto cublas = forced(MatmulImpl::kCublas);
  auto skinny = forced(MatmulImpl::kSkinny);
  auto block = forced(MatmulImpl::kSkinny);  // the prologue fused in block copies
  block->set_skinny_norm(MatmulSkinnyNorm::kFusedBlockCopies);
  auto wide = forced(MatmulImpl::kWide);
  const int num_sms = bench::sm_count();
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  bench::settle();

  if (decode) std::printf("decode GEMMs (bandwidth = weight bytes / time):\n");
  std::vector<MatmulWeightShape> decode_weights(std::begin(kLlama3_8bWeights),
                                                std::end(kLlama3_8bWeights));
  decode_weights.insert(decode_weights.end(), std::begin(kQwen25_05bWeights),
                        std::end(kQwen25_05bWeights));
  for (const auto& w : decode_weights) {
    if (!decode) break;
    const size_t weight_bytes = static_cast<size_t>(w.n * w.k) * 2;
    RotatedWeights rotated(w.n, w.k, 1);
    const std::vector<const DeviceMemory*>& ptrs = rotated.ptrs;
    for (const int64_t m : kMatmulCudaBenchDecodeMs) {
      const std::string name = std::string(w.name) + " " + std::to_string(w.n) + "x" +
                               std::to_string(w.k) + " m=" + std::to_string(m);
      const double skinny_ms = time_matmul(*skinny, stream, m, w.n, w.k, ptrs);
      const double cublas_ms = time_matmul(*cublas, stream, m, w.n, w.k, ptrs);
      const double wide_ms = time_matmul(*wide, stream, m, w.n, w.k, ptrs);
      const double selected_ms = time_matmul(*ctx, stream, m, w.n, w.k, ptrs);
      bench::print_bandwidth((name + " skinny").c_str(), skinny_ms,
                             static_cast<double>(weight_bytes));
      bench::print_bandwidth((name + " cublas").c_str(), cublas_ms,
                             static_cast<double>(weight_bytes));
      bench::print_bandwidth((name + " wide").c_str(), wide_ms, static_cast<double>(weight_bytes));
      bench::print_bandwidth((name + " selected").c_str(), selected_ms,
                             static_cast<double>(weight_bytes));
      const MatmulImpl ran = ctx->last_impl();
      std::printf("  skinny/cublas time %.2f, wide/cublas %.2f, selected ran %s\n",
                  skinny_ms / cublas_ms, wide_ms / cublas_ms, impl_name(ran));
      // The split sweep: every distinct split count the launch plan allows for this shape.
      const int chosen = matmul_skinny_launch(m, w.n, w.k, num_sms).splits;
      std::printf("  skinny us by splits:");
      int previous = 0;
      for (const int requested : {1, 2, 3, 4, 5, 6, 8, 12, 16}) {
        const int splits = matmul_skinny_launch(m, w.n, w.k, num_sms, requested).splits;
        if (splits == previous) continue;
        previous = splits;
        skinny->set_skinny_splits(requested);  // plans `splits` splits
        const double ms = time_matmul(*skinny, stream, m, w.n, w.k, ptrs, 20);
        std::printf(" %d%s:%.1f", splits, splits == chosen ? "*" : "", ms * 1e3);
      }
      skinny->set_skinny_splits(0);
      std::printf("\n");
      // The residual epilogue (y += x · Wᵀ in place) of the projections that feed the residual
      // stream: it should cost nothing over the plain GEMM on either implementation.
      const std::string weight = w.name;
      const bool feeds_residual = weight.ends_with(" o") || weight.ends_with(" down");
      if (feeds_residual && (m == 1 || m == 8)) {
        bench::print_bandwidth((name + " skinny +residual").c_str(),
                               time_matmul(*skinny, stream, m, w.n, w.k, ptrs, 50, true),
                               static_cast<double>(weight_bytes));
        bench::print_bandwidth((name + " cublas +residual").c_str(),
                               time_matmul(*cublas, stream, m, w.n, w.k, ptrs, 50, true),
                               static_cast<double>(weight_bytes));
      }
    }
  }

  if (prologue)
    std::printf("RMSNorm prologue (cublas: rms_norm kernel + GEMM (+ silu_mul | qkv_rope)):\n");
  for (const auto& w : kMatmulCudaTestWeights) {
    if (!prologue) break;
    const std::string shape = w.name;
    const bool wanted = shape == "llama3-8b qkv" || shape == "llama3-8b gate_up" ||
                        shape == "qwen2.5-0.5b qkv" || shape == "qwen2.5-0.5b gate_up";
    if (!wanted) continue;
    const size_t weight_bytes = static_cast<size_t>(w.n * w.k) * 2;
    RotatedWeights rotated(w.n, w.k, 3);
    const std::vector<const DeviceMemory*>& ptrs = rotated.ptrs;
    for (const int64_t m : {1, 8}) {
      const std::string name =
          shape + " " + std::to_string(w.n) + "x" + std::to_string(w.k) + " m=" + std::to_string(m);
      const bool gated = shape.find("gate_up") != std::string::npos;
      // The q|k|v heads: Llama-3-8B 32 + 2·8 of 128, Qwen2.5-0.5B 14 + 2·2 of 64.
      const RopeHeads heads = shape == "llama3-8b qkv"      ? RopeHeads{32, 8, 128}
                              : shape == "qwen2.5-0.5b qkv" ? RopeHeads{14, 2, 64}
                                                            : RopeHeads{};
      // plain, +norm, +norm +swiglu (gate_up), +norm +rope (qkv)
      for (const int variant : {0, 1, 2, 3}) {
        if ((variant == 2 && !gated) || (variant == 3 && heads.head_dim == 0)) continue;
        const bool norm = variant >= 1, swiglu = variant == 2;
        const RopeHeads rope = variant == 3 ? heads : RopeHeads{};
        const char* tag = variant == 3 ? " +norm +rope"
                          : swiglu     ? " +norm +swiglu"
                          : norm       ? " +norm"
                                       : "";
        bench::print_bandwidth(
            (name + " skinny" + tag).c_str(),
            time_matmul(*skinny, stream, m, w.n, w.k, ptrs, 50, false, norm, swiglu, rope),
            static_cast<double>(weight_bytes));
        if (norm)
          bench::print_bandwidth(
              (name + " skinny block copies" + tag).c_str(),
              time_matmul(*block, stream, m, w.n, w.k, ptrs, 50, false, norm, swiglu, rope),
              static_cast<double>(weight_bytes));
        bench::print_bandwidth(
            (name + " cublas" + tag).c_str(),
            time_matmul(*cublas, stream, m, w.n, w.k, ptrs, 50, false, norm, swiglu, rope),
            static_cast<double>(weight_bytes));
      }
    }
  }

  if (prefill)
    std::printf("prefill GEMMs (m = %lld):\n", static_cast<long long>(kMatmulCudaBenchPrefillM));
  for (const auto& w : kLlama3_8bWeights) {
    if (!prefill) break;
    const int64_t m = kMatmulCudaBenchPrefillM;
    const std::vector<uint16_t> host = random_bf16(w.n * w.k, 2);
    DeviceMemory weight(host.size() * 2);
    ROOFLINE_CUDA_CHECK(
        cudaMemcpy(weight.ptr, host.data(), host.size() * 2, cudaMemcpyHostToDevice));
    bench::settle();
    // Compute bound: one weight copy (the x and y of 8192 tokens dwarf L2 anyway).
    const double ms = time_matmul(*ctx, stream, m, w.n, w.k, {&weight});
    const std::string name = std::string(w.name) + " " + std::to_string(w.n) + "x" +
                             std::to_string(w.k) + " m=" + std::to_string(m);
    bench::print_flops(name.c_str(), ms, 2.0 * static_cast<double>(m) * w.n * w.k);
  }
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}

// mlp: a decode layer's gated MLP as the engine runs it — gate_up with the RMSNorm prologue and
// the SwiGLU epilogue, then down with the residual epilogue writing the residual stream in place
// — chained 16 times in one CUDA graph (each pair on the next of the rotated weight copies, each
// call the selected implementation, PDL between them as in a step), for Qwen2.5-0.5B, Qwen3-0.6B
// and Llama-3-8B at m = 1 and 4. Time per pair and both weights' bytes / time against the copy
// ceiling: what one fused MLP kernel would have to beat
// (bench/results/2026-12-03-fused-mlp/fused_mlp.cu).
int run_mlp() {
  struct Mlp {
    const char* name;
    int64_t hidden, inter;
  };
  constexpr Mlp kMlps[] = {
      {"qwen2.5-0.5b", 896, 4864}, {"qwen3-0.6b", 1024, 3072}, {"llama3-8b", 4096, 14336}};
  auto ctx = MatmulCudaContext::create();
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::printf("gated MLP, gate_up (+norm +swiglu) then down (+residual), selected kernels:\n");
  for (const Mlp& mlp : kMlps) {
    const int64_t h = mlp.hidden, inter = mlp.inter;
    RotatedWeights gate_up(2 * inter, h, 1), down(h, inter, 2);
    const size_t copies = std::min(gate_up.ptrs.size(), down.ptrs.size());
    const double bytes = 2.0 * static_cast<double>(3 * inter * h + h);
    for (const int64_t m : {int64_t{1}, int64_t{4}}) {
      const std::vector<uint16_t> x_host = random_bf16(m * h, 11);
      const std::vector<uint16_t> norm_host = random_bf16(h, 12);
      DeviceMemory x(static_cast<size_t>(m * h) * 2), norm(static_cast<size_t>(h) * 2),
          normed(static_cast<size_t>(m * h) * 2), act(static_cast<size_t>(m * inter) * 2),
          product(static_cast<size_t>(m * 2 * inter) * 2);
      ROOFLINE_CUDA_CHECK(
          cudaMemcpy(x.ptr, x_host.data(), x_host.size() * 2, cudaMemcpyHostToDevice));
      ROOFLINE_CUDA_CHECK(
          cudaMemcpy(norm.ptr, norm_host.data(), norm_host.size() * 2, cudaMemcpyHostToDevice));
      MatmulParams up;
      up.x = x.ptr;
      up.w_dtype = DType::kBF16;
      up.y = act.ptr;
      up.dtype = DType::kBF16;
      up.m = m;
      up.n = 2 * inter;
      up.k = h;
      up.y_row_stride = inter;
      up.norm_weight = norm.ptr;
      up.norm_weight_dtype = DType::kBF16;
      up.normed = normed.ptr;
      up.swiglu = true;
      up.gate_up = product.ptr;
      MatmulParams dn;
      dn.x = act.ptr;
      dn.w_dtype = DType::kBF16;
      dn.residual = x.ptr;
      dn.y = x.ptr;
      dn.dtype = DType::kBF16;
      dn.m = m;
      dn.n = h;
      dn.k = inter;
      dn.y_row_stride = h;
      auto pair = [&](int i) {
        up.w = gate_up.ptrs[static_cast<size_t>(i) % copies]->ptr;
        dn.w = down.ptrs[static_cast<size_t>(i) % copies]->ptr;
        matmul_cuda(up, *ctx, stream);
        matmul_residual_cuda(dn, *ctx, stream);
      };
      for (size_t i = 0; i < copies; ++i) pair(static_cast<int>(i));  // choose the algorithms
      ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
      cudaGraph_t graph;
      ROOFLINE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
      for (int i = 0; i < kCallsPerGraph; ++i) pair(i);
      ROOFLINE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
      cudaGraphExec_t exec;
      ROOFLINE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      // The residual stream grows by one MLP a pair over the replays; a GEMM's time does not
      // depend on the values it streams.
      const double us =
          bench::median_ms([&](int) { ROOFLINE_CUDA_CHECK(cudaGraphLaunch(exec, stream)); }, 5, 50,
                           stream) *
          1e3 / kCallsPerGraph;
      ROOFLINE_CUDA_CHECK(cudaGraphExecDestroy(exec));
      ROOFLINE_CUDA_CHECK(cudaGraphDestroy(graph));
      std::printf(
          "  %-13s hidden %5lld inter %6lld m=%lld: %8.2f us a pair, %5.1f %% of %.2f TB/s\n",
          mlp.name, static_cast<long long>(h), static_cast<long long>(inter),
          static_cast<long long>(m), us,
          bytes / (us * 1e-6) / bench::kCopyCeilingBytesPerSecond * 100,
          bench::kCopyCeilingBytesPerSecond / 1e12);
    }
  }
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}

// summaries: Llama-3-8B's LM head (n = 128256, k = 4096, bf16, the final norm fused as the RMSNorm
// prologue; `n`, `k` another head) at m = 1, 8 and 64, with and without the logit tile summaries of
// its logits (tiles of 128 tokens), on the skinny kernel with the prologue fused and after an
// rms_norm kernel (MatmulSkinnyNorm::kApart: the two kernels the fold replaces), on the wide kernel
// (which, like the skinny one, writes them in its epilogue), on cuBLASLt (which runs
// summarize_logit_tiles_cuda after it) and as selected (the
// implementation each chose printed): the summaries' cost is each pair's difference, taken in one
// run. `ms` (non-empty) replaces the m values (`summaries 64`: one m, for a profiler).
int run_summaries(int64_t kN, int64_t kK, const std::vector<int64_t>& ms) {
  constexpr int64_t kTileTokens = 128;
  auto skinny = forced(MatmulImpl::kSkinny);
  auto apart = forced(MatmulImpl::kSkinny);
  apart->set_skinny_norm(MatmulSkinnyNorm::kApart);
  auto cublas = forced(MatmulImpl::kCublas);
  auto wide = forced(MatmulImpl::kWide);
  auto selected = MatmulCudaContext::create();
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const RotatedWeights rotated(kN, kK, 1);
  const double weight_bytes = static_cast<double>(kN * kK * 2);
  std::printf("LM head %lldx%lld +norm, with logit tile summaries of %lld tokens:\n",
              static_cast<long long>(kN), static_cast<long long>(kK),
              static_cast<long long>(kTileTokens));
  for (const int64_t m : ms.empty() ? std::vector<int64_t>{1, 8, 64} : ms) {
    for (auto& [ctx, tag] : {std::pair<MatmulCudaContext*, const char*>{skinny.get(), "skinny"},
                             {apart.get(), "skinny after rms_norm"},
                             {cublas.get(), "cublas"},
                             {wide.get(), "wide"},
                             {selected.get(), "selected"}}) {
      // The skinny and the wide kernel take m <= 64 only (forced past it, they would abort).
      if (m > kMatmulSkinnyMaxM && (ctx == skinny.get() || ctx == apart.get() || ctx == wide.get()))
        continue;
      const std::string name = "lm head m=" + std::to_string(m) + " " + tag + " +norm";
      const double plain_ms =
          time_matmul(*ctx, stream, m, kN, kK, rotated.ptrs, 50, false, true, false, {}, 0);
      const MatmulImpl plain_impl = ctx->last_impl();
      const bool plain_apart = ctx->last_norm_apart();
      const double summarized_ms = time_matmul(*ctx, stream, m, kN, kK, rotated.ptrs, 50, false,
                                               true, false, {}, kTileTokens);
      const MatmulImpl summarized_impl = ctx->last_impl();
      const bool summarized_apart = ctx->last_norm_apart();
      const auto ran = [](MatmulImpl impl, bool norm_apart) {
        return std::string(" (") + impl_name(impl) +
               (impl == MatmulImpl::kSkinny && norm_apart ? " after rms_norm)" : ")");
      };
      bench::print_bandwidth((name + ran(plain_impl, plain_apart)).c_str(), plain_ms, weight_bytes);
      bench::print_bandwidth(
          (name + " +summaries" + ran(summarized_impl, summarized_apart)).c_str(), summarized_ms,
          weight_bytes);
      std::printf("  summaries: %+.2f us (%+.1f %%)\n", (summarized_ms - plain_ms) * 1e3,
                  (summarized_ms / plain_ms - 1.0) * 100.0);
    }
  }
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}

// Whether this machine has no CUDA device, saying so (the benchmark then exits 0: nothing to time).
bool no_device() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) return false;
  std::printf("matmul_cuda_bench: no CUDA device on this machine, nothing to time\n");
  return true;
}

}  // namespace
}  // namespace roofline

int main(int argc, char** argv) {
  bool decode = false, prologue = false, prefill = false, any = false;
  if ((argc == 2 || argc == 3) && std::string(argv[1]) == "trace") {
    const bool wide = argc == 3 && std::string(argv[2]) == "wide";
    const bool qwen = argc == 3 && std::string(argv[2]) == "qwen";
    if (argc == 3 && !wide && !qwen) {
      std::fprintf(stderr,
                   "usage: matmul_skinny_trace_bench trace [wide | qwen] (got '%s': wide traces "
                   "the wide kernel, qwen the skinny kernel on Qwen2.5-0.5B's shapes)\n",
                   argv[2]);
      return 2;
    }
#if defined(ROOFLINE_PHASE_TRACE)
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      std::printf("matmul_skinny_trace_bench: no CUDA device on this machine, nothing to time\n");
      return 0;
    }
    if (wide) return roofline::run_trace_wide();
    return qwen ? roofline::run_trace(roofline::kQwen25_05bWeights)
                : roofline::run_trace(roofline::kLlama3_8bWeights);
#else
    std::fprintf(stderr,
                 "matmul_cuda_bench: `trace` needs the phase marks compiled in: run "
                 "matmul_skinny_trace_bench trace [wide | qwen]\n");
    return 2;
#endif
  }
  if (argc == 5 && std::string(argv[1]) == "wide") {
    const long long n = std::atoll(argv[2]), k = std::atoll(argv[3]), m = std::atoll(argv[4]);
    // The weight (rotated over copies) must fit the device: at most 4 GiB of it.
    if (n < 1 || k < 1 || k % 8 != 0 || m < 1 || m > 64 || n > (int64_t{1} << 31) / k) {
      std::fprintf(stderr,
                   "usage: matmul_cuda_bench wide N K M (n, k >= 1, k a multiple of 8, n·k at "
                   "most 2^31, m in 1..64)\n");
      return 2;
    }
    if (roofline::no_device()) return 0;
    return roofline::run_wide_shape(n, k, m);
  }
  if (argc == 4 && std::string(argv[1]) == "shape") {
    const long long n = std::atoll(argv[2]), k = std::atoll(argv[3]);
    if (n < 1 || k < 8 || k % 8 != 0 || n > (int64_t{1} << 31) / k) {
      std::fprintf(stderr,
                   "usage: matmul_cuda_bench shape N K (n >= 1, k >= 8 a multiple of 8, n·k at "
                   "most 2^31)\n");
      return 2;
    }
    if (roofline::no_device()) return 0;
    return roofline::run_shape(n, k);
  }
  if (argc == 2 && std::string(argv[1]) == "mlp") {
    if (roofline::no_device()) return 0;
    return roofline::run_mlp();
  }
  if (argc >= 2 && std::string(argv[1]) == "summaries") {
    std::vector<int64_t> ms;
    long long n = 128256, k = 4096;
    for (int i = 2; i < argc; ++i) {
      const std::string arg = argv[i];
      const size_t x = arg.find('x');
      const int64_t m = x == std::string::npos ? std::atoll(argv[i]) : 0;
      if (x != std::string::npos) {
        n = std::atoll(arg.substr(0, x).c_str());
        k = std::atoll(arg.substr(x + 1).c_str());
      }
      const bool bad_shape = n < 1 || k < 8 || k % 8 != 0 || n * k > (1ll << 31);
      if (bad_shape || (x == std::string::npos && (m < 1 || m > 4096))) {
        std::fprintf(stderr,
                     "usage: matmul_cuda_bench summaries [NxK] [M...] (the LM head's n >= 1 and "
                     "k >= 8 a multiple of 8, n·k at most 2^31; 1 <= M <= 4096)\n");
        return 2;
      }
      if (x == std::string::npos) ms.push_back(m);
    }
    if (roofline::no_device()) return 0;
    return roofline::run_summaries(n, k, ms);
  }
  if (argc == 2 && std::string(argv[1]) == "wide") {
    if (roofline::no_device()) return 0;
    return roofline::run_wide();
  }
  for (int i = 1; i < argc; ++i) {
    const std::string section = argv[i];
    if (section == "verbose") {
      // The selector's measurements (stderr), in order with the table: stdout line-buffered.
      roofline::set_log_level(roofline::LogLevel::kInfo);
      std::setvbuf(stdout, nullptr, _IOLBF, 0);
      continue;
    }
    any = true;
    decode = decode || section == "decode";
    prologue = prologue || section == "prologue";
    prefill = prefill || section == "prefill";
    if (section != "decode" && section != "prologue" && section != "prefill") {
      std::fprintf(
          stderr,
          "usage: matmul_cuda_bench [decode] [prologue] [prefill] [verbose] (default: "
          "all sections; verbose: the selector's measurements too) | wide (the wide "
          "kernel beside cuBLASLt, by splits) | mlp (a layer's gated MLP as the engine chains "
          "it) | summaries [NxK] [M...] (the LM head with and without its logit tile summaries) | "
          "wide N "
          "K M "
          "(one shape's calls, for a "
          "profiler) | shape N K (one weight on both skinny variants and cuBLASLt) | "
          "trace [wide | qwen] (the skinny kernel's phases on Llama-3-8B's or Qwen2.5-0.5B's "
          "shapes, or the wide kernel's: matmul_skinny_trace_bench)\n");
      return 2;
    }
  }
  if (!any) decode = prologue = prefill = true;
  if (roofline::no_device()) return 0;
  return roofline::run(decode, prologue, prefill);
}
