// Qwen2 (q/k/v bias, no o bias) and Qwen3 (per-head q/k RMSNorm before RoPE, explicit head_dim).
#include "models/dense_decoder.h"

namespace roofline {

StatusOr<Graph> build_qwen_graph(const ModelConfig& config, const WeightStore& weights,
                                 const GraphOptions& options) {
  DenseDecoderSpec spec;
  spec.qkv_bias = config.qkv_bias;
  spec.o_bias = config.o_bias;
  spec.qk_norm = config.architecture == Architecture::kQwen3;
  return build_dense_decoder(config, spec, weights, options);
}

}  // namespace roofline
