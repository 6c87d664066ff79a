// Which sampler a sampled step runs on the GPU (cuda_backend.cu): the tile sampler
// (sample_rows_tiles_cuda, reading the logit tile summaries that the LM head leaves) or the
// full-row chain (sample_rows_cuda). Pure host code, tested on the CPU
// (tests/runtime/tile_sampling_test.cc).
//
// The tile sampler finishes greedy rows and rows with a top-k of at most kSamplingFastTopK and no
// logprobs (sample_row_uses_tiles). A step takes it only when every row qualifies, so one launch
// samples the whole step and no row needs the full path after it, and only when the step has at
// most ROOFLINE_TILE_SAMPLER_ROWS rows (its padded decode batch). Off by default: measured in
// decode steps on the H200 (bench/results/2026-12-04-engine-tile-sampler.md), it saves 8.7 us a
// step on llama3-8b at batch 1 (3.799 -> 3.790 ms, -0.23 %: the skinny GEMM writes the summaries
// in its epilogue for +1.7 us), but costs 5-7 us on qwen2.5-0.5b at batch 1-4 (+0.9-1.1 %: with
// K = 896 the same epilogue costs +8.4 us, more than the 4-5 us the sampler saves after the LM
// head), and at 64 rows the summaries' own pass behind cuBLASLt costs more than the sampler saves
// (10.7 + 12.7 us against 22.1 us). ROOFLINE_TILE_SAMPLER_ROWS=8 turns it on up to 8 rows.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "ops/sampling/sampling.h"

namespace roofline {

inline constexpr int64_t kTileSamplerDefaultMaxRows = 0;  // off (see above)
// The summaries' tiles: 128 tokens, a whole wide-GEMM tile and 8 skinny-GEMM column blocks.
inline constexpr int64_t kTileSamplerTileTokens = 128;

// The bound ROOFLINE_TILE_SAMPLER_ROWS gives (`value`: the variable, or null when unset): its
// number, 0 (never) to 65535, or the default. *error says why a value was not taken (empty
// otherwise).
inline int64_t tile_sampler_max_rows(const char* value, std::string* error) {
  error->clear();
  if (value == nullptr) return kTileSamplerDefaultMaxRows;
  const std::string v = value;
  if (v.empty() || v.size() > 5 || v.find_first_not_of("0123456789") != std::string::npos ||
      std::atol(v.c_str()) > 65535) {
    *error = "ROOFLINE_TILE_SAMPLER_ROWS='" + v +
             "' is not a row count from 0 (never) to 65535: ignored (" +
             std::to_string(kTileSamplerDefaultMaxRows) + ")";
    return kTileSamplerDefaultMaxRows;
  }
  return std::atol(v.c_str());
}

// Whether a step samples `rows` (its entries' rows; the padding rows of a decode bucket are inert
// greedy rows, which qualify) of `vocab` logits through the tile sampler, with the LM head run at
// `padded_rows` rows: every row qualifies and padded_rows <= max_rows.
inline bool step_uses_tile_sampler(const std::vector<SamplingRowParams>& rows, int64_t padded_rows,
                                   int64_t vocab, int64_t max_rows) {
  if (rows.empty() || padded_rows > max_rows) return false;
  for (const SamplingRowParams& r : rows)
    if (!sample_row_uses_tiles(r, vocab)) return false;
  return true;
}

}  // namespace roofline
