// Where a model comes from: files on disk (a Hugging Face directory or a GGUF file) or a named
// shape with dummy weights (tensors with shapes but no bytes; the backend fills them).
#pragma once

#include <memory>
#include <string>

#include "io/gguf.h"
#include "io/model_config.h"
#include "io/weight_store.h"
#include "roofline/status.h"

namespace roofline {

struct ModelSource {
  ModelConfig config;
  std::unique_ptr<WeightStore> weights;
  std::shared_ptr<const GgufFile> gguf;  // set for GGUF files (the tokenizer reads its metadata)
};

// Exactly one of path and dummy_name is non-empty.
StatusOr<ModelSource> open_model_source(const std::string& path, const std::string& dummy_name);

}  // namespace roofline
