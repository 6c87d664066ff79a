// GGUF -> roofline model: the ModelConfig a llama.cpp GGUF describes, and its tensors under
// Hugging Face names and shapes.
//
// Architectures (general.architecture): "llama" (LlamaForCausalLM; Mistral ships as this too),
// "qwen2" (Qwen2ForCausalLM), "qwen3" (Qwen3ForCausalLM). Anything else, and llama-family
// features roofline cannot reproduce exactly (mixture of experts, llama3 rope factors stored as a
// rope_freqs tensor, partial rotary, rope types other than linear), is Unimplemented with a
// message naming it.
//
// Decision: every tensor is dequantised to f32 at load time into buffers the WeightStore owns.
// That is exact against gguf-py's (and ggml's) reference dequantisers, keeps every later layer
// unchanged (they read f32/f16/bf16 views), and matches the CPU backend, which computes in f32
// anyway; the cost is memory (the default 135M-parameter model takes 540 MB). Keeping weights
// quantised and dequantising on use belongs to the later quantisation work.
//
// Weight layout: HF shape = reversed ggml dims. llama.cpp's converter permutes the rows of each
// q_proj / k_proj head (weight and bias) of "llama" models from Hugging Face's rotate-half order
// to the interleaved-pairs order its RoPE uses; loading applies the inverse so roofline's
// rotate-half RoPE sees Hugging Face's layout. qwen2/qwen3 files are not permuted.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "io/gguf.h"
#include "io/model_config.h"
#include "io/weight_store.h"
#include "roofline/status.h"

namespace roofline {

// The config from the file's metadata, validated like a config.json (validate_model_config).
StatusOr<ModelConfig> model_config_from_gguf(const GgufFile& file);

// The Hugging Face name of a GGUF tensor ("blk.3.attn_q.weight" ->
// "model.layers.3.self_attn.q_proj.weight"), or nullopt for names roofline does not know.
std::optional<std::string> hf_tensor_name(const std::string& gguf_name);

// The Hugging Face row that GGUF row `row` of a llama q/k projection (weight or bias) holds:
// inside each head of head_dim rows, GGUF row 2j + s is HF row s * head_dim / 2 + j.
int64_t llama_qk_hf_row(int64_t row, int64_t head_dim);

// Every tensor of the file, dequantised to f32 under its HF name and shape (q/k un-permuted for
// llama). Each tensor must be one `config` implies, with the shape it implies, and every tensor
// it implies must be present; errors name the GGUF tensor and the file. Dequantisation runs on
// ThreadPool::global().
StatusOr<std::unique_ptr<WeightStore>> load_gguf_weights(const GgufFile& file,
                                                         const ModelConfig& config);

}  // namespace roofline
