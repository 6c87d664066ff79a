// TensorView: a non-owning, typed, row-major view of memory (host or device) with up to 4 dims.
// Weights are views into mmap'd files; activations are views into a plan's workspace.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/check.h"
#include "core/dtype.h"

namespace roofline {

constexpr int kMaxRank = 4;

struct Shape {
  std::array<int64_t, kMaxRank> dims{};
  int rank = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d) {
    ROOFLINE_CHECK(d.size() <= kMaxRank);
    for (int64_t v : d) dims[rank++] = v;
  }
  int64_t operator[](int i) const { return dims[i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  bool operator==(const Shape& o) const {
    if (rank != o.rank) return false;
    for (int i = 0; i < rank; ++i)
      if (dims[i] != o.dims[i]) return false;
    return true;
  }
  std::string to_string() const;  // "[4096, 128]"
};

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;

  int64_t numel() const { return shape.numel(); }
  int64_t size_bytes() const { return numel() * dtype_size_bytes(dtype); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

}  // namespace roofline
