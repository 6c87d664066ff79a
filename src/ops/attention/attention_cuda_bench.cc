// paged_attention_cuda benchmark, Llama-3-8B attention (32 q / 8 kv heads, head_dim 128, pages of
// 16 scattered over the cache): decode of B ∈ {1, 8, 64, 256} sequences × L ∈ {512, 4096, 32768}
// cached tokens as K+V bytes read / time beside the 4.28 TB/s copy ceiling (decode is memory
// bound; issue 6's goal: >= 90 % where a launch reads more than 256 MB, >= 80 % at B=1, L=4096;
// bench/peers/attention_decode_sdpa.py times torch SDPA on the same grid), and causal prefills of
// L ∈ {2048, 8192, 16384} tokens plus a ragged batch of eight prompts as TFLOP/s beside the
// 783 TFLOP/s bf16 GEMM ceiling (FLOPs counted over the attended (query, key) pairs only:
// 4·head_dim·num_heads per pair; issue 5's goal: >= torch SDPA's cuDNN backend at L >= 8192,
// which bench/peers/attention_prefill_sdpa.py times on the same shapes).
// Method: 16 back-to-back launches per sample, each on the next of `rotation_count` copies of the
// caches so L2 does not serve K/V; median of 50 samples after warm-up.
//
// Built as attention_trace_bench (ROOFLINE_PHASE_TRACE: the decode and prefill kernels with their
// phase marks, phase_trace.h), `trace B L [heads kv_heads head_dim]` times one decode shape, then
// traces one more sample of 16 launches and prints where each launch's time goes, phase by phase;
// `trace prefill L` does the same for a causal prefill of L tokens and adds how its blocks fill the
// SMs (each block's fixed cost beside its cost per K/V tile, the time SMs wait between blocks).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/cuda_check.h"
#include "ops/attention/attention.h"
#include "ops/attention/attention_decode_plan.h"
#include "ops/attention/attention_prefill_plan.h"
#include "ops/attention/attention_shapes.h"
#include "ops/testing/gpu_bench_buffers.h"
#include "ops/testing/gpu_bench_util.h"

namespace roofline {
namespace {

constexpr int kLaunchesPerSample = 16;

using bench::DeviceMemory;
using bench::random_bf16;

// Median ms of one launch over the shape, its pages scattered, its K/V rotated over copies.
// kv_bytes receives the compulsory K+V bytes of one launch.
// What to trace (trace builds): the kernel's recorder, its marks' names, and whether to add the
// occupancy of one launch (phase_trace_occupancy).
struct TraceRequest {
  PhaseTraceRecorder* recorder;
  const std::vector<std::string>* names;
  bool occupancy;
};

// With a trace request (trace builds), also traces one sample and prints its phases.
double time_attention(const AttentionShape& shape, cudaStream_t stream, double* kv_bytes,
                      [[maybe_unused]] const TraceRequest* trace = nullptr) {
  const int64_t slot_elems = shape.num_kv_heads * shape.head_dim;
  int64_t pages = 0, num_tokens = 0, max_pages = 0, context = 0;
  for (const auto& s : shape.seqs) {
    pages += pages_for(s.seq_len, shape.block_size);
    max_pages = std::max(max_pages, pages_for(s.seq_len, shape.block_size));
    num_tokens += s.q_len;
    context += s.seq_len;
  }
  *kv_bytes = 2.0 * static_cast<double>(context * slot_elems) * 2;
  const int64_t num_blocks = pages;
  std::vector<int32_t> order(static_cast<size_t>(num_blocks));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(1);
  std::shuffle(order.begin(), order.end(), rng);  // pages scattered, as a running server's are
  std::vector<int32_t> tables(shape.seqs.size() * static_cast<size_t>(max_pages), -1);
  std::vector<int32_t> seq_lens, query_start{0};
  size_t next = 0;
  for (size_t s = 0; s < shape.seqs.size(); ++s) {
    for (int64_t pg = 0; pg < pages_for(shape.seqs[s].seq_len, shape.block_size); ++pg)
      tables[s * static_cast<size_t>(max_pages) + static_cast<size_t>(pg)] = order[next++];
    seq_lens.push_back(static_cast<int32_t>(shape.seqs[s].seq_len));
    query_start.push_back(query_start.back() + static_cast<int32_t>(shape.seqs[s].q_len));
  }
  const auto tables_d = DeviceMemory::from_host(tables);
  const auto seq_lens_d = DeviceMemory::from_host(seq_lens);
  const auto query_start_d = DeviceMemory::from_host(query_start);
  const auto q_d =
      DeviceMemory::from_host(random_bf16(num_tokens * shape.num_heads * shape.head_dim, 3));
  DeviceMemory out_d(static_cast<size_t>(num_tokens * shape.num_heads * shape.head_dim) * 2);

  const int64_t cache_elems = num_blocks * shape.block_size * slot_elems;
  const int copies = bench::rotation_count(static_cast<size_t>(*kv_bytes));
  std::vector<bench::GpuArray> k_copies, v_copies;
  for (int c = 0; c < copies; ++c) {
    k_copies.emplace_back(static_cast<size_t>(cache_elems) * 2);
    k_copies.back().fill_bf16(-1.0f, 1.0f, 4 + 2 * c);
    v_copies.emplace_back(static_cast<size_t>(cache_elems) * 2);
    v_copies.back().fill_bf16(-1.0f, 1.0f, 5 + 2 * c);
  }
  bench::GpuArray workspace(static_cast<size_t>(paged_attention_cuda_workspace_bytes()));
  ROOFLINE_CUDA_CHECK(cudaMemset(workspace.get(), 0, workspace.bytes()));
  bench::settle();

  PagedAttentionParams p;
  p.q = q_d->ptr;
  p.block_tables = static_cast<const int32_t*>(tables_d->ptr);
  p.seq_lens = static_cast<const int32_t*>(seq_lens_d->ptr);
  p.query_start = static_cast<const int32_t*>(query_start_d->ptr);
  p.out = out_d.ptr;
  p.dtype = DType::kBF16;
  p.kv_dtype = DType::kBF16;
  p.num_seqs = static_cast<int64_t>(shape.seqs.size());
  p.num_tokens = num_tokens;
  p.num_heads = shape.num_heads;
  p.num_kv_heads = shape.num_kv_heads;
  p.head_dim = shape.head_dim;
  p.block_size = shape.block_size;
  p.max_blocks_per_seq = max_pages;
  p.num_blocks = num_blocks;
  p.scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  p.sliding_window = shape.sliding_window;
  p.workspace = workspace.get();
  for (const auto& s : shape.seqs) {  // the bounds the engine passes
    p.max_q_len = std::max(p.max_q_len, s.q_len);
    p.max_seq_len = std::max(p.max_seq_len, s.seq_len);
  }
  int launch = 0;
  const auto sample = [&](int) {
    for (int i = 0; i < kLaunchesPerSample; ++i, ++launch) {
      p.k_cache = k_copies[static_cast<size_t>(launch % copies)].get();
      p.v_cache = v_copies[static_cast<size_t>(launch % copies)].get();
      paged_attention_cuda(p, stream);
    }
  };
  const double ms = bench::median_ms(sample, 3, 50, stream);
#if defined(ROOFLINE_PHASE_TRACE)
  if (trace != nullptr) {
    // Every block of 16 launches, whatever the plan (at most kDecodeMaxSplitBlocks split blocks
    // and one per (sequence, KV head, row chunk) otherwise).
    const int64_t capacity = kLaunchesPerSample * (kDecodeMaxSplitBlocks + 65536);
    bench::GpuArray records(static_cast<size_t>(capacity * kPhaseTraceWords) * 8);
    ROOFLINE_CUDA_CHECK(cudaMemset(records.get(), 0, records.bytes()));
    bench::settle();
    PhaseTraceRecorder& recorder = *trace->recorder;
    recorder.arm(static_cast<uint64_t*>(records.get()), capacity);
    sample(0);
    ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto launches = recorder.disarm();
    std::vector<uint64_t> host(static_cast<size_t>(capacity * kPhaseTraceWords));
    ROOFLINE_CUDA_CHECK(
        cudaMemcpy(host.data(), records.get(), host.size() * 8, cudaMemcpyDeviceToHost));
    std::printf("%s",
                phase_trace_report(phase_trace_analyse(host, launches), *trace->names).c_str());
    if (trace->occupancy && launches.size() > 1) {  // the second launch: one that followed another
      std::printf("%s",
                  phase_trace_occupancy_report(phase_trace_occupancy(host, launches[1])).c_str());
    }
  }
#endif
  return ms / kLaunchesPerSample;
}

// Times one causal prefill shape and prints its TFLOP/s over the attended (query, key) pairs.
void print_prefill(const AttentionShape& shape, const std::string& name, cudaStream_t stream,
                   const TraceRequest* trace = nullptr) {
  double kv_bytes = 0;
  const double ms = time_attention(shape, stream, &kv_bytes, trace);
  double pairs = 0;
  for (const auto& s : shape.seqs) {  // query j of q_len attends seq_len - q_len + j + 1 keys
    const double q = static_cast<double>(s.q_len), ctx = static_cast<double>(s.seq_len - s.q_len);
    pairs += q * ctx + q * (q + 1) / 2.0;
  }
  bench::print_flops(name.c_str(), ms,
                     4.0 * pairs * static_cast<double>(shape.head_dim * shape.num_heads));
}

// The clusters of each width the decode kernel (d128) runs at once: a launch clusters its splits
// only when all its clusters fit.
void print_cluster_capacity() {
  const DecodeClusterCapacity c = paged_attention_decode_cluster_capacity(128);
  std::printf("decode d128: clusters that fit at once, by width 2..%d:",
              static_cast<int>(kDecodeMaxClusterSplits));
  for (int64_t w = 2; w <= kDecodeMaxClusterSplits; ++w)
    std::printf(" %lld", static_cast<long long>(c[static_cast<size_t>(w)]));
  std::printf("\n");
}

// One shape only (for a profiler run): attention_cuda_bench B L (decode) or prefill L.
int run_one(int64_t batch, int64_t seq_len, bool prefill) {
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  bench::settle();
  if (prefill) {
    print_prefill(attention_cuda_prefill_bench_shape(seq_len),
                  "prefill 32/8 heads d128 L=" + std::to_string(seq_len), stream);
  } else {
    print_cluster_capacity();
    double kv_bytes = 0;
    const double ms =
        time_attention(attention_cuda_decode_bench_shape(batch, seq_len), stream, &kv_bytes);
    const std::string name =
        "decode 32/8 heads d128 B=" + std::to_string(batch) + " L=" + std::to_string(seq_len);
    bench::print_bandwidth(name.c_str(), ms, kv_bytes);
  }
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}

#if defined(ROOFLINE_PHASE_TRACE)
// trace B L [heads kv_heads head_dim]: one decode shape (default Llama-3-8B's heads), timed, then
// one sample of it traced.
int run_trace(int64_t batch, int64_t seq_len, int64_t heads, int64_t kv_heads, int64_t head_dim) {
  static const std::vector<std::string> kNames = {"entry",
                                                  "metadata, split known",
                                                  "first table reads",
                                                  "PDL wait",
                                                  "q landed",
                                                  "first K/V stage",
                                                  "K/V loop done",
                                                  "warps merged",
                                                  "partial / out",
                                                  "partials in / barrier / counted in",
                                                  "merged / pushed"};
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  bench::settle();
  AttentionShape shape = attention_cuda_decode_bench_shape(batch, seq_len);
  shape.num_heads = heads;
  shape.num_kv_heads = kv_heads;
  shape.head_dim = head_dim;
  const std::string name = "decode " + std::to_string(heads) + "/" + std::to_string(kv_heads) +
                           " heads d" + std::to_string(head_dim) + " B=" + std::to_string(batch) +
                           " L=" + std::to_string(seq_len);
  std::printf("%s (phase marks compiled in: the times below are a trace build's)\n", name.c_str());
  double kv_bytes = 0;
  const TraceRequest trace{&decode_attention_phase_trace(), &kNames, false};
  const double ms = time_attention(shape, stream, &kv_bytes, &trace);
  bench::print_bandwidth(name.c_str(), ms, kv_bytes);
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}

// trace prefill L: the causal prefill of L tokens (Llama-3-8B's heads), timed, then one sample
// traced, with how one launch's blocks fill the SMs.
int run_prefill_trace(int64_t seq_len) {
  static const std::vector<std::string> kNames = {"entry",
                                                  "rows known, barriers set",
                                                  "Q landed (consumer 0)",
                                                  "first K tile landed",
                                                  "tile 0: Q.K^T + softmax",
                                                  "mid tile: tiles before, its K landed",
                                                  "mid tile: turn came",
                                                  "mid tile: issued, turn passed",
                                                  "mid tile: Q.K^T done",
                                                  "mid tile: softmax done",
                                                  "mid tile: previous P.V done",
                                                  "mid tile: rescaled, P packed",
                                                  "the other tiles but the last P.V",
                                                  "last P.V",
                                                  "out staged (this thread)",
                                                  "out staged (warpgroup barrier)",
                                                  "out written"};
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  bench::settle();
  const std::string name = "prefill 32/8 heads d128 L=" + std::to_string(seq_len);
  std::printf(
      "%s (phase marks compiled in: the times below are a trace build's; a unit is one "
      "K/V tile)\n",
      name.c_str());
  const TraceRequest trace{&prefill_attention_phase_trace(), &kNames, true};
  print_prefill(attention_cuda_prefill_bench_shape(seq_len), name, stream, &trace);
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}
#endif

int run(bool decode) {
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  bench::settle();
  if (decode) {  // `attention_cuda_bench prefill` skips the decode grid
    std::printf("decode (bandwidth = K+V bytes read / time):\n");
    print_cluster_capacity();
    for (const int64_t batch : kAttentionCudaBenchBatches) {
      for (const int64_t seq_len : kAttentionCudaBenchSeqLens) {
        const AttentionShape shape = attention_cuda_decode_bench_shape(batch, seq_len);
        double kv_bytes = 0;
        const double ms = time_attention(shape, stream, &kv_bytes);
        const std::string name = "decode 32/8 heads d128 B=" + std::to_string(batch) +
                                 " L=" + std::to_string(seq_len) + " (" +
                                 std::to_string(static_cast<int64_t>(kv_bytes / 1e6)) + " MB)";
        bench::print_bandwidth(name.c_str(), ms, kv_bytes);
      }
    }
  }
  std::printf("prefill (causal, batch 1, then a ragged batch; FLOPs over attended pairs):\n");
  for (const int64_t len : kAttentionCudaBenchPrefillLens) {
    print_prefill(attention_cuda_prefill_bench_shape(len),
                  "prefill 32/8 heads d128 L=" + std::to_string(len), stream);
  }
  print_prefill(attention_cuda_ragged_prefill_bench_shape(), "prefill ragged 8 seqs (16384 tokens)",
                stream);
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}

}  // namespace
}  // namespace roofline

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("attention_cuda_bench: no CUDA device on this machine, nothing to time\n");
    return 0;
  }
  constexpr const char* kUsage =
      "usage: attention_cuda_bench [prefill [L] | B L]  (1 <= B <= 4096, 1 <= L <= 2^20)\n";
  if (argc == 2 && std::string(argv[1]) == "prefill") return roofline::run(/*decode=*/false);
  if (argc >= 2 && std::string(argv[1]) == "trace") {
#if defined(ROOFLINE_PHASE_TRACE)
    if (argc == 4 && std::string(argv[2]) == "prefill") {
      const long long seq_len = std::atoll(argv[3]);
      if (seq_len < 1 || seq_len > (1 << 20)) {
        std::fprintf(stderr, "usage: attention_trace_bench trace prefill L  (1 <= L <= 2^20)\n");
        return 2;
      }
      return roofline::run_prefill_trace(seq_len);
    }
    const long long batch = argc > 2 ? std::atoll(argv[2]) : 0;
    const long long seq_len = argc > 3 ? std::atoll(argv[3]) : 0;
    const long long heads = argc > 4 ? std::atoll(argv[4]) : 32;
    const long long kv_heads = argc > 5 ? std::atoll(argv[5]) : 8;
    const long long head_dim = argc > 6 ? std::atoll(argv[6]) : 128;
    if ((argc != 4 && argc != 7) || batch < 1 || batch > 4096 || seq_len < 1 ||
        seq_len > (1 << 20) || kv_heads < 1 || heads < kv_heads || heads % kv_heads != 0 ||
        heads / kv_heads > 64 ||
        (head_dim != 32 && head_dim != 64 && head_dim != 128 && head_dim != 256)) {
      std::fprintf(stderr,
                   "usage: attention_trace_bench trace B L [heads kv_heads head_dim] | trace "
                   "prefill L  (1 <= B <= 4096, 1 <= L <= 2^20, heads a multiple of kv_heads, "
                   "head_dim 32, 64, 128 or 256)\n");
      return 2;
    }
    return roofline::run_trace(batch, seq_len, heads, kv_heads, head_dim);
#else
    std::fprintf(stderr,
                 "attention_cuda_bench: `trace` needs the phase marks compiled in: run "
                 "attention_trace_bench trace B L (or trace prefill L)\n");
    return 2;
#endif
  }
  if (argc == 3) {
    const bool prefill = std::string(argv[1]) == "prefill";
    const long long batch = prefill ? 1 : std::atoll(argv[1]), seq_len = std::atoll(argv[2]);
    if (batch < 1 || batch > 4096 || seq_len < 1 || seq_len > (1 << 20)) {
      std::fprintf(stderr, "%s", kUsage);
      return 2;
    }
    return roofline::run_one(batch, seq_len, prefill);
  }
  if (argc != 1) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  return roofline::run(/*decode=*/true);
}
