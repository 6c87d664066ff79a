// StepBuffers: the per-step metadata a plan reads through its step inputs (graph.h StepInput),
// filled by the runner before each step. On the GPU these become fixed device buffers so a
// captured CUDA graph can be replayed after the host rewrites them.
#pragma once

#include <cstdint>
#include <vector>

namespace roofline {

struct StepBuffers {
  int64_t num_tokens = 0;
  int64_t num_seqs = 0;
  int64_t block_table_width = 0;  // max blocks per sequence in this bucket
  // The leading columns of every block-table row that a sequence may read (its pages); the rest
  // are never read and may hold stale entries (a padded decode step's table is laid out at the
  // capacity width but filled and uploaded only this far). 0: all block_table_width columns.
  int64_t table_columns_read = 0;
  std::vector<int32_t> token_ids;         // [num_tokens]
  std::vector<int32_t> positions;         // [num_tokens]
  std::vector<int64_t> slot_mapping;      // [num_tokens]
  std::vector<int32_t> block_tables;      // [num_seqs, block_table_width]
  std::vector<int32_t> seq_lens;          // [num_seqs]
  std::vector<int32_t> query_start;       // [num_seqs + 1]
  std::vector<int32_t> last_token_index;  // [num_seqs]

  const void* data(int step_input) const;
};

}  // namespace roofline
