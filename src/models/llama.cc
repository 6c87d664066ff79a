// Llama 2/3 and Mistral: the plain dense decoder; attention_bias adds biases to q/k/v and o.
// (Mistral's sliding window comes from the config and is applied by attention.)
#include "models/dense_decoder.h"

namespace roofline {

StatusOr<Graph> build_llama_graph(const ModelConfig& config, const WeightStore& weights,
                                  const GraphOptions& options) {
  DenseDecoderSpec spec;
  spec.qkv_bias = config.qkv_bias;
  spec.o_bias = config.o_bias;
  return build_dense_decoder(config, spec, weights, options);
}

}  // namespace roofline
