// open_model_files: one entry point for every model format roofline reads.
//
//   a directory                 -> Hugging Face layout: config.json + model.safetensors (or shards)
//   a regular file named *.gguf -> llama.cpp GGUF (weights dequantised to f32, see gguf_model.h)
//
// Anything else is an error that says which two forms are accepted.
#pragma once

#include <memory>
#include <string>

#include "io/gguf.h"
#include "io/model_config.h"
#include "io/weight_store.h"
#include "roofline/status.h"

namespace roofline {

struct ModelFiles {
  ModelConfig config;
  std::unique_ptr<WeightStore> weights;
  // Non-null for GGUF, so the tokenizer can read its tokenizer.ggml.* metadata from the same file.
  std::shared_ptr<const GgufFile> gguf;
};

StatusOr<ModelFiles> open_model_files(const std::string& path);

}  // namespace roofline
