// Sampled steps (issue 12): a runner that samples where its logits are (ModelRunner::step with
// sampling rows: on the GPU inside the decode CUDA graph, eagerly for prefill steps and without
// graphs; on the CPU the twin over the rows in parallel) must give the tokens, errors and logprobs
// that the chain's CPU twin gives over the logits of an identical runner fed the same tokens — for
// greedy, tempered top-k / top-p / min-p draws, penalties and logit bias through edit lists,
// logprobs with alternatives, padded batch buckets, and a step whose edit lists outgrow the device
// buffer (the graphs are then captured again). The CPU tests run everywhere; the CUDA ones skip
// themselves without a GPU (or in a CPU-only build).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "ops/sampling/sampling.h"
#include "runtime/backend.h"
#include "runtime/decode_padding.h"
#include "runtime/model_runner.h"
#include "runtime/tile_sampling.h"

namespace roofline {
namespace {

constexpr int64_t kMaxSeqs = 32;

StatusOr<std::unique_ptr<ModelRunner>> make_runner(const char* device, const char* model,
                                                   bool graphs) {
  RunnerOptions o;
  o.dummy_weights = model;
  o.device = device;
  o.max_seqs = kMaxSeqs;
  o.max_step_tokens = 256;
  o.max_model_len = 512;
  o.kv_cache_tokens = kMaxSeqs * 512;
  o.cuda_graphs = graphs;
  return ModelRunner::create(o);
}

StatusOr<std::unique_ptr<ModelRunner>> cuda_runner(bool graphs) {
  return make_runner("cuda", "qwen2.5-0.5b", graphs);  // head_dim 64, GQA 7:1, tied embeddings
}

// Row i's parameters at `step`, cycling through the chain's stages (the first `kinds` of them: 2
// are the rows the tile sampler finishes, greedy and top-k 50); its edits appended to edits.
SamplingRowParams row_params(int64_t i, int64_t step, int64_t edits_per_row, int64_t vocab,
                             std::vector<TokenEdit>* edits, int64_t kinds = 5) {
  SamplingRowParams r;
  switch (i % kinds) {
    case 0:  // greedy
      break;
    case 1:
      r.temperature = 0.8f;
      r.top_k = 50;
      r.top_p = 0.9f;
      break;
    case 2:
      r.temperature = 1.3f;
      r.min_p = 0.05f;
      r.num_top_logprobs = 5;
      break;
    case 3:
      r.temperature = 0.7f;
      r.top_k = 1000;
      r.repetition_penalty = 1.3f;
      r.frequency_penalty = 0.5f;
      r.presence_penalty = 0.25f;
      break;
    default:
      r.temperature = 0.0f;  // greedy over biased logits, with the token's logprob
      r.num_top_logprobs = 0;
      break;
  }
  r.seed = 1000 + static_cast<uint64_t>(i);
  r.step = step;
  r.edit_begin = static_cast<int64_t>(edits->size());
  for (int64_t e = 0; e < edits_per_row; ++e) {
    TokenEdit t;
    t.token = static_cast<int32_t>((e * 97 + i * 13) % vocab);  // distinct within a row (< vocab)
    t.bias = (e % 3 == 0) ? 2.5f : 0.0f;
    t.in_prompt = (e % 2 == 0) ? 1 : 0;
    t.generated_count = static_cast<int32_t>(e % 4);
    edits->push_back(t);
  }
  r.edit_count = static_cast<int32_t>(edits_per_row);
  return r;
}

// The CPU twin over f32 logits [rows, vocab].
SampledRows twin(const std::vector<float>& logits, int64_t vocab, const StepSampling& s) {
  SampledRows out;
  resize_sampled_rows(static_cast<int64_t>(s.rows.size()), &out);
  SampleRowsParams p;
  p.logits = logits.data();
  p.rows = s.rows.data();
  p.edits = s.edits.data();
  p.num_edits = static_cast<int64_t>(s.edits.size());
  p.num_rows = static_cast<int64_t>(s.rows.size());
  p.vocab_size = vocab;
  p.dtype = DType::kF32;
  p.tokens = out.tokens.data();
  p.errors = out.errors.data();
  p.nonfinite_counts = out.nonfinite.data();
  p.logprobs = out.logprobs.data();
  p.top_ids = out.top_ids.data();
  p.top_logprobs = out.top_logprobs.data();
  p.max_top_logprobs = kMaxTopLogprobs;
  sample_rows_cpu(p);
  return out;
}

void expect_same(const SampledRows& got, const SampledRows& want, const StepSampling& s,
                 const std::string& where) {
  for (size_t r = 0; r < s.rows.size(); ++r) {
    SCOPED_TRACE(where + ", row " + std::to_string(r));
    EXPECT_EQ(got.errors[r], 0u);
    EXPECT_EQ(got.tokens[r], want.tokens[r]);
    EXPECT_EQ(got.nonfinite[r], want.nonfinite[r]);
    if (s.rows[r].num_top_logprobs < 0) continue;
    EXPECT_NEAR(got.logprobs[r], want.logprobs[r], 1e-3);
    for (int32_t j = 0; j < s.rows[r].num_top_logprobs; ++j) {
      const size_t k = r * kMaxTopLogprobs + static_cast<size_t>(j);
      EXPECT_EQ(got.top_ids[k], want.top_ids[k]) << "alternative " << j;
      EXPECT_NEAR(got.top_logprobs[k], want.top_logprobs[k], 1e-3) << "alternative " << j;
    }
  }
}

// Runs batches through a logits runner and a sampling runner side by side (rows of the first
// `kinds` kinds of row_params).
void run_side_by_side(ModelRunner& logits_runner, ModelRunner& sampling_runner,
                      const std::vector<int64_t>& batches, int64_t edits_per_row,
                      int64_t kinds = 5) {
  const int64_t vocab = logits_runner.config().vocab_size;
  for (const int64_t batch : batches) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    std::vector<int32_t> seqs_l, seqs_s;
    for (int64_t i = 0; i < batch; ++i) {
      auto sl = logits_runner.add_sequence();
      auto ss = sampling_runner.add_sequence();
      ASSERT_TRUE(sl.ok() && ss.ok());
      seqs_l.push_back(*sl);
      seqs_s.push_back(*ss);
      std::vector<int32_t> prompt;
      for (int64_t t = 0; t < 1 + (i * 7 + batch) % 30; ++t)
        prompt.push_back(static_cast<int32_t>((t * 131 + i * 17 + batch) % vocab));
      // The prefill step samples too (eagerly: not a decode step).
      StepSampling s;
      s.rows.push_back(row_params(i, 0, edits_per_row, vocab, &s.edits, kinds));
      std::vector<float> logits;
      SampledRows got;
      ASSERT_TRUE(logits_runner.step({{*sl, prompt}}, false, &logits).ok());
      const Status st = sampling_runner.step({{*ss, prompt}}, s, &got);
      ASSERT_TRUE(st.ok()) << st.to_string();
      expect_same(got, twin(logits, vocab, s), s, "prefill of sequence " + std::to_string(i));
    }
    for (int step = 1; step <= 3; ++step) {
      std::vector<StepEntry> el, es;
      StepSampling s;
      for (int64_t i = 0; i < batch; ++i) {
        const int32_t token = static_cast<int32_t>((step * 1000 + i * 31 + 7) % vocab);
        el.push_back({seqs_l[static_cast<size_t>(i)], {token}});
        es.push_back({seqs_s[static_cast<size_t>(i)], {token}});
        s.rows.push_back(row_params(i, step, edits_per_row, vocab, &s.edits, kinds));
      }
      std::vector<float> logits;
      SampledRows got;
      ASSERT_TRUE(logits_runner.step(el, false, &logits).ok());
      const Status st = sampling_runner.step(es, s, &got);
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_EQ(logits.size(), static_cast<size_t>(batch * vocab));
      expect_same(got, twin(logits, vocab, s), s, "decode step " + std::to_string(step));
    }
    for (int64_t i = 0; i < batch; ++i) {
      ASSERT_TRUE(logits_runner.release_sequence(seqs_l[static_cast<size_t>(i)]).ok());
      ASSERT_TRUE(sampling_runner.release_sequence(seqs_s[static_cast<size_t>(i)]).ok());
    }
  }
}

// The overlapped loop (ModelRunner::launch_step / collect_step) against plain sampled steps: two
// runners prefill the same prompts (14 tokens, so decoding fills a 16-token block with fed ids);
// `sync` then decodes step by step, each step fed the tokens the step before sampled through the
// host, while `piped` launches every step before the previous one is collected, its tokens fed
// where they were sampled. From the fourth step sequence 0 is dropped (released on `piped` while
// a step holding it is in flight) and the feed skips its row. Every row's token, step by step, is
// the same in both; at the end each sequence's history (prompt and generated tokens) finds the
// same cached prefix in both (the fed ids the prefix cache registered are the sampled ones).
void run_overlapped_against_steps(ModelRunner& sync, ModelRunner& piped, int64_t batch,
                                  int64_t steps) {
  SCOPED_TRACE("batch " + std::to_string(batch));
  const int64_t vocab = sync.config().vocab_size;
  std::vector<int32_t> seqs_a, seqs_b;
  std::vector<std::vector<int32_t>> history(static_cast<size_t>(batch));
  std::vector<int32_t> last(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) {
    auto a = sync.add_sequence();
    auto b = piped.add_sequence();
    ASSERT_TRUE(a.ok() && b.ok());
    seqs_a.push_back(*a);
    seqs_b.push_back(*b);
    std::vector<int32_t>& prompt = history[static_cast<size_t>(i)];
    for (int64_t t = 0; t < 14; ++t)
      prompt.push_back(static_cast<int32_t>((t * 131 + i * 17 + 5) % vocab));
    StepSampling s;
    s.rows.push_back(row_params(i, 0, 3, vocab, &s.edits));
    SampledRows ga, gb;
    ASSERT_TRUE(sync.step({{*a, prompt}}, s, &ga).ok());
    ASSERT_TRUE(piped.step({{*b, prompt}}, s, &gb).ok());
    ASSERT_EQ(ga.tokens[0], gb.tokens[0]);
    last[static_cast<size_t>(i)] = ga.tokens[0];
  }
  // The rows of step k (1-based): every sequence, less sequence 0 from step 4 on.
  const auto rows_of = [&](int64_t k) {
    std::vector<int64_t> rows;
    for (int64_t i = (k >= 4 && batch > 1) ? 1 : 0; i < batch; ++i) rows.push_back(i);
    return rows;
  };
  const auto sampling_of = [&](int64_t k) {
    StepSampling s;
    for (const int64_t i : rows_of(k)) s.rows.push_back(row_params(i, k, 3, vocab, &s.edits));
    return s;
  };
  std::vector<std::vector<int32_t>> want(static_cast<size_t>(steps + 1));
  for (int64_t k = 1; k <= steps; ++k) {
    std::vector<StepEntry> entries;
    for (const int64_t i : rows_of(k))
      entries.push_back({seqs_a[static_cast<size_t>(i)], {last[static_cast<size_t>(i)]}});
    SampledRows got;
    const Status st = sync.step(entries, sampling_of(k), &got);
    ASSERT_TRUE(st.ok()) << st.to_string();
    const std::vector<int64_t> rows = rows_of(k);
    for (size_t r = 0; r < rows.size(); ++r) {
      last[static_cast<size_t>(rows[r])] = got.tokens[r];
      history[static_cast<size_t>(rows[r])].push_back(entries[r].tokens[0]);
    }
    want[static_cast<size_t>(k)] = got.tokens;
    if (k == 3 && batch > 1) {
      ASSERT_TRUE(sync.release_sequence(seqs_a[0]).ok());
    }
  }
  // Step 1 takes the prefill's tokens from the host; every later one is fed.
  for (int64_t k = 1; k <= steps; ++k) {
    std::vector<StepEntry> entries;
    std::vector<int32_t> feed;
    const std::vector<int64_t> rows = rows_of(k), before = k > 1 ? rows_of(k - 1) : rows;
    for (const int64_t i : rows) {
      const int32_t token = k == 1 ? history[static_cast<size_t>(i)][14] : 0;
      entries.push_back({seqs_b[static_cast<size_t>(i)], {token}});
      feed.push_back(
          static_cast<int32_t>(std::find(before.begin(), before.end(), i) - before.begin()));
    }
    const Status st =
        piped.launch_step(entries, sampling_of(k), k == 1 ? std::vector<int32_t>{} : feed);
    ASSERT_TRUE(st.ok()) << "step " << k << ": " << st.to_string();
    EXPECT_EQ(piped.steps_in_flight(), k == 1 ? 1 : 2);
    if (k == 1) continue;
    SampledRows got;
    ASSERT_TRUE(piped.collect_step(&got).ok());
    EXPECT_EQ(got.tokens, want[static_cast<size_t>(k - 1)]) << "step " << k - 1;
    // Sequence 0 is released while step 3, which holds it, is in flight: as the engine releases
    // a request that stops on step 2's token.
    if (k == 3 && batch > 1) {
      ASSERT_TRUE(piped.release_sequence(seqs_b[0]).ok());
    }
  }
  SampledRows got;
  ASSERT_TRUE(piped.collect_step(&got).ok());
  EXPECT_EQ(got.tokens, want[static_cast<size_t>(steps)]) << "step " << steps;
  EXPECT_EQ(piped.steps_in_flight(), 0);
  EXPECT_EQ(sync.kv_stats().cached_blocks, piped.kv_stats().cached_blocks);
  for (int64_t i = (batch > 1 ? 1 : 0); i < batch; ++i) {
    auto a = sync.add_sequence();
    auto b = piped.add_sequence();
    ASSERT_TRUE(a.ok() && b.ok());
    const std::vector<int32_t>& h = history[static_cast<size_t>(i)];
    const auto adopted_a = sync.adopt_cached_prefix(*a, h);
    const auto adopted_b = piped.adopt_cached_prefix(*b, h);
    ASSERT_TRUE(adopted_a.ok() && adopted_b.ok());
    EXPECT_EQ(*adopted_a, 16) << "sequence " << i;
    EXPECT_EQ(*adopted_b, *adopted_a) << "sequence " << i;
  }
}

bool skip(const Status& s) {
  return s.code() == StatusCode::kUnimplemented || s.code() == StatusCode::kNotFound;
}

// The CPU backend: execute, then the twin over the rows on the thread pool.
TEST(CpuSamplingTest, SampledStepsAsTheTwinSamplesTheLogits) {
  auto l = make_runner("cpu", "llama-tiny", false);
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  auto s = make_runner("cpu", "llama-tiny", false);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  run_side_by_side(**l, **s, {1, 3}, 6);
}

// A sampled step needs one row per entry, and nothing runs without it.
TEST(CpuSamplingTest, ARowCountOtherThanTheEntriesIsAnError) {
  auto r = make_runner("cpu", "llama-tiny", false);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto seq = (*r)->add_sequence();
  ASSERT_TRUE(seq.ok());
  StepSampling s;  // no rows
  SampledRows got;
  const Status st = (*r)->step({{*seq, {1, 2, 3}}}, s, &got);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.to_string().find("one sampling row per entry"), std::string::npos);
  EXPECT_EQ((*r)->sequence_length(*seq), 0);
}

TEST(CpuSamplingTest, OverlappedStepsSampleAsPlainSteps) {
  for (const int64_t batch : {1, 3}) {
    auto a = make_runner("cpu", "llama-tiny", false);
    auto b = make_runner("cpu", "llama-tiny", false);
    ASSERT_TRUE(a.ok() && b.ok());
    run_overlapped_against_steps(**a, **b, batch, 6);
  }
}

// Bad uses of the overlapped loop are refused before anything changes.
TEST(CpuSamplingTest, OverlappedLoopRefusesBadFeedsAndAFullPipeline) {
  auto r = make_runner("cpu", "llama-tiny", false);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ModelRunner& m = **r;
  const int32_t a = *m.add_sequence(), b = *m.add_sequence();
  StepSampling one, two;
  one.rows.resize(1);
  two.rows.resize(2);
  SampledRows got;
  const auto expect_refused = [&](const Status& st, const std::string& says) {
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
    EXPECT_NE(st.to_string().find(says), std::string::npos) << st.to_string();
  };
  expect_refused(m.collect_step(&got), "no launched step");
  // A feed with nothing launched before it.
  expect_refused(m.launch_step({{a, {1}}}, one, {0}), "not launched by launch_step");
  EXPECT_EQ(m.sequence_length(a), 0);
  ASSERT_TRUE(m.launch_step({{a, {1, 2}}, {b, {3}}}, two, {}).ok());
  // A row the step before does not have; a feed of the wrong size; a fed entry of two tokens.
  expect_refused(m.launch_step({{a, {0}}}, one, {2}), "which has 2 rows");
  expect_refused(m.launch_step({{a, {0}}, {b, {0}}}, two, {0}), "one feed value per entry");
  expect_refused(m.launch_step({{a, {0, 0}}}, one, {0}), "exactly one token");
  EXPECT_EQ(m.sequence_length(a), 2);
  // A plain step while one is in flight.
  expect_refused(m.step({{a, {4}}}, one, &got), "not collected yet");
  ASSERT_TRUE(m.launch_step({{a, {0}}, {b, {0}}}, two, {1, 0}).ok());
  expect_refused(m.launch_step({{a, {0}}}, one, {0}), "in flight already");
  ASSERT_TRUE(m.collect_step(&got).ok());
  const std::vector<int32_t> first = got.tokens;
  ASSERT_TRUE(m.collect_step(&got).ok());
  EXPECT_EQ(m.sequence_length(a), 3);
  EXPECT_EQ(m.sequence_length(b), 2);
  EXPECT_EQ(m.steps_in_flight(), 0);
  // After a plain step, a feed has no launched step before it again.
  ASSERT_TRUE(m.step({{a, {first[1]}}}, one, &got).ok());
  expect_refused(m.launch_step({{a, {0}}}, one, {0}), "not launched by launch_step");
}

// The backends' own check of a feed (Backend::check_feed: the default launch_sampled's, through
// apply_feed, and the CUDA backend's, which copies the fed tokens on the device), on a step of
// three entries: one of one token, one of two, one of one.
TEST(CpuSamplingTest, BackendFeedCheckRefusesWhatNoStepCouldTake) {
  StepBuffers step;
  step.num_seqs = 3;
  step.num_tokens = 4;
  step.query_start = {0, 1, 3, 4};
  const auto refused = [&](const std::vector<int32_t>& feed, int64_t rows,
                           const std::string& says) {
    const Status st = Backend::check_feed(step, feed, rows);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
    EXPECT_NE(st.to_string().find(says), std::string::npos) << st.to_string();
  };
  EXPECT_TRUE(Backend::check_feed(step, {}, 0).ok());            // not fed
  EXPECT_TRUE(Backend::check_feed(step, {-1, -1, -1}, 0).ok());  // fed nothing
  EXPECT_TRUE(Backend::check_feed(step, {2, -1, 0}, 3).ok());    // one-token entries, rows < 3
  refused({0, -1}, 3, "one feed value per entry: 3 entries, 2 values");
  refused({0, -1, 3}, 3, "entry 2 is fed from row 3 of the step launched before, which has 3");
  refused({0, -1, 0}, 0, "which has 0 sampled rows");  // nothing launched before
  refused({-1, 0, -1}, 3, "entry 1 is fed a sampled token but has more than one token");
}

TEST(GpuSamplingTest, SampledInTheDecodeGraphAsTheCpuTwinSamplesTheLogits) {
  auto l = cuda_runner(true);
  if (!l.ok() && skip(l.status())) GTEST_SKIP() << l.status().to_string();
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  auto s = cuda_runner(true);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  // Bucket edges and padded batches; a few edits per row.
  run_side_by_side(**l, **s, {1, 3, 8, 17}, 6);
}

TEST(GpuSamplingTest, SampledEagerlyWithoutGraphsAsTheCpuTwinSamplesTheLogits) {
  auto l = cuda_runner(true);
  if (!l.ok() && skip(l.status())) GTEST_SKIP() << l.status().to_string();
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  auto s = cuda_runner(false);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  run_side_by_side(**l, **s, {2, 5}, 6);
}

// Steps whose rows the tile sampler finishes (greedy and top-k 50, with penalties and logit bias),
// with ROOFLINE_TILE_SAMPLER_ROWS unset (the default bound), 8 and 64: every step of at most that
// many rows (its padded decode batch) samples them from the LM head's logit tile summaries — in the
// decode graphs, eagerly at prefill and without graphs — and the full chain samples the rest.
// Every token is the twin's, and the runners count the steps that took the tile sampler.
TEST(GpuSamplingTest, TileSampledStepsAsTheCpuTwinSamplesTheLogits) {
  auto l = cuda_runner(true);
  if (!l.ok() && skip(l.status())) GTEST_SKIP() << l.status().to_string();
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  const std::vector<int64_t> graph_batches = {1, 2, 5, 8, 17, 30}, eager_batches = {1, 3, 9};
  // The steps that take the tile sampler under `bound`: each batch's prefill steps (one row each)
  // and its 3 decode steps where the batch's bucket (the padded batch) is within the bound.
  const auto tile_steps = [](const std::vector<int64_t>& batches, int64_t bound) {
    const std::vector<int64_t> buckets = decode_batch_buckets(kMaxSeqs);
    int64_t steps = 0;
    for (const int64_t b : batches)
      steps += (bound >= 1 ? b : 0) + (decode_bucket(buckets, b) <= bound ? 3 : 0);
    return steps;
  };
  for (const char* bound : {static_cast<const char*>(nullptr), "8", "64"}) {
    SCOPED_TRACE(std::string("ROOFLINE_TILE_SAMPLER_ROWS=") + (bound ? bound : "(unset)"));
    if (bound) setenv("ROOFLINE_TILE_SAMPLER_ROWS", bound, 1);
    auto graphs = cuda_runner(true);
    auto eager = cuda_runner(false);
    unsetenv("ROOFLINE_TILE_SAMPLER_ROWS");
    ASSERT_TRUE(graphs.ok()) << graphs.status().to_string();
    ASSERT_TRUE(eager.ok()) << eager.status().to_string();
    run_side_by_side(**l, **graphs, graph_batches, 6, 2);
    run_side_by_side(**l, **eager, eager_batches, 6, 2);
    const int64_t rows = bound ? std::atol(bound) : kTileSamplerDefaultMaxRows;
    EXPECT_EQ((*graphs)->tile_sampled_steps(), tile_steps(graph_batches, rows));
    EXPECT_EQ((*eager)->tile_sampled_steps(), tile_steps(eager_batches, rows));
  }
}

// 24 rows x 4,000 edits = 96,000 entries, past the 65,536 the device buffer starts with: the
// buffer grows, the decode graphs are dropped and captured again, and the tokens stay the twin's.
TEST(GpuSamplingTest, EditListsOutgrowingTheDeviceBufferStillSampleLikeTheTwin) {
  auto l = cuda_runner(true);
  if (!l.ok() && skip(l.status())) GTEST_SKIP() << l.status().to_string();
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  auto s = cuda_runner(true);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  run_side_by_side(**l, **s, {24, 4}, 4000);
}

// The overlapped loop on the GPU, with graphs (padded buckets: 1, 3 and 17 rows) and without:
// the fed tokens are copied on the device from the step before's sampling outputs.
TEST(GpuSamplingTest, OverlappedStepsSampleAsPlainSteps) {
  for (const bool graphs : {true, false}) {
    SCOPED_TRACE(graphs ? "graphs" : "eager");
    for (const int64_t batch : {1, 3, 17}) {
      auto a = cuda_runner(graphs);
      if (!a.ok() && skip(a.status())) GTEST_SKIP() << a.status().to_string();
      ASSERT_TRUE(a.ok()) << a.status().to_string();
      auto b = cuda_runner(graphs);
      ASSERT_TRUE(b.ok()) << b.status().to_string();
      run_overlapped_against_steps(**a, **b, batch, 6);
    }
  }
}

}  // namespace
}  // namespace roofline
