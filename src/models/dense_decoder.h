// The dense decoder-only transformer shared by the Llama family (Llama 2/3, Mistral, Qwen2,
// Qwen3): pre-norm blocks of GQA attention with RoPE and a SiLU-gated MLP. An architecture is a
// DenseDecoderSpec (which optional pieces it has); everything else comes from the ModelConfig.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"
#include "io/model_config.h"
#include "io/weight_store.h"
#include "roofline/status.h"

namespace roofline {

struct DenseDecoderSpec {
  bool qkv_bias = false;  // q/k/v projections carry a bias (Qwen2; Llama with attention_bias)
  bool o_bias = false;    // o projection carries a bias (Llama with attention_bias)
  bool qk_norm = false;   // per-head RMSNorm of q and k before RoPE (Qwen3)
};

struct GraphOptions {
  // true: logits for every token of the step ([T, vocab]); false: only for each sequence's last
  // token ([B, vocab]), which is all generation needs and skips most of the LM head in prefill.
  bool all_logits = false;
  // Element type of activations (f32 on the CPU backend, bf16 on the GPU).
  DType activation_dtype = DType::kF32;
};

// Emits the graph; every weight it names is checked to exist in `weights` with the shape the
// config implies, so a mismatched checkpoint fails here with the tensor's name.
StatusOr<Graph> build_dense_decoder(const ModelConfig& config, const DenseDecoderSpec& spec,
                                    const WeightStore& weights, const GraphOptions& options);

// Every weight the graph of `config` reads, with its shape: what a checkpoint must hold (and
// what --dummy-weights creates). Kept beside the builder; a test checks the two agree.
std::vector<std::pair<std::string, Shape>> dense_decoder_weight_shapes(const ModelConfig& config);

// The checkpoint's tensors that the graph of `config` does not read (rotary_emb.inv_freq buffers
// aside), sorted: what Hugging Face would also leave unused, for the caller to report. A tensor
// of a layer at or past config.num_layers is an error instead (config.json's num_hidden_layers
// does not describe this checkpoint, and running it would silently drop layers).
StatusOr<std::vector<std::string>> unused_checkpoint_tensors(const ModelConfig& config,
                                                             const WeightStore& weights);

// Dispatches on config.architecture to the family's builder (llama.cc, qwen.cc).
StatusOr<Graph> build_model_graph(const ModelConfig& config, const WeightStore& weights,
                                  const GraphOptions& options);

// Per-architecture builders.
StatusOr<Graph> build_llama_graph(const ModelConfig& config, const WeightStore& weights,
                                  const GraphOptions& options);
StatusOr<Graph> build_qwen_graph(const ModelConfig& config, const WeightStore& weights,
                                 const GraphOptions& options);

}  // namespace roofline
