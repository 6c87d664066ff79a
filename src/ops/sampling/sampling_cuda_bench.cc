// sample_rows_cuda per decode step on the GPU: batches of 1, 64 and 256 rows at a 128,256-token
// vocabulary (Llama 3), every row with top-k 50 + top-p 0.9 + temperature 0.8 + repetition,
// frequency and presence penalties over a 256-token history (its own seed and step), timed
// inside a CUDA graph (launch latency excluded, as a decode step replays it) beside the time to
// read the logits once at the 4.28 TB/s copy ceiling, and beside argmax_cuda (one read of the
// logits, measured) in the same run. Issue 12's goal: <= 3x the read time. Logits are LM-like
// (normal, sigma 2.5) so the top-k pivot sees a realistic head; they rotate through enough copies
// to defeat L2. Then sample_rows_tiles_cuda on the same rows from the logits' tile summaries (16
// and 128 tokens a tile, computed here as the LM head's epilogue would write them, rotated with
// the logits): the sampler's share of the fused route, without the epilogue's own cost.
// Prints a message and exits 0 without a GPU.
//
// Built as sampling_trace_bench (ROOFLINE_PHASE_TRACE: the kernel with its phase marks,
// phase_trace.h), `trace ROWS [bf16|f32]` times one batch, then traces kCallsPerGraph more
// launches of its sampled rows (back to back, outside a graph) and prints where each launch's
// time goes, phase by phase.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ops/sampling/sampling.h"
#include "ops/testing/gpu_bench_buffers.h"
#include "ops/testing/gpu_bench_util.h"

namespace roofline {
namespace {

constexpr int64_t kVocab = 128256;
constexpr int kHistory = 256;      // prompt + generated tokens per row, as edit entries
constexpr int kCallsPerGraph = 8;  // launches per graph replay; time = replay / kCallsPerGraph

// Logits ~ normal(0, 2.5) in dtype, a 4 Mi-element random tile repeated over rows * vocab.
std::vector<uint8_t> make_logits(int64_t rows, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.5f);
  const int64_t n = rows * kVocab;
  const int64_t tile = std::min<int64_t>(n, 4 << 20);
  std::vector<float> values(static_cast<size_t>(tile));
  for (float& v : values) v = normal(rng);
  std::vector<uint8_t> bytes(static_cast<size_t>(n * dtype_size_bytes(dtype)));
  for (int64_t i = 0; i < n; ++i) {
    const float v = values[static_cast<size_t>(i % tile)];
    if (dtype == DType::kF32) {
      reinterpret_cast<float*>(bytes.data())[i] = v;
    } else {
      reinterpret_cast<uint16_t*>(bytes.data())[i] = f32_to_bf16_bits(v);
    }
  }
  return bytes;
}

// Median time of one launch of `launch(copy)`, captured kCallsPerGraph times into one graph.
template <typename F>
double graph_ms(F&& launch, int copies, cudaStream_t stream) {
  for (int c = 0; c < copies; ++c) launch(c, stream);  // warm-up, outside the capture
  ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  ROOFLINE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kCallsPerGraph; ++i) launch(i % copies, stream);
  ROOFLINE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  ROOFLINE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const double ms = bench::median_ms(
      [&](int) { ROOFLINE_CUDA_CHECK(cudaGraphLaunch(exec, stream)); }, 3, 30, stream);
  ROOFLINE_CUDA_CHECK(cudaGraphExecDestroy(exec));
  ROOFLINE_CUDA_CHECK(cudaGraphDestroy(graph));
  return ms / kCallsPerGraph;
}

// trace: also trace kCallsPerGraph launches of the sampled rows (trace builds).
void run_batch(int64_t rows, DType dtype, cudaStream_t stream, [[maybe_unused]] bool trace) {
  const int64_t logit_bytes = rows * kVocab * dtype_size_bytes(dtype);
  const int copies = bench::rotation_count(static_cast<size_t>(logit_bytes));
  std::vector<std::unique_ptr<bench::DeviceMemory>> logits;
  // Each copy's tile summaries (what the LM head's epilogue would leave) for
  // sample_rows_tiles_cuda.
  constexpr int64_t kTileSizes[2] = {16, 128};
  constexpr uint32_t kEpoch = 1;
  std::vector<std::unique_ptr<bench::DeviceMemory>> words[2], counts[2];
  for (int c = 0; c < copies; ++c) {
    const std::vector<uint8_t> host = make_logits(rows, dtype, 11 + static_cast<uint64_t>(c));
    logits.push_back(bench::DeviceMemory::from_host(host));
    for (int t = 0; t < 2; ++t) {
      std::vector<uint64_t> w(static_cast<size_t>(rows * logit_tiles(kVocab, kTileSizes[t])));
      std::vector<uint64_t> n(static_cast<size_t>(rows));
      LogitTileSummaries s;
      s.words = w.data();
      s.nonfinite = n.data();
      s.epoch = &kEpoch;
      s.tile_tokens = kTileSizes[t];
      summarize_logit_tiles_cpu(host.data(), dtype, rows, kVocab, kVocab, s);
      words[t].push_back(bench::DeviceMemory::from_host(w));
      counts[t].push_back(bench::DeviceMemory::from_host(n));
    }
  }
  auto d_epoch = bench::DeviceMemory::from_host(std::vector<uint32_t>{kEpoch});

  std::mt19937_64 rng(7);
  std::vector<SamplingRowParams> row_params(static_cast<size_t>(rows));
  std::vector<TokenEdit> edits;
  for (int64_t r = 0; r < rows; ++r) {
    SamplingRowParams& p = row_params[static_cast<size_t>(r)];
    p.temperature = 0.8f;
    p.top_k = 50;
    p.top_p = 0.9f;
    p.repetition_penalty = 1.1f;
    p.frequency_penalty = 0.2f;
    p.presence_penalty = 0.1f;
    p.seed = rng();
    p.step = static_cast<int64_t>(rng() % 4096);
    p.edit_begin = static_cast<int64_t>(edits.size());
    std::vector<int32_t> tokens(kVocab);
    for (int32_t i = 0; i < kVocab; ++i) tokens[static_cast<size_t>(i)] = i;
    std::shuffle(tokens.begin(), tokens.end(), rng);
    for (int i = 0; i < kHistory; ++i)  // 3/4 prompt, 1/4 generated (some several times)
      edits.push_back(TokenEdit{tokens[static_cast<size_t>(i)], 0.0f, i % 4 == 0 ? 1 + i % 3 : 0,
                                i % 4 == 0 ? 0 : 1});
    p.edit_count = kHistory;
  }
  std::vector<SamplingRowParams> greedy_params = row_params;  // the same penalties, temperature 0
  for (SamplingRowParams& p : greedy_params) p.temperature = 0.0f;
  auto d_rows = bench::DeviceMemory::from_host(row_params);
  auto d_greedy = bench::DeviceMemory::from_host(greedy_params);
  auto d_edits = bench::DeviceMemory::from_host(edits);
  bench::DeviceMemory tokens(static_cast<size_t>(rows) * 4), errors(static_cast<size_t>(rows) * 4);
  bench::GpuArray workspace(static_cast<size_t>(sample_rows_cuda_workspace_bytes()));
  ROOFLINE_CUDA_CHECK(cudaMemset(workspace.get(), 0, workspace.bytes()));
  bench::settle();
  // The chain as the engine launches it (split across vocabulary slices where the batch is small),
  // or with one block per row (no workspace), sampled or greedy rows.
  bool split = true, greedy = false;

  // The batch's parameters over logits copy c (the workspace only where the split asks for it).
  auto params = [&](int c) {
    SampleRowsParams p;
    p.logits = logits[static_cast<size_t>(c)]->ptr;
    p.rows = static_cast<const SamplingRowParams*>(greedy ? d_greedy->ptr : d_rows->ptr);
    p.workspace = split ? workspace.get() : nullptr;
    p.edits = static_cast<const TokenEdit*>(d_edits->ptr);
    p.num_edits = static_cast<int64_t>(edits.size());
    p.num_rows = rows;
    p.vocab_size = kVocab;
    p.dtype = dtype;
    p.tokens = static_cast<int32_t*>(tokens.ptr);
    p.errors = static_cast<uint32_t*>(errors.ptr);
    return p;
  };
  auto sample = [&](int c, cudaStream_t s) { sample_rows_cuda(params(c), s); };
  auto argmax = [&](int c, cudaStream_t s) {
    ArgmaxParams p;
    p.logits = logits[static_cast<size_t>(c)]->ptr;
    p.out = static_cast<int32_t*>(tokens.ptr);
    p.num_rows = rows;
    p.vocab_size = kVocab;
    p.dtype = dtype;
    argmax_cuda(p, s);
  };
  // Every row must have sampled a token: a silent error would make the timing meaningless.
  auto check_errors = [&] {
    std::vector<uint32_t> host_errors(static_cast<size_t>(rows));
    ROOFLINE_CUDA_CHECK(
        cudaMemcpy(host_errors.data(), errors.ptr, host_errors.size() * 4, cudaMemcpyDeviceToHost));
    for (uint32_t e : host_errors)
      if (e != 0) std::printf("  warning: a row reported error bits %u\n", e);
  };
  double ms[2][2];  // [greedy][split]
  for (const bool g : {false, true}) {
    for (const bool sp : {true, false}) {
      greedy = g;
      split = sp;
      ms[g][sp] = graph_ms(sample, copies, stream);
      check_errors();
    }
  }
  const double argmax_ms = graph_ms(argmax, copies, stream);
  // The same rows from tile summaries, sampled and greedy, at two tile sizes.
  int tile_size = 0;
  auto sample_tiles = [&](int c, cudaStream_t s) {
    LogitTileSummaries summaries;
    summaries.words = static_cast<uint64_t*>(words[tile_size][static_cast<size_t>(c)]->ptr);
    summaries.nonfinite = static_cast<uint64_t*>(counts[tile_size][static_cast<size_t>(c)]->ptr);
    summaries.epoch = static_cast<const uint32_t*>(d_epoch->ptr);
    summaries.tile_tokens = kTileSizes[tile_size];
    sample_rows_tiles_cuda(params(c), summaries, s);
  };
  double tiles_ms[2][2];  // [tile size][greedy]
  for (int t = 0; t < 2; ++t) {
    for (const bool g : {false, true}) {
      tile_size = t;
      greedy = g;
      tiles_ms[t][g] = graph_ms(sample_tiles, copies, stream);
      check_errors();
    }
  }
  // The logits as the LM head leaves them: one copy, read launch after launch, so it stays in
  // L2 while it fits (50 MB: up to batch 64 in bf16); sampled rows, the engine's split.
  greedy = false;
  split = true;
  const double warm_ms = graph_ms(sample, 1, stream);
  tile_size = 1;
  const double warm_tiles_ms = graph_ms(sample_tiles, 1, stream);
  check_errors();
  const int64_t slices = sample_rows_split(rows, kVocab, bench::sm_count(), true).slices;

  const double read_ms = static_cast<double>(logit_bytes) / bench::kCopyCeilingBytesPerSecond * 1e3;
  std::printf(
      "%-5s batch %3lld: sample_rows %8.2f us/step = %5.2fx the %7.2f us logits read at 4.28 TB/s "
      "(goal <= 3x; %lld slices per row; one block per row: %8.2f us); greedy rows %7.2f us "
      "(one block per row: %7.2f us); argmax (one read) %7.2f us = %5.2fx\n",
      dtype_name(dtype), static_cast<long long>(rows), ms[0][1] * 1e3, ms[0][1] / read_ms,
      read_ms * 1e3, static_cast<long long>(slices), ms[0][0] * 1e3, ms[1][1] * 1e3, ms[1][0] * 1e3,
      argmax_ms * 1e3, argmax_ms / read_ms);
  for (int t = 0; t < 2; ++t)
    std::printf(
        "%-5s batch %3lld: from tiles of %3lld tokens (%6.2f MB of summaries): sampled %8.2f us = "
        "%5.2fx the read, greedy %7.2f us\n",
        dtype_name(dtype), static_cast<long long>(rows), static_cast<long long>(kTileSizes[t]),
        static_cast<double>(rows * logit_tiles(kVocab, kTileSizes[t]) * 8) / 1e6,
        tiles_ms[t][0] * 1e3, tiles_ms[t][0] / read_ms, tiles_ms[t][1] * 1e3);
  std::printf(
      "%-5s batch %3lld: one copy of the logits (in L2 while %.1f MB fit): sample_rows %8.2f us, "
      "from tiles of %3lld tokens %8.2f us\n",
      dtype_name(dtype), static_cast<long long>(rows), static_cast<double>(logit_bytes) / 1e6,
      warm_ms * 1e3, static_cast<long long>(kTileSizes[1]), warm_tiles_ms * 1e3);
#if defined(ROOFLINE_PHASE_TRACE)
  if (trace) {
    static const std::vector<std::string> kNames = {"entry",
                                                    "params, edits checked (PDL wait)",
                                                    "pass 1 over the slice",
                                                    "counted in",
                                                    "merged",
                                                    "pass 1 (unsplit), counts",
                                                    "top-k pivot",
                                                    "candidates gathered",
                                                    "candidates ranked",
                                                    "relative probabilities",
                                                    "top-p, min-p, draw",
                                                    "token"};
    static const std::vector<std::string> kTileNames = {"entry",
                                                        "params read, edits marked",
                                                        "PDL wait, summary loads out",
                                                        "summaries read, dirty tiles known",
                                                        "first digit",
                                                        "pivot, tiles listed, edited values",
                                                        "candidates gathered",
                                                        "k-th rank key found",
                                                        "top k in order",
                                                        "token"};
    greedy = false;
    split = true;
    tile_size = 1;  // the tile path from tiles of 128 tokens
    const int64_t capacity = kCallsPerGraph * std::max<int64_t>(rows, kSampleSplitMaxBlocks);
    bench::GpuArray records(static_cast<size_t>(capacity * kPhaseTraceWords) * 8);
    std::vector<uint64_t> host(static_cast<size_t>(capacity * kPhaseTraceWords));
    // kCallsPerGraph launches of `launch` recorded by `recorder`, then its report.
    auto trace_launches = [&](PhaseTraceRecorder& recorder, auto&& launch,
                              const std::vector<std::string>& names) {
      ROOFLINE_CUDA_CHECK(cudaMemset(records.get(), 0, records.bytes()));
      bench::settle();
      recorder.arm(static_cast<uint64_t*>(records.get()), capacity);
      for (int i = 0; i < kCallsPerGraph; ++i) launch(i % copies, stream);
      ROOFLINE_CUDA_CHECK(cudaStreamSynchronize(stream));
      const auto launches = recorder.disarm();
      check_errors();
      ROOFLINE_CUDA_CHECK(
          cudaMemcpy(host.data(), records.get(), host.size() * 8, cudaMemcpyDeviceToHost));
      std::printf("%s", phase_trace_report(phase_trace_analyse(host, launches), names).c_str());
    };
    trace_launches(sample_rows_phase_trace(), sample, kNames);
    std::printf("from tiles of %lld tokens:\n", static_cast<long long>(kTileSizes[1]));
    trace_launches(sample_rows_tiles_phase_trace(), sample_tiles, kTileNames);
  }
#endif
}

}  // namespace
}  // namespace roofline

// sampling_cuda_bench [ROWS [bf16|f32]]: every batch and dtype, or only the one named (to point
// Nsight Compute at one launch); sampling_trace_bench trace ROWS [bf16|f32]: that one, traced.
int main(int argc, char** argv) {
  bool trace = false;
  if (argc >= 2 && std::string(argv[1]) == "trace") {
#if defined(ROOFLINE_PHASE_TRACE)
    if (argc < 3) {
      std::fprintf(stderr, "usage: sampling_trace_bench trace ROWS (>= 1) [bf16|f32]\n");
      return 2;
    }
    trace = true;
    --argc;
    ++argv;
#else
    std::fprintf(stderr,
                 "sampling_cuda_bench: `trace` needs the phase marks compiled in: run "
                 "sampling_trace_bench trace ROWS [bf16|f32]\n");
    return 2;
#endif
  }
  std::vector<int64_t> batches = {1, 64, 256};
  std::vector<roofline::DType> dtypes = {roofline::DType::kBF16, roofline::DType::kF32};
  if (argc > 3 || (argc >= 2 && std::atoll(argv[1]) < 1) ||
      (argc == 3 && std::string(argv[2]) != "bf16" && std::string(argv[2]) != "f32")) {
    std::fprintf(stderr, "usage: sampling_cuda_bench [ROWS (>= 1) [bf16|f32]]\n");
    return 2;
  }
  if (argc >= 2) batches = {std::atoll(argv[1])};
  if (argc == 3)
    dtypes = {std::string(argv[2]) == "f32" ? roofline::DType::kF32 : roofline::DType::kBF16};
  if (!roofline::bench::gpu_present()) {
    std::printf("sampling_cuda_bench: no CUDA device, skipped\n");
    return 0;
  }
  cudaStream_t stream;
  ROOFLINE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::printf(
      "sample_rows_cuda, vocab %lld, top-k 50 + top-p 0.9 + temperature 0.8 + penalties over %d "
      "history tokens per row, inside a CUDA graph:\n",
      static_cast<long long>(roofline::kVocab), roofline::kHistory);
  for (const roofline::DType dtype : dtypes)
    for (const int64_t rows : batches) roofline::run_batch(rows, dtype, stream, trace);
  ROOFLINE_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}
