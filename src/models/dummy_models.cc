// The shape table behind --dummy-weights. Numbers are the published configs of each model.
#include "models/dummy_models.h"

namespace roofline {

namespace {

struct Entry {
  const char* name;
  Architecture arch;
  const char* arch_name;
  int64_t vocab, hidden, intermediate, layers, heads, kv_heads, head_dim, max_pos;
  double rope_theta;
  float eps;
  bool tied, qkv_bias, qk_norm;
};

constexpr Entry kEntries[] = {
    {"llama3-8b", Architecture::kLlama, "LlamaForCausalLM", 128256, 4096, 14336, 32, 32, 8, 128,
     8192, 500000.0, 1e-5f, false, false, false},
    {"mistral-7b", Architecture::kMistral, "MistralForCausalLM", 32768, 4096, 14336, 32, 32, 8, 128,
     32768, 1000000.0, 1e-5f, false, false, false},
    {"qwen2.5-0.5b", Architecture::kQwen2, "Qwen2ForCausalLM", 151936, 896, 4864, 24, 14, 2, 64,
     32768, 1000000.0, 1e-6f, true, true, false},
    {"qwen2.5-7b", Architecture::kQwen2, "Qwen2ForCausalLM", 152064, 3584, 18944, 28, 28, 4, 128,
     32768, 1000000.0, 1e-6f, false, true, false},
    {"qwen3-0.6b", Architecture::kQwen3, "Qwen3ForCausalLM", 151936, 1024, 3072, 28, 16, 8, 128,
     40960, 1000000.0, 1e-6f, true, false, true},
    // A tiny shape for tests and quick CPU runs.
    {"llama-tiny", Architecture::kLlama, "LlamaForCausalLM", 512, 64, 160, 2, 4, 2, 16, 256,
     10000.0, 1e-5f, false, false, false},
};

}  // namespace

std::vector<std::string> dummy_model_names() {
  std::vector<std::string> names;
  for (const Entry& e : kEntries) names.push_back(e.name);
  return names;
}

StatusOr<ModelConfig> dummy_model_config(const std::string& name) {
  for (const Entry& e : kEntries) {
    if (name != e.name) continue;
    ModelConfig c;
    c.architecture = e.arch;
    c.architecture_name = e.arch_name;
    c.vocab_size = e.vocab;
    c.hidden_size = e.hidden;
    c.intermediate_size = e.intermediate;
    c.num_layers = e.layers;
    c.num_heads = e.heads;
    c.num_kv_heads = e.kv_heads;
    c.head_dim = e.head_dim;
    c.max_position_embeddings = e.max_pos;
    c.rope_theta = e.rope_theta;
    c.rms_norm_eps = e.eps;
    c.tie_word_embeddings = e.tied;
    c.qkv_bias = e.qkv_bias;
    c.qk_norm = e.qk_norm;
    c.dtype = DType::kBF16;
    c.bos_token_id = 1;
    c.eos_token_ids = {2};
    return c;
  }
  std::string known;
  for (const std::string& n : dummy_model_names()) known += (known.empty() ? "" : ", ") + n;
  return invalid_argument("--dummy-weights '" + name + "' is not a known shape; known: " + known);
}

}  // namespace roofline
