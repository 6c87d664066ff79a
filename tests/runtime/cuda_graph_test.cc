// CUDA graphs for decode (issue 8): a runner that replays captured graphs and one that launches
// kernel by kernel (--no-cuda-graphs) must give bit-identical logits for every batch bucket,
// padded batches included, over several decode steps of sequences with different contexts. Also:
// start-up capture covers every bucket. Skips itself without a GPU (or in a CPU-only build).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/decode_padding.h"
#include "runtime/model_runner.h"

namespace roofline {
namespace {

constexpr int64_t kMaxSeqs = 32;

StatusOr<std::unique_ptr<ModelRunner>> cuda_runner(bool graphs) {
  RunnerOptions o;
  o.dummy_weights = "qwen2.5-0.5b";  // head_dim 64, GQA 7:1, tied embeddings, q/k/v bias
  o.device = "cuda";
  o.max_seqs = kMaxSeqs;
  o.max_step_tokens = 256;
  o.max_model_len = 512;
  o.kv_cache_tokens = kMaxSeqs * 512;
  o.cuda_graphs = graphs;
  return ModelRunner::create(o);
}

TEST(CudaGraphTest, ReplayedDecodeStepsMatchEagerOnesBitForBitInEveryBucket) {
  auto graph_runner = cuda_runner(true);
  if (!graph_runner.ok() && (graph_runner.status().code() == StatusCode::kUnimplemented ||
                             graph_runner.status().code() == StatusCode::kNotFound))
    GTEST_SKIP() << graph_runner.status().to_string();
  ASSERT_TRUE(graph_runner.ok()) << graph_runner.status().to_string();
  auto eager_runner = cuda_runner(false);
  ASSERT_TRUE(eager_runner.ok()) << eager_runner.status().to_string();
  ModelRunner& g = **graph_runner;
  ModelRunner& e = **eager_runner;
  EXPECT_EQ(g.graph_report().graphs,
            static_cast<int64_t>(decode_batch_buckets(kMaxSeqs).size()));
  EXPECT_EQ(e.graph_report().graphs, 0);

  // Batches on the bucket edges and between them (padded).
  for (const int64_t batch : {1, 2, 3, 4, 5, 8, 13, 16, 17, 24, 30, 32}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    std::vector<int32_t> seqs_g, seqs_e;
    std::vector<StepEntry> decode_g, decode_e;
    for (int64_t i = 0; i < batch; ++i) {
      auto sg = g.add_sequence();
      auto se = e.add_sequence();
      ASSERT_TRUE(sg.ok() && se.ok());
      seqs_g.push_back(*sg);
      seqs_e.push_back(*se);
      // Prompts of 1 to 40 tokens: contexts differ inside one decode batch.
      std::vector<int32_t> prompt;
      for (int64_t t = 0; t < 1 + (i * 7 + batch) % 40; ++t)
        prompt.push_back(static_cast<int32_t>((t * 131 + i * 17 + batch) % 150000));
      std::vector<float> lg, le;
      ASSERT_TRUE(g.step({{*sg, prompt}}, false, &lg).ok());
      ASSERT_TRUE(e.step({{*se, prompt}}, false, &le).ok());
      ASSERT_EQ(lg.size(), le.size());
      ASSERT_EQ(0, std::memcmp(lg.data(), le.data(), lg.size() * sizeof(float)))
          << "prefill logits differ for sequence " << i;
    }
    for (int step = 0; step < 3; ++step) {
      std::vector<StepEntry> eg, ee;
      for (int64_t i = 0; i < batch; ++i) {
        const int32_t token = static_cast<int32_t>((step * 1000 + i * 31 + 7) % 150000);
        eg.push_back({seqs_g[static_cast<size_t>(i)], {token}});
        ee.push_back({seqs_e[static_cast<size_t>(i)], {token}});
      }
      std::vector<float> lg, le;
      ASSERT_TRUE(g.step(eg, false, &lg).ok());
      ASSERT_TRUE(e.step(ee, false, &le).ok());
      ASSERT_EQ(lg.size(), static_cast<size_t>(batch * g.config().vocab_size));
      ASSERT_EQ(lg.size(), le.size());
      for (float v : lg) ASSERT_TRUE(std::isfinite(v)) << "step " << step;
      ASSERT_EQ(0, std::memcmp(lg.data(), le.data(), lg.size() * sizeof(float)))
          << "decode step " << step << ": graph and eager logits differ";
    }
    for (int64_t i = 0; i < batch; ++i) {
      ASSERT_TRUE(g.release_sequence(seqs_g[static_cast<size_t>(i)]).ok());
      ASSERT_TRUE(e.release_sequence(seqs_e[static_cast<size_t>(i)]).ok());
    }
  }
}

}  // namespace
}  // namespace roofline
