// CPU forward-pass benchmark: decode tokens/s at batch size 1, and prefill tokens/s, for a
// synthetic Llama-shaped model (bf16 weights, written to a temp dir once) and for the HF fixture
// models. Reports tokens/s and the weight bytes streamed per second, so the trend of the CPU
// backend is visible run to run:
//   build/cpu/bench/cpu_forward_bench --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/dtype.h"
#include "runtime/model_runner.h"

namespace roofline {
namespace {

namespace fs = std::filesystem;

struct SyntheticShape {
  int64_t hidden = 512, intermediate = 1536, layers = 4, heads = 8, kv_heads = 2, vocab = 8192;
};

// Writes config.json + model.safetensors (bf16, random) for a Llama-shaped model; returns its dir.
std::string write_synthetic_model(const SyntheticShape& s) {
  const fs::path dir = fs::temp_directory_path() / "roofline_bench_synthetic_llama";
  if (fs::exists(dir / "model.safetensors")) return dir.string();
  fs::create_directories(dir);
  const int64_t d = s.hidden / s.heads;
  nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}},
                           {"hidden_size", s.hidden},
                           {"intermediate_size", s.intermediate},
                           {"num_hidden_layers", s.layers},
                           {"num_attention_heads", s.heads},
                           {"num_key_value_heads", s.kv_heads},
                           {"vocab_size", s.vocab},
                           {"max_position_embeddings", 4096},
                           {"rms_norm_eps", 1e-5},
                           {"rope_theta", 500000.0},
                           {"tie_word_embeddings", false}};
  std::ofstream(dir / "config.json") << config.dump(1);
  std::vector<std::pair<std::string, std::vector<int64_t>>> tensors = {
      {"model.embed_tokens.weight", {s.vocab, s.hidden}},
      {"model.norm.weight", {s.hidden}},
      {"lm_head.weight", {s.vocab, s.hidden}}};
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    tensors.push_back({p + "input_layernorm.weight", {s.hidden}});
    tensors.push_back({p + "post_attention_layernorm.weight", {s.hidden}});
    tensors.push_back({p + "self_attn.q_proj.weight", {s.heads * d, s.hidden}});
    tensors.push_back({p + "self_attn.k_proj.weight", {s.kv_heads * d, s.hidden}});
    tensors.push_back({p + "self_attn.v_proj.weight", {s.kv_heads * d, s.hidden}});
    tensors.push_back({p + "self_attn.o_proj.weight", {s.hidden, s.heads * d}});
    tensors.push_back({p + "mlp.gate_proj.weight", {s.intermediate, s.hidden}});
    tensors.push_back({p + "mlp.up_proj.weight", {s.intermediate, s.hidden}});
    tensors.push_back({p + "mlp.down_proj.weight", {s.hidden, s.intermediate}});
  }
  nlohmann::json header = nlohmann::json::object();
  std::vector<uint16_t> data;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const auto& [name, shape] : tensors) {
    int64_t n = 1;
    for (int64_t v : shape) n *= v;
    const bool norm = shape.size() == 1;
    const float scale = norm ? 0.1f : 1.0f / std::sqrt(static_cast<float>(shape.back()));
    header[name] = {{"dtype", "BF16"},
                    {"shape", shape},
                    {"data_offsets", {data.size() * 2, (data.size() + n) * 2}}};
    for (int64_t i = 0; i < n; ++i)
      data.push_back(f32_to_bf16_bits((norm ? 1.0f : 0.0f) + scale * normal(rng)));
  }
  std::string h = header.dump();
  while (h.size() % 8) h += ' ';
  std::ofstream out(dir / "model.safetensors", std::ios::binary);
  const uint64_t len = h.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << h;
  out.write(reinterpret_cast<const char*>(data.data()),
            static_cast<std::streamsize>(data.size() * 2));
  return dir.string();
}

std::unique_ptr<ModelRunner> make_runner(const std::string& dir) {
  RunnerOptions o;
  o.model_dir = dir;
  o.max_model_len = 2048;
  auto r = ModelRunner::create(o);
  if (!r.ok()) {
    std::fprintf(stderr, "%s\n", r.status().to_string().c_str());
    std::abort();
  }
  return std::move(r).value();
}

std::string model_dir(const std::string& name) {
  if (name == "synthetic") return write_synthetic_model(SyntheticShape{});
  return std::string(ROOFLINE_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

// Decode at bs=1 with a 128-token context; each iteration is one token.
void BM_Decode(benchmark::State& state, const std::string& name) {
  auto r = make_runner(model_dir(name));
  int32_t seq = *r->add_sequence();
  std::vector<float> logits;
  if (!r->step({{seq, std::vector<int32_t>(128, 5)}}, false, &logits).ok()) std::abort();
  for (auto _ : state) {
    if (r->sequence_length(seq) >= 2000) {
      state.PauseTiming();
      (void)r->release_sequence(seq);
      seq = *r->add_sequence();
      (void)r->step({{seq, std::vector<int32_t>(128, 5)}}, false, &logits);
      state.ResumeTiming();
    }
    if (!r->step({{seq, {7}}}, false, &logits).ok()) std::abort();
  }
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["weights_GB/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) *
                             static_cast<double>(r->weights().total_bytes()) / 1e9,
                         benchmark::Counter::kIsRate);
}

// Prefill of 256 tokens; each iteration is one prompt.
void BM_Prefill(benchmark::State& state, const std::string& name) {
  auto r = make_runner(model_dir(name));
  std::vector<float> logits;
  const std::vector<int32_t> prompt(256, 11);
  for (auto _ : state) {
    int32_t seq = *r->add_sequence();
    if (!r->step({{seq, prompt}}, false, &logits).ok()) std::abort();
    (void)r->release_sequence(seq);
  }
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(state.iterations() * 256),
                                               benchmark::Counter::kIsRate);
}

BENCHMARK_CAPTURE(BM_Decode, synthetic_llama_512x4, std::string("synthetic"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Decode, llama_mha_fixture, std::string("llama_mha"))
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Decode, qwen3_fixture, std::string("qwen3_qknorm_hd32_sharded"))
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Prefill, synthetic_llama_512x4, std::string("synthetic"))
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace roofline

BENCHMARK_MAIN();
