// embedding_cuda: out[t] = table[token_ids[t]], converted from table_dtype (f32, f16, bf16) to the
// activation dtype (bf16 or f32).
//
// Algorithm: threadIdx.x / blockIdx.x walk the packs of a row (16-byte packs of the output: 8 bf16
// or 4 f32), blockIdx.y the tokens, two tokens per thread so both rows' loads are in flight. A
// hidden size that is not a multiple of the pack width, or a misaligned pointer, takes packs of
// one element. An id outside [0, vocab_size) leaves its row unwritten (a kernel cannot abort).
//
// Numerics: a conversion, rounded to nearest even; bf16 -> bf16 and f32 -> f32 are exact copies.
//
// Bound: memory. Reads T·H table elements, writes T·H.
#include <algorithm>

#include "ops/common/cuda_launch.cuh"
#include "ops/common/cuda_vector.cuh"
#include "ops/embedding/embedding.h"

namespace roofline {

namespace {

// 256 threads: whole warps, 8 blocks resident per SM at full occupancy.
constexpr int kThreads = 256;
// Tokens per thread: two independent row loads in flight.
constexpr int kRowsPerThread = 2;

template <typename Table, typename Out, int N>
__global__ void __launch_bounds__(kThreads)
    embedding_kernel(const int32_t* token_ids, const typename Table::Storage* table,
                     typename Out::Storage* out, int64_t num_tokens, int64_t hidden,
                     int64_t vocab_size) {
  cuda::touch_values(token_ids, table, out, num_tokens, hidden, vocab_size);
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  const int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= hidden / N) return;
  const int64_t col = p * N;
  for (int64_t t0 = static_cast<int64_t>(blockIdx.y) * kRowsPerThread; t0 < num_tokens;
       t0 += static_cast<int64_t>(gridDim.y) * kRowsPerThread) {
    float v[kRowsPerThread][N];
    bool valid[kRowsPerThread];
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int64_t t = t0 + r;
      const int64_t id = t < num_tokens ? token_ids[t] : -1;
      valid[r] = id >= 0 && id < vocab_size;
      if (valid[r]) cuda::load_f32<Table, N>(table + id * hidden + col, v[r]);
    }
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      if (valid[r]) cuda::store_f32<Out, N>(out + (t0 + r) * hidden + col, v[r]);
    }
  }
}

template <typename Table, typename Out, int N>
void launch_embedding(const EmbeddingParams& p, cudaStream_t stream) {
  const cuda::RowGrid g = cuda::row_grid(p.hidden / N, p.num_tokens, kThreads, kRowsPerThread);
  cuda::launch_pdl(embedding_kernel<Table, Out, N>, g.grid, g.block, 0, stream, p.token_ids,
                   static_cast<const typename Table::Storage*>(p.table),
                   static_cast<typename Out::Storage*>(p.out), p.num_tokens, p.hidden,
                   p.vocab_size);
}

template <typename Table>
void dispatch_output(const EmbeddingParams& p, cudaStream_t stream) {
  cuda::dispatch_activation(p.dtype, [&](auto tag) {
    using Out = decltype(tag);
    constexpr int kVec = cuda::kVec16<Out>;
    if (p.hidden % kVec == 0 && cuda::is_aligned(p.table, 16) && cuda::is_aligned(p.out, 16)) {
      launch_embedding<Table, Out, kVec>(p, stream);
    } else {
      launch_embedding<Table, Out, 1>(p, stream);
    }
  });
}

}  // namespace

void embedding_cuda(const EmbeddingParams& p, CudaStream stream) {
  ROOFLINE_CHECK(p.num_tokens >= 0 && p.hidden > 0 && p.vocab_size > 0);
  if (p.num_tokens == 0) return;
  ROOFLINE_CHECK(p.token_ids != nullptr && p.table != nullptr && p.out != nullptr);
  switch (p.table_dtype) {
    case DType::kBF16:
      dispatch_output<cuda::Bf16>(p, stream);
      break;
    case DType::kF16:
      dispatch_output<cuda::F16>(p, stream);
      break;
    case DType::kF32:
      dispatch_output<cuda::F32>(p, stream);
      break;
    default:
      ROOFLINE_CHECK_MSG(false, "the embedding table is f32, f16 or bf16");
  }
  ROOFLINE_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace roofline
