// embedding: gathers one row of the token-embedding table per token.
//
// Element types: the table may be f32, f16 or bf16 (table_dtype); the output is in dtype, f32 on
// the CPU backend and bf16 (or f32) on the CUDA backend. Each element is converted once.
#pragma once

#include <cstdint>

#include "core/cuda_stream.h"
#include "core/dtype.h"

namespace roofline {

struct EmbeddingParams {
  const int32_t* token_ids = nullptr;  // [num_tokens], each in [0, vocab_size)
  const void* table = nullptr;         // [vocab_size, hidden] in table_dtype
  DType table_dtype = DType::kF32;
  void* out = nullptr;  // [num_tokens, hidden] in dtype
  int64_t num_tokens = 0;
  int64_t hidden = 0;
  int64_t vocab_size = 0;
  DType dtype = DType::kF32;  // of out
};

// CPU backend: dtype == kF32. An out-of-range id aborts.
void embedding_cpu(const EmbeddingParams& p);
// CUDA backend: dtype kBF16 or kF32, every pointer on the device. Asynchronous on `stream`. A
// kernel cannot abort, so the row of an out-of-range id (a bug upstream: ids are validated before
// they reach a step) is left unwritten rather than read from outside the table.
void embedding_cuda(const EmbeddingParams& p, CudaStream stream);

}  // namespace roofline
