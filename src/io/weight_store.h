// WeightStore: every tensor of a model, by Hugging Face name. For a Hugging Face model directory
// the tensors are zero-copy views into memory-mapped safetensors files (a single model.safetensors
// or shards listed by model.safetensors.index.json); a store can instead own its tensors, which is
// how GGUF weights arrive (dequantised to f32 at load, see io/gguf_model.h).
#pragma once

#include <deque>
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
  // An empty store that owns its tensors; `source` (e.g. the GGUF path) names it in errors.
  static std::unique_ptr<WeightStore> create_owning(const std::string& source);

  // Allocates a tensor the store owns (64-byte aligned, uninitialised) and returns a view for the
  // caller to fill before the store is shared. InvalidArgument if the name is taken or the shape
  // is empty or negative; ResourceExhausted if the memory is not there.
  StatusOr<TensorView> add_owned(const std::string& name, DType dtype, const Shape& shape);
  // Registers a tensor with a dtype and shape but no bytes (its view's data is null): dummy
  // weights, which the backend fills where they are used. Counts toward total_bytes(). Same
  // errors as add_owned, except that nothing is allocated.
  Status add_virtual(const std::string& name, DType dtype, const Shape& shape);

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
  // The tensor's size in bytes after checking the name is free and the shape sane.
  StatusOr<int64_t> check_new_tensor(const std::string& name, DType dtype,
                                     const Shape& shape) const;

  struct AlignedFree {
    void operator()(uint8_t* p) const;
  };
  // Index of the file a tensor lives in, or kOwned for tensors in owned_.
  static constexpr size_t kOwned = ~size_t{0};

  std::string dir_;  // the model directory, or the source of an owning store
  bool owning_ = false;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::deque<std::unique_ptr<uint8_t[], AlignedFree>> owned_;
  std::map<std::string, std::pair<size_t, TensorView>> tensors_;
  uint64_t total_bytes_ = 0;
};

}  // namespace roofline
