// summarize_logit_tiles_cpu (logit_tiles.h): a plain scan of each tile, the oracle of the GPU
// writers (the skinny GEMM's epilogue, summarize_logit_tiles_cuda) and of the sampler's tests.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/check.h"
#include "ops/sampling/logit_tiles.h"

namespace roofline {

void summarize_logit_tiles_cpu(const void* logits, DType dtype, int64_t num_rows, int64_t vocab,
                               int64_t row_stride, const LogitTileSummaries& out) {
  ROOFLINE_CHECK_MSG(vocab >= 1 && vocab <= sampling::kMaxVocab,
                     "logit tiles: vocab must be in [1, 2^18]");
  ROOFLINE_CHECK_MSG(out.tile_tokens >= 1 && out.tile_tokens <= kLogitTileMaxTokens,
                     "logit tiles: tile_tokens must be in [1, 4096]");
  ROOFLINE_CHECK_MSG(logit_tiles(vocab, out.tile_tokens) <= kLogitTileMaxTiles,
                     "logit tiles: at most 16384 tiles a row (a larger tile_tokens)");
  ROOFLINE_CHECK_MSG(dtype == DType::kF32 || dtype == DType::kBF16,
                     "logit tiles: f32 or bf16 logits");
  ROOFLINE_CHECK_MSG(row_stride >= vocab, "logit tiles: row_stride must be >= vocab");
  ROOFLINE_CHECK(num_rows >= 0);
  if (num_rows == 0) return;
  ROOFLINE_CHECK(logits != nullptr && out.words != nullptr && out.nonfinite != nullptr &&
                 out.epoch != nullptr);
  const uint32_t epoch = *out.epoch;
  ROOFLINE_CHECK_MSG(epoch >= 1 && epoch < kLogitTileEpochs,
                     "logit tiles: the epoch must be in [1, 2^20)");
  const int64_t tile_tokens = out.tile_tokens;
  const int64_t tiles = logit_tiles(vocab, tile_tokens);
  std::vector<float> row(static_cast<size_t>(vocab));
  for (int64_t r = 0; r < num_rows; ++r) {
    convert_to_f32(static_cast<const uint8_t*>(logits) + r * row_stride * dtype_size_bytes(dtype),
                   dtype, vocab, row.data());
    uint32_t nonfinite = 0;
    for (int64_t t = 0; t < tiles; ++t) {
      // The largest word of the tile's logits: what the writers' atomicMax over pieces leaves.
      uint64_t word = uint64_t{epoch} << logit_tile::kEpochShift;  // no finite logit yet
      const int64_t end = std::min(vocab, (t + 1) * tile_tokens);
      for (int64_t i = t * tile_tokens; i < end; ++i) {
        const float v = row[static_cast<size_t>(i)];
        if (!sampling::is_finite(v)) ++nonfinite;
        word =
            std::max(word, logit_tile::value_word(epoch, v, static_cast<int>(i - t * tile_tokens)));
      }
      out.words[r * tiles + t] = word;
    }
    out.nonfinite[r] = logit_tile::nonfinite_word(epoch, nonfinite);
  }
}

}  // namespace roofline
