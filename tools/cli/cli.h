// Pieces of the `roofline` command line shared by its translation units (main.cc, bench.cc).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/byte_size.h"
#include "roofline/engine.h"
#include "roofline/model.h"
#include "roofline/status.h"
#include "runtime/model_runner.h"

namespace roofline::cli {

// The model and engine flags every command takes.
struct CommonFlags {
  roofline::ModelOptions model;
  bool verbose = false;
  bool overlap_steps = false;  // EngineOptions::overlap_steps (--overlap)
  std::string kv_memory;       // --kv-memory as typed; parsed by resolve()
  // Turns the flags that need parsing into model options, then checks the model options' own
  // ranges (roofline::check_model_options), so a bad value is refused before anything loads.
  roofline::Status resolve() {
    if (!kv_memory.empty()) {
      auto bytes = roofline::parse_byte_size(kv_memory);
      if (!bytes.ok()) return bytes.status().with_context("--kv-memory");
      if (*bytes <= 0)
        return roofline::invalid_argument("--kv-memory must be positive, got '" + kv_memory + "'");
      model.kv_memory_bytes = *bytes;
    }
    return roofline::check_model_options(model);
  }
  void add(CLI::App* cmd) {
    cmd->add_option("--model", model.model_dir,
                    "Hugging Face model directory (config.json + safetensors) or a .gguf file");
    cmd->add_option("--dummy-weights", model.dummy_weights,
                    "Instead of --model: random weights of a known shape (llama3-8b, mistral-7b, "
                    "qwen2.5-0.5b, qwen2.5-7b, qwen3-0.6b, llama-tiny)");
    cmd->add_option("--device", model.device, "cpu, cuda or cuda:N")->capture_default_str();
    cmd->add_option("--kv-block-size", model.kv_block_size, "Tokens per KV-cache block")
        ->capture_default_str();
    cmd->add_option("--max-step-tokens", model.max_step_tokens,
                    "Tokens per forward step (longer prompts are prefilled in chunks)")
        ->capture_default_str();
    cmd->add_option("--max-model-len", model.max_model_len, "Context cap; 0 = the model's");
    cmd->add_option("--kv-cache-tokens", model.kv_cache_tokens, "KV-cache capacity; 0 = default");
    cmd->add_option("--kv-memory", kv_memory,
                    "Instead of --kv-cache-tokens: the KV cache's size, e.g. 8GiB, 512MiB");
    cmd->add_option("--kv-memory-fraction", model.kv_memory_fraction,
                    "Instead: this share (0-0.95] of the memory free after weights and workspace");
    cmd->add_option("--threads", model.num_threads, "CPU threads; 0 = all");
    cmd->add_flag(
        "--no-fuse", [this](int64_t) { model.fuse = false; }, "Skip the fusion passes");
    cmd->add_flag(
        "--no-cuda-graphs", [this](int64_t) { model.cuda_graphs = false; },
        "CUDA: launch every decode step kernel by kernel instead of replaying a graph");
    cmd->add_flag(
        "--overlap", [this](int64_t) { overlap_steps = true; },
        "Engine: launch each decode step before the previous one's tokens are back (overlapped "
        "decode; off by default)");
    cmd->add_flag("-v,--verbose", verbose, "Log what is loaded and planned");
  }
};

// Prints "roofline: <status>" to stderr; returns 1 (the exit status of a failed request).
int fail(const roofline::Status& s);
// The same for a command line refused before any work began (a flag's value out of its range):
// returns 2, the exit status of a bad command line.
int usage_error(const roofline::Status& s);
// InvalidArgument unless --max-num-seqs (requests running at once: generate --input, serve,
// bench throughput) is in [1, 4096].
roofline::Status check_max_num_seqs(int64_t max_num_seqs);
// The default model when neither --model nor --dummy-weights was given.
roofline::Status resolve_model(CommonFlags& f);
roofline::StatusOr<std::unique_ptr<roofline::ModelRunner>> create_runner(const CommonFlags& f);
// "[####......] done/total requests, X tok/s" on stderr, redrawn in place.
void print_progress(int64_t done, int64_t total, int64_t tokens, double seconds);

// bench.cc: `roofline bench throughput` and `roofline bench coldstart`.
struct ThroughputFlags {
  std::string input;  // JSONL requests (batch_input.h) instead of the synthetic ones
  int64_t requests = 200;
  std::string prompt_len = "32:1024";  // uniform [lo, hi]
  std::string output_len = "16:256";
  uint64_t seed = 0;
  int64_t max_num_seqs = 64;
  std::string json_path;      // "-": stdout
  std::string markdown_path;  // appended
};
int run_bench_throughput(CommonFlags& f, const ThroughputFlags& t);
struct ColdstartFlags {
  int64_t prompt_tokens = 16;
  std::string json_path;
  std::string markdown_path;
};
int run_bench_coldstart(CommonFlags& f, const ColdstartFlags& c);

}  // namespace roofline::cli
