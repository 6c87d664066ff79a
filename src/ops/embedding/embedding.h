// embedding: gathers one row of the token-embedding table per token.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace roofline {

struct EmbeddingParams {
  const int32_t* token_ids = nullptr;  // [num_tokens], each in [0, vocab_size)
  const void* table = nullptr;         // [vocab_size, hidden] in table_dtype
  DType table_dtype = DType::kF32;
  float* out = nullptr;                // [num_tokens, hidden]
  int64_t num_tokens = 0;
  int64_t hidden = 0;
  int64_t vocab_size = 0;
};

void embedding_cpu(const EmbeddingParams& p);

}  // namespace roofline
