// CUDA graphs for decode (issue 8): a runner that replays captured graphs and one that launches
// kernel by kernel (--no-cuda-graphs) must give bit-identical logits for every batch bucket,
// padded batches included, over several decode steps of sequences with different contexts. Also:
// start-up capture covers every bucket, each graph's kernels are counted (`roofline bench`'s
// kernels line) and the count is a property of the bucket, not of one capture, and replaying the
// last decode graph (`roofline bench`'s graph floor) changes no sequence. Skips itself without a
// GPU (or in a CPU-only build).
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

::testing::AssertionResult same_nodes(const DecodeGraphNodes& a, const DecodeGraphNodes& b) {
  if (a.kernels == b.kernels && a.memcpys == b.memcpys && a.memsets == b.memsets &&
      a.other == b.other)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "kernels " << a.kernels << " / " << b.kernels << ", memcpys " << a.memcpys << " / "
         << b.memcpys << ", memsets " << a.memsets << " / " << b.memsets << ", other " << a.other
         << " / " << b.other;
}

// A decode graph's kernels: every layer launches several (qwen2.5-0.5b: ~5), so at least two a
// layer and the LM head and sampling; at most what no plan comes near (20 a layer and 32 more),
// which a count walking nodes twice would pass.
::testing::AssertionResult plausible_kernels(const DecodeGraphNodes& nodes, int64_t layers) {
  if (nodes.kernels >= 2 * layers + 2 && nodes.kernels <= 20 * layers + 32)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << nodes.kernels << " kernels in a decode graph of " << layers << " layers";
}

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

// A new sequence on each runner (appended to *seqs_g, *seqs_e), prefilled with `prompt`: the
// prefill logits must agree bit for bit.
::testing::AssertionResult same_prefill(ModelRunner& g, ModelRunner& e,
                                        const std::vector<int32_t>& prompt,
                                        std::vector<int32_t>* seqs_g,
                                        std::vector<int32_t>* seqs_e) {
  auto sg = g.add_sequence();
  auto se = e.add_sequence();
  if (!sg.ok() || !se.ok()) return ::testing::AssertionFailure() << "cannot open a sequence";
  seqs_g->push_back(*sg);
  seqs_e->push_back(*se);
  std::vector<float> lg, le;
  const Status rg = g.step({{*sg, prompt}}, false, &lg), re = e.step({{*se, prompt}}, false, &le);
  if (!rg.ok() || !re.ok())
    return ::testing::AssertionFailure() << rg.to_string() << " / " << re.to_string();
  if (lg.size() != le.size() || std::memcmp(lg.data(), le.data(), lg.size() * sizeof(float)) != 0)
    return ::testing::AssertionFailure() << "prefill logits differ";
  return ::testing::AssertionSuccess();
}

// One decode step on each runner, sequence i of both fed token (salt + 31·i) mod 150000: the
// graph runner's logits (in *logits) must equal the eager runner's bit for bit.
::testing::AssertionResult same_decode_step(ModelRunner& g, ModelRunner& e,
                                            const std::vector<int32_t>& seqs_g,
                                            const std::vector<int32_t>& seqs_e, int salt,
                                            std::vector<float>* logits) {
  std::vector<StepEntry> eg, ee;
  for (size_t i = 0; i < seqs_g.size(); ++i) {
    const auto token = static_cast<int32_t>((salt + static_cast<int64_t>(i) * 31) % 150000);
    eg.push_back({seqs_g[i], {token}});
    ee.push_back({seqs_e[i], {token}});
  }
  std::vector<float> le;
  const Status sg = g.step(eg, false, logits), se = e.step(ee, false, &le);
  if (!sg.ok() || !se.ok())
    return ::testing::AssertionFailure() << sg.to_string() << " / " << se.to_string();
  if (logits->size() != le.size() ||
      std::memcmp(logits->data(), le.data(), le.size() * sizeof(float)) != 0)
    return ::testing::AssertionFailure() << "graph and eager logits differ";
  return ::testing::AssertionSuccess();
}

// A runner replaying graphs and one launching kernel by kernel, on the same dummy model; skips
// the test without a GPU (or in a CPU-only build).
class CudaGraphTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto graphs = cuda_runner(true);
    if (graphs.status().code() == StatusCode::kUnimplemented ||
        graphs.status().code() == StatusCode::kNotFound)
      GTEST_SKIP() << graphs.status().to_string();
    ASSERT_TRUE(graphs.ok()) << graphs.status().to_string();
    auto eager = cuda_runner(false);
    ASSERT_TRUE(eager.ok()) << eager.status().to_string();
    graph_runner_ = std::move(*graphs);
    eager_runner_ = std::move(*eager);
  }
  std::unique_ptr<ModelRunner> graph_runner_, eager_runner_;
};

TEST_F(CudaGraphTest, ReplayedDecodeStepsMatchEagerOnesBitForBitInEveryBucket) {
  ModelRunner& g = *graph_runner_;
  ModelRunner& e = *eager_runner_;
  const std::vector<int64_t> buckets = decode_batch_buckets(kMaxSeqs);
  EXPECT_EQ(g.graph_report().graphs, static_cast<int64_t>(buckets.size()));
  EXPECT_EQ(e.graph_report().graphs, 0);
  // Every captured bucket's graph counted at start-up; no graphs, no counts.
  ASSERT_EQ(g.graph_report().nodes.size(), buckets.size());
  for (const int64_t b : buckets) {
    ASSERT_TRUE(g.graph_report().nodes.count(b)) << "bucket " << b;
    EXPECT_TRUE(plausible_kernels(g.graph_report().nodes.at(b), g.config().num_layers))
        << "bucket " << b;
  }
  EXPECT_TRUE(e.graph_report().nodes.empty());

  // Batches on the bucket edges and between them (padded).
  for (const int64_t batch : {1, 2, 3, 4, 5, 8, 13, 16, 17, 24, 30, 32}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    std::vector<int32_t> seqs_g, seqs_e;
    for (int64_t i = 0; i < batch; ++i) {
      // Prompts of 1 to 40 tokens: contexts differ inside one decode batch.
      std::vector<int32_t> prompt;
      for (int64_t t = 0; t < 1 + (i * 7 + batch) % 40; ++t)
        prompt.push_back(static_cast<int32_t>((t * 131 + i * 17 + batch) % 150000));
      ASSERT_TRUE(same_prefill(g, e, prompt, &seqs_g, &seqs_e)) << "sequence " << i;
    }
    for (int step = 0; step < 3; ++step) {
      std::vector<float> lg;
      ASSERT_TRUE(same_decode_step(g, e, seqs_g, seqs_e, step * 1000 + 7, &lg)) << "step " << step;
      ASSERT_EQ(lg.size(), static_cast<size_t>(batch * g.config().vocab_size));
      for (float v : lg) ASSERT_TRUE(std::isfinite(v)) << "step " << step;
      // The graph the step replayed is its bucket's, counted when it was captured.
      auto nodes = g.last_decode_graph_nodes();
      ASSERT_TRUE(nodes.ok()) << nodes.status().to_string();
      EXPECT_TRUE(same_nodes(*nodes, g.graph_report().nodes.at(decode_bucket(buckets, batch))));
    }
    for (int64_t i = 0; i < batch; ++i) {
      ASSERT_TRUE(g.release_sequence(seqs_g[static_cast<size_t>(i)]).ok());
      ASSERT_TRUE(e.release_sequence(seqs_e[static_cast<size_t>(i)]).ok());
    }
  }
}

// `roofline bench`'s graph floor: the last decode graph replayed back to back gives a positive
// time and leaves every sequence as it was (the next step matches a runner that never replayed,
// bit for bit); bad counts, and a replay before any decode graph ran, are errors.
TEST_F(CudaGraphTest, ReplayingTheLastDecodeGraphLeavesSequencesAsTheyWere) {
  ModelRunner& g = *graph_runner_;
  ModelRunner& e = *eager_runner_;
  EXPECT_EQ(g.replay_last_decode_graph(4).status().code(), StatusCode::kInvalidArgument)
      << "start-up capture launches no graph: nothing to replay yet";
  EXPECT_EQ(g.last_decode_graph_nodes().status().code(), StatusCode::kInvalidArgument)
      << "nor any graph to count";

  constexpr int64_t kBatch = 3;
  std::vector<int32_t> seqs_g, seqs_e;
  for (int64_t i = 0; i < kBatch; ++i) {
    std::vector<int32_t> prompt;
    for (int64_t t = 0; t < 5 + 9 * i; ++t)
      prompt.push_back(static_cast<int32_t>((t * 71 + i * 13) % 150000));
    ASSERT_TRUE(same_prefill(g, e, prompt, &seqs_g, &seqs_e)) << "sequence " << i;
  }
  for (int step = 0; step < 3; ++step) {
    std::vector<float> lg;
    ASSERT_TRUE(same_decode_step(g, e, seqs_g, seqs_e, step * 977 + 5, &lg))
        << "decode step " << step << " after " << step << " rounds of replays";
    if (step == 0) {
      EXPECT_EQ(e.replay_last_decode_graph(4).status().code(), StatusCode::kInvalidArgument)
          << "an eager runner has no graph";
      EXPECT_EQ(g.replay_last_decode_graph(0).status().code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(g.replay_last_decode_graph(100001).status().code(), StatusCode::kInvalidArgument);
    }
    auto ms = g.replay_last_decode_graph(5);
    ASSERT_TRUE(ms.ok()) << ms.status().to_string();
    EXPECT_GT(*ms, 0.0);
    EXPECT_LT(*ms, 1000.0);
    auto nodes = g.last_decode_graph_nodes();
    ASSERT_TRUE(nodes.ok()) << nodes.status().to_string();
    EXPECT_TRUE(plausible_kernels(*nodes, g.config().num_layers));
    if (step == 0) {
      EXPECT_EQ(e.last_decode_graph_nodes().status().code(), StatusCode::kInvalidArgument)
          << "an eager runner has no graph";
    }
  }
}

// `roofline bench`'s kernel count is a property of the bucket's step, not of one capture: a second
// runner of the same model captures graphs with the same nodes in every bucket.
TEST_F(CudaGraphTest, TwoCapturesOfABucketHaveTheSameNodes) {
  auto again = cuda_runner(true);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  const auto& first = graph_runner_->graph_report().nodes;
  const auto& second = (*again)->graph_report().nodes;
  ASSERT_EQ(first.size(), decode_batch_buckets(kMaxSeqs).size());
  ASSERT_EQ(second.size(), first.size());
  for (const auto& [bucket, nodes] : first) {
    ASSERT_TRUE(second.count(bucket)) << "bucket " << bucket;
    EXPECT_TRUE(same_nodes(second.at(bucket), nodes)) << "bucket " << bucket;
  }
}

}  // namespace
}  // namespace roofline
