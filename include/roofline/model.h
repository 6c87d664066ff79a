// roofline's public model API: load a Hugging Face model directory and generate from token ids.
//
// Example:
//   roofline::ModelOptions options;
//   options.model_dir = "path/to/model";
//   auto model = roofline::Model::load(options);
//   if (!model.ok()) { /* model.status().to_string() says what to fix */ }
//   auto tokens = (*model)->generate({1, 2, 3}, {}, [](int32_t t) { return true; });
//
// The request-level engine (continuous batching, streaming, abort) builds on this in engine.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "roofline/status.h"

namespace roofline {

struct ModelOptions {
  std::string model_dir;          // HF directory (config.json + safetensors) or a .gguf file
  std::string dummy_weights;      // instead of model_dir: a known shape with random weights
  std::string device = "cpu";     // "cpu", "cuda" or "cuda:N"
  int64_t kv_block_size = 16;     // tokens per KV-cache block
  int64_t max_step_tokens = 512;  // tokens per forward step; longer prompts are prefilled in chunks
  int64_t max_seqs = 8;           // sequences per step
  int64_t max_model_len = 0;      // 0: the model's max_position_embeddings
  int64_t kv_cache_tokens = 0;    // KV-cache capacity in tokens; 0: a default sized from the above
  int64_t kv_memory_bytes = 0;    // or: the KV cache's size in bytes
  double kv_memory_fraction = 0;  // or: this share of the memory free after weights and workspace
                                  // (all three 0: 80 % on a GPU, 1 GiB on the CPU)
  int num_threads = 0;            // CPU worker threads; 0: one per hardware thread
  bool fuse = true;               // run the graph fusion passes
  bool cuda_graphs = true;  // CUDA: replay each decode step as a CUDA graph (per batch bucket)
};

// The options' own ranges and spelling (device, sizes, the KV-cache budget, threads), each error
// naming its flag: what Model::load refuses before it opens a file. A caller can check them before
// anything slow; what needs the model (e.g. max_model_len against its limit) is checked on load.
Status check_model_options(const ModelOptions& options);

struct ModelInfo {
  std::string architecture;  // e.g. "LlamaForCausalLM"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_model_len = 0;
  uint64_t weight_bytes = 0;
  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;
};

struct GenerateOptions {
  int64_t max_new_tokens = 32;
  float temperature = 0.0f;  // 0: greedy
  int32_t top_k = 0;         // 0: no top-k cut
  float top_p = 1.0f;
  uint64_t seed = 0;
  bool stop_at_eos = true;
};

// InvalidArgument, naming the flag, for a negative max_new_tokens or top_k, a top_p outside
// (0, 1] or a temperature that is negative or not finite. Model::generate checks them first.
Status check_generate_options(const GenerateOptions& options);

// Why generation ended.
enum class GenerateEnd {
  kMaxTokens,    // max_new_tokens were generated
  kEos,          // an end-of-sequence token (stop_at_eos)
  kModelLength,  // the sequence reached the model length (--max-model-len) before max_new_tokens
  kStopped,      // the caller's callback returned false
};

// "max_tokens", "eos", "model_length", "stopped".
const char* generate_end_name(GenerateEnd end);

struct GenerateStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_ms = 0;  // up to and including the first generated token
  double decode_ms = 0;   // the remaining tokens
  GenerateEnd end = GenerateEnd::kMaxTokens;
  int64_t max_model_len = 0;  // the model length the sequence was held to
};

// One turn of a conversation, for chat templates.
struct ChatTurn {
  std::string role;     // "system", "user", "assistant"
  std::string content;  // UTF-8
};

class Model {
 public:
  static StatusOr<std::unique_ptr<Model>> load(const ModelOptions& options);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelInfo& info() const;

  // Generates up to max_new_tokens tokens after `prompt`. on_token (may be empty) sees each token
  // as soon as it exists; returning false from it stops generation. Returns the generated tokens.
  StatusOr<std::vector<int32_t>> generate(const std::vector<int32_t>& prompt,
                                          const GenerateOptions& options,
                                          const std::function<bool(int32_t)>& on_token,
                                          GenerateStats* stats = nullptr);

  // Logits of the prompt's prefill (one row per prompt token) followed by decode_steps greedy
  // decode steps (one row each): [prompt.size() + decode_steps, vocab_size], row-major.
  // greedy_tokens (may be null) receives the decode_steps + 1 tokens chosen along the way.
  StatusOr<std::vector<float>> logits(const std::vector<int32_t>& prompt, int64_t decode_steps,
                                      std::vector<int32_t>* greedy_tokens);

  // Text. Needs a tokenizer: tokenizer.json (+ tokenizer_config.json) beside the weights, or the
  // metadata of a GGUF file; without one these return FailedPrecondition-style InvalidArgument.
  bool has_tokenizer() const;
  // OK where the model has a tokenizer; else why not and what to give instead (token ids).
  Status need_tokenizer() const;
  // add_special_tokens: the tokenizer's BOS/EOS (off for text a chat template produced, which
  // carries its own).
  StatusOr<std::vector<int32_t>> tokenize(const std::string& text, bool add_special_tokens) const;
  StatusOr<std::string> detokenize(const std::vector<int32_t>& ids) const;
  // The conversation rendered with the model's own chat template.
  StatusOr<std::string> render_chat(const std::vector<ChatTurn>& turns,
                                    bool add_generation_prompt) const;
  // Generates from text, streaming complete UTF-8 pieces to on_text (return false to stop), and
  // stops at the tokenizer's end-of-sequence tokens unless options say otherwise. Returns the text.
  StatusOr<std::string> generate_text(const std::string& prompt, bool add_special_tokens,
                                      const GenerateOptions& options,
                                      const std::function<bool(const std::string&)>& on_text,
                                      GenerateStats* stats = nullptr);

 private:
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace roofline
