// NumPy .npy files (format 1.0): the interchange for logits with Python (goldens, `roofline
// logits`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "roofline/status.h"

namespace roofline {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;  // always converted to f32 on read
};

// Writes a C-order little-endian float32 array.
Status write_npy_f32(const std::string& path, const std::vector<int64_t>& shape, const float* data);

// Reads a C-order '<f4', '<f8', '<i4' or '<i8' array as f32; anything else is an error.
StatusOr<NpyArray> read_npy(const std::string& path);

}  // namespace roofline
