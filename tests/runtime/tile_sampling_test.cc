// The CUDA backend's choice of sampler for a step (runtime/tile_sampling.h): a pure host policy.
#include "runtime/tile_sampling.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace roofline {
namespace {

TEST(TileSamplingTest, StepsOfQualifyingRowsUpToTheBoundTakeTheTileSampler) {
  constexpr int64_t kVocab = 128256;
  SamplingRowParams greedy;
  SamplingRowParams top_k;
  top_k.temperature = 0.8f;
  top_k.top_k = 50;
  top_k.top_p = 0.9f;
  top_k.repetition_penalty = 1.2f;
  EXPECT_TRUE(step_uses_tile_sampler({greedy}, 1, kVocab, 8));
  EXPECT_TRUE(step_uses_tile_sampler({greedy, top_k, top_k}, 4, kVocab, 8));
  EXPECT_TRUE(step_uses_tile_sampler({top_k}, 8, kVocab, 8));
  // Past the bound (the padded batch counts: the LM head runs at it), or off.
  EXPECT_FALSE(step_uses_tile_sampler({top_k}, 9, kVocab, 8));
  EXPECT_FALSE(step_uses_tile_sampler({greedy}, 1, kVocab, 0));
  EXPECT_FALSE(step_uses_tile_sampler({}, 1, kVocab, 8));
  // One row the tile sampler cannot finish sends the whole step to the full chain.
  SamplingRowParams logprobs = greedy;
  logprobs.num_top_logprobs = 0;
  SamplingRowParams no_top_k = top_k;
  no_top_k.top_k = 0;
  SamplingRowParams big_k = top_k;
  big_k.top_k = kSamplingFastTopK + 1;
  SamplingRowParams k_of_vocab = top_k;
  k_of_vocab.top_k = 1000;
  for (const SamplingRowParams& r : {logprobs, no_top_k, big_k})
    EXPECT_FALSE(step_uses_tile_sampler({greedy, r}, 2, kVocab, 8));
  EXPECT_FALSE(step_uses_tile_sampler({k_of_vocab}, 1, 1000, 8));  // top_k must be below vocab
}

TEST(TileSamplingTest, TheBoundComesFromTheEnvironmentOrSaysWhyNot) {
  std::string error;
  EXPECT_EQ(tile_sampler_max_rows(nullptr, &error), kTileSamplerDefaultMaxRows);
  EXPECT_TRUE(error.empty());
  EXPECT_EQ(tile_sampler_max_rows("0", &error), 0);
  EXPECT_TRUE(error.empty());
  EXPECT_EQ(tile_sampler_max_rows("64", &error), 64);
  EXPECT_EQ(tile_sampler_max_rows("65535", &error), 65535);
  EXPECT_TRUE(error.empty());
  for (const char* bad : {"", "-1", "8x", "65536", "1e3", "999999"}) {
    EXPECT_EQ(tile_sampler_max_rows(bad, &error), kTileSamplerDefaultMaxRows) << bad;
    EXPECT_NE(error.find("ROOFLINE_TILE_SAMPLER_ROWS"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace roofline
