// add: out = a + b elementwise (the residual add when it is not fused into a norm).
#pragma once

#include <cstdint>

namespace roofline {

struct AddParams {
  const float* a = nullptr;  // [n]
  const float* b = nullptr;  // [n]
  float* out = nullptr;      // [n]; may alias a or b
  int64_t n = 0;
};

void add_cpu(const AddParams& p);

}  // namespace roofline
