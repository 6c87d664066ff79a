// embedding_cpu: one table row per token, converted to f32 (the table may be f16 or bf16).
// Memory bound: reads hidden·dtype_size bytes and writes 4·hidden bytes per token.
#include <algorithm>

#include "core/check.h"
#include "core/thread_pool.h"
#include "ops/embedding/embedding.h"

namespace roofline {

void embedding_cpu(const EmbeddingParams& p) {
  ROOFLINE_CHECK(p.num_tokens >= 0 && p.hidden > 0 && p.vocab_size > 0);
  ROOFLINE_CHECK(is_float_dtype(p.table_dtype));
  ROOFLINE_CHECK_MSG(p.dtype == DType::kF32, "the CPU backend computes in f32");
  if (p.num_tokens == 0) return;
  ROOFLINE_CHECK(p.token_ids != nullptr && p.table != nullptr && p.out != nullptr);
  const int64_t row_bytes = p.hidden * dtype_size_bytes(p.table_dtype);
  const auto* table = static_cast<const uint8_t*>(p.table);
  auto* out = static_cast<float*>(p.out);
  // Each token copies a whole row; a few rows per chunk amortise the pool hand-off.
  const int64_t min_chunk = std::max<int64_t>(1, 16384 / p.hidden);
  ThreadPool::global().parallel_for(p.num_tokens, min_chunk, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t id = p.token_ids[t];
      // Ids come from our tokenizer or from a request the engine has already validated, so an
      // out-of-range id here is a bug, not bad input.
      ROOFLINE_CHECK(id >= 0 && id < p.vocab_size);
      convert_to_f32(table + id * row_bytes, p.table_dtype, p.hidden, out + t * p.hidden);
    }
  });
}

}  // namespace roofline
