// Shape formatting.
#include "core/tensor.h"

namespace roofline {

std::string Shape::to_string() const {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

}  // namespace roofline
