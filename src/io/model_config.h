// ModelConfig: what roofline needs from a Hugging Face config.json, validated.
//
// Both config styles are read: transformers 4.x (`rope_theta`, `rope_scaling`) and 5.x
// (`rope_parameters`). Every integer is range-checked; unsupported features (an architecture, a
// rope type, an activation, MLP bias) are errors that name the field, never silently ignored.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "roofline/status.h"

namespace roofline {

// The rope types roofline implements (transformers' "default", "linear", "llama3").
struct RopeScaling {
  enum class Type { kDefault, kLinear, kLlama3 } type = Type::kDefault;
  float factor = 1.0f;                   // linear, llama3
  float low_freq_factor = 1.0f;          // llama3
  float high_freq_factor = 4.0f;         // llama3
  int64_t original_max_position = 8192;  // llama3
};

enum class Architecture { kLlama, kMistral, kQwen2, kQwen3 };

const char* architecture_name(Architecture a);

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  std::string architecture_name;  // as in config.json, e.g. "LlamaForCausalLM"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // divides num_heads
  int64_t head_dim = 0;      // config's head_dim, else hidden_size / num_heads
  int64_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;       // Qwen2 always; Llama/Mistral when attention_bias
  bool o_bias = false;         // Llama/Mistral when attention_bias
  bool qk_norm = false;        // Qwen3
  int64_t sliding_window = 0;  // 0: none (applied to every layer when set)
  DType dtype = DType::kBF16;  // config's torch_dtype / dtype, informational
  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;
};

// The range checks every config must pass whichever file it came from (config.json, GGUF
// metadata): sizes within roofline's caps (so later size arithmetic cannot overflow), KV heads
// dividing heads, an even head_dim, positive finite eps / theta / rope factor, token ids inside
// the vocabulary. Messages name fields as config.json does ("num_hidden_layers"); `field_name`,
// when given, renames them for another source (e.g. to "llama.block_count").
Status validate_model_config(const ModelConfig& c, const std::string& source,
                             const std::function<std::string(const std::string&)>& field_name = {});

// Parses config.json text; `source` names the file in errors.
StatusOr<ModelConfig> parse_model_config(const std::string& json_text, const std::string& source);
// Reads and parses <model_dir>/config.json.
StatusOr<ModelConfig> load_model_config(const std::string& model_dir);

}  // namespace roofline
