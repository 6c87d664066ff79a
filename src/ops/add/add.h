// add: out = a + b elementwise (the residual add when it is not fused into a norm).
//
// Element types: the CPU backend takes f32 (dtype kF32); the CUDA backend takes bf16 or f32, with
// the sum formed in f32 and rounded once to dtype.
#pragma once

#include <cstdint>

#include "core/cuda_stream.h"
#include "core/dtype.h"

namespace roofline {

struct AddParams {
  const void* a = nullptr;  // [n] in dtype
  const void* b = nullptr;  // [n] in dtype
  void* out = nullptr;      // [n] in dtype; may alias a or b
  int64_t n = 0;
  DType dtype = DType::kF32;  // of a, b and out
};

// CPU backend: dtype == kF32.
void add_cpu(const AddParams& p);
// CUDA backend: dtype kBF16 or kF32, every pointer on the device. Asynchronous on `stream`.
void add_cuda(const AddParams& p, CudaStream stream);

}  // namespace roofline
