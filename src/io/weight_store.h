// WeightStore: every tensor of a Hugging Face model directory, by name, as zero-copy views into
// memory-mapped safetensors files (a single model.safetensors or shards listed by
// model.safetensors.index.json).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"
#include "roofline/status.h"

namespace roofline {

class WeightStore {
 public:
  static StatusOr<std::unique_ptr<WeightStore>> open(const std::string& model_dir);

  bool contains(const std::string& name) const;
  // The tensor, or NotFound naming it and the directory.
  StatusOr<TensorView> get(const std::string& name) const;
  // The tensor, checked to be f32/f16/bf16 with exactly this shape; errors name the tensor, what
  // the file has and what the config implies.
  StatusOr<TensorView> get_float(const std::string& name, const Shape& expected) const;

  std::vector<std::string> names() const;
  uint64_t total_bytes() const { return total_bytes_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, std::pair<size_t, TensorView>> tensors_;
  uint64_t total_bytes_ = 0;
};

}  // namespace roofline
