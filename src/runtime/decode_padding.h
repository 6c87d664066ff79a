// Decode batches on the GPU run at fixed shapes so a CUDA graph captured once per shape can be
// replayed every step: the batch is padded up to a bucket, the block table is laid out at the
// full capacity width, and attention is told the capacity bound instead of this step's longest
// context. The CUDA backend does this for every decode step, with or without graphs, so
// --no-cuda-graphs changes only how the same kernels are launched and the logits stay identical.
// Pure host code, tested on the CPU (tests/runtime/decode_padding_test.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/step_buffers.h"

namespace roofline {

// Buckets 1, 2, 4, 8, 16, 24, 32, then every 16 up to max_batch; max_batch itself is always the
// last bucket. Ascending. max_batch >= 1.
std::vector<int64_t> decode_batch_buckets(int64_t max_batch);

// The smallest bucket >= batch, or 0 when batch exceeds the largest.
int64_t decode_bucket(const std::vector<int64_t>& buckets, int64_t batch);

// True when every sequence of `step` brings exactly one token (a decode step).
bool is_decode_step(const StepBuffers& step);

// `step` (a decode step of B <= bucket sequences, block_table_width <= table_width) as a step of
// `bucket` sequences whose block table has `table_width` columns. Padding rows: token 0 at
// position 0, slot -1 (nothing is written to the KV cache), one cached token (seq_len 1) in
// block 0 — whatever block 0 holds, it only feeds the padding row's own output, which the caller
// drops. Real rows keep their values. Only the first max(1, step's width) columns of each table
// row are written (out->table_columns_read says how many): the entries past them are never read —
// a sequence reads only the pages its seq_len covers — so they keep whatever a previous call left,
// and the cost of a step is its batch times its own width, not times the capacity (a server's
// --max-model-len 32768 is 2,048 columns). `out` is reused across calls.
void pad_decode_step(const StepBuffers& step, int64_t bucket, int64_t table_width,
                     StepBuffers* out);

}  // namespace roofline
