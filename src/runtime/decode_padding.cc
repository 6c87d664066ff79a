// Decode-step padding (see decode_padding.h).
#include "runtime/decode_padding.h"

#include <algorithm>

#include "core/check.h"

namespace roofline {

std::vector<int64_t> decode_batch_buckets(int64_t max_batch) {
  ROOFLINE_CHECK(max_batch >= 1);
  std::vector<int64_t> b;
  for (int64_t v : {1, 2, 4, 8, 16, 24, 32})
    if (v < max_batch) b.push_back(v);
  for (int64_t v = 48; v < max_batch; v += 16) b.push_back(v);
  b.push_back(max_batch);
  return b;
}

int64_t decode_bucket(const std::vector<int64_t>& buckets, int64_t batch) {
  for (int64_t b : buckets)
    if (b >= batch) return b;
  return 0;
}

bool is_decode_step(const StepBuffers& step) {
  return step.num_seqs > 0 && step.num_tokens == step.num_seqs;
}

void pad_decode_step(const StepBuffers& step, int64_t bucket, int64_t table_width,
                     StepBuffers* out) {
  ROOFLINE_CHECK(is_decode_step(step));
  const int64_t n = step.num_seqs;
  ROOFLINE_CHECK(bucket >= n && table_width >= step.block_table_width);
  out->num_tokens = bucket;
  out->num_seqs = bucket;
  out->block_table_width = table_width;
  out->token_ids = step.token_ids;
  out->token_ids.resize(static_cast<size_t>(bucket), 0);
  out->positions = step.positions;
  out->positions.resize(static_cast<size_t>(bucket), 0);
  out->slot_mapping = step.slot_mapping;
  out->slot_mapping.resize(static_cast<size_t>(bucket), -1);
  out->seq_lens = step.seq_lens;
  out->seq_lens.resize(static_cast<size_t>(bucket), 1);
  const int64_t read = std::max<int64_t>(1, step.block_table_width);
  out->table_columns_read = read;
  out->block_tables.resize(static_cast<size_t>(bucket * table_width));  // no rewrite past `read`
  for (int64_t s = 0; s < bucket; ++s) {
    int32_t* row = out->block_tables.data() + s * table_width;
    std::fill_n(row, read, 0);
    if (s < n)
      std::copy_n(step.block_tables.begin() + s * step.block_table_width, step.block_table_width,
                  row);
  }
  out->query_start.resize(static_cast<size_t>(bucket + 1));
  out->last_token_index.resize(static_cast<size_t>(bucket));
  for (int64_t s = 0; s <= bucket; ++s)
    out->query_start[static_cast<size_t>(s)] = static_cast<int32_t>(s);
  for (int64_t s = 0; s < bucket; ++s)
    out->last_token_index[static_cast<size_t>(s)] = static_cast<int32_t>(s);
}

}  // namespace roofline
