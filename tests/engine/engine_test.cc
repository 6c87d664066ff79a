// The request-level engine on the CPU, deterministic, on fixture models: whatever the batch,
// the token budget or the memory pressure (chunked prefill, preemption and recompute, prefix
// reuse), every greedy request produces exactly the tokens roofline::Model::generate gives for it
// alone; aborts, stops and per-request errors end only their own request; and no KV block is left
// behind once everything has finished.
#include "roofline/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

namespace roofline {
namespace {

std::string fixture(const std::string& name) {
  return std::string(ROOFLINE_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}
std::string gguf_fixture(const std::string& name) {
  return std::string(ROOFLINE_SOURCE_DIR) + "/tests/fixtures/gguf/" + name;
}

struct EngineSetup {
  std::string model = fixture("llama_mha");
  int64_t budget = 512;
  int64_t max_seqs = 8;
  int64_t kv_cache_tokens = 0;
  int64_t block_size = 4;
  int64_t max_model_len = 0;
  bool prefix_cache = true;
  bool overlap = true;
};

std::unique_ptr<Engine> make_engine(const EngineSetup& s) {
  EngineOptions o;
  o.model.model_dir = s.model;
  o.model.kv_block_size = s.block_size;
  o.model.kv_cache_tokens = s.kv_cache_tokens;
  o.model.max_model_len = s.max_model_len;
  o.model.num_threads = 1;
  o.max_num_batched_tokens = s.budget;
  o.max_num_seqs = s.max_seqs;
  o.enable_prefix_cache = s.prefix_cache;
  o.overlap_steps = s.overlap;
  auto e = Engine::load(o);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? std::move(e).value() : nullptr;
}

// Deterministic prompts over the fixture's 512-token vocabulary; `shared` leading tokens equal
// across prompts so the prefix cache has something to find.
std::vector<int32_t> make_prompt(int64_t length, int seed, int64_t shared = 0) {
  std::vector<int32_t> p;
  uint32_t x = 12345;
  for (int64_t i = 0; i < length; ++i) {
    if (i == shared) x = 777u * static_cast<uint32_t>(seed) + 1;
    x = x * 1103515245u + 12345u;
    p.push_back(static_cast<int32_t>(3 + (x >> 16) % 500));
  }
  return p;
}

// What Model::generate gives for the prompt alone (greedy, eos ignored).
std::vector<int32_t> alone(const std::vector<int32_t>& prompt, int64_t max_tokens,
                           const std::string& model = fixture("llama_mha")) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  auto& m = models[model];
  if (!m) {
    ModelOptions o;
    o.model_dir = model;
    o.num_threads = 1;
    auto loaded = Model::load(o);
    EXPECT_TRUE(loaded.ok()) << loaded.status().to_string();
    m = std::move(loaded).value();
  }
  GenerateOptions g;
  g.max_new_tokens = max_tokens;
  g.stop_at_eos = false;
  auto out = m->generate(prompt, g, {});
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? *out : std::vector<int32_t>{};
}

SamplingParams greedy(int64_t max_tokens) {
  SamplingParams p;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// Steps to the end (bounded), collecting each request's streamed tokens and text and checking
// that every request finishes exactly once.
struct Collected {
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::map<RequestId, std::string> text;
  std::map<RequestId, RequestOutput> final;  // the finishing output
};
Collected drain(Engine& e, int max_steps = 10000) {
  Collected c;
  for (int i = 0; i < max_steps && e.has_unfinished(); ++i) {
    for (const RequestOutput& o : e.step()) {
      EXPECT_FALSE(c.final.count(o.id)) << "request " << o.id << " produced output after finishing";
      auto& t = c.tokens[o.id];
      t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      c.text[o.id] += o.new_text;
      EXPECT_EQ(o.completion_tokens, static_cast<int64_t>(t.size()));
      if (o.finished) c.final[o.id] = o;
    }
  }
  EXPECT_FALSE(e.has_unfinished()) << "did not finish within " << max_steps << " steps";
  return c;
}

void expect_no_leaks(const Engine& e) {
  const EngineStats s = e.stats();
  EXPECT_GT(s.kv_total_blocks, 0);
  EXPECT_EQ(s.kv_free_blocks, s.kv_total_blocks)
      << "KV blocks still held after every request finished";
}

struct Case {
  std::vector<int32_t> prompt;
  int64_t max_tokens;
};

std::vector<Case> mixed_cases() {
  return {{make_prompt(3, 1), 12},     {make_prompt(11, 2), 9},  {make_prompt(20, 3, 8), 14},
          {make_prompt(37, 4, 8), 7},  {make_prompt(50, 5), 10}, {make_prompt(6, 6), 16},
          {make_prompt(29, 7, 16), 11}};
}

void expect_all_match_alone(const EngineSetup& setup, const std::vector<Case>& cases,
                            EngineStats* stats = nullptr) {
  auto e = make_engine(setup);
  ASSERT_TRUE(e);
  std::vector<RequestId> ids;
  for (const Case& c : cases) {
    auto id = e->add_request(c.prompt, greedy(c.max_tokens));
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    ids.push_back(*id);
  }
  Collected got = drain(*e);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(got.tokens[ids[i]], alone(cases[i].prompt, cases[i].max_tokens)) << "request " << i;
    EXPECT_EQ(got.final[ids[i]].finish_reason, FinishReason::kLength) << got.final[ids[i]].error;
    EXPECT_EQ(got.final[ids[i]].prompt_tokens, static_cast<int64_t>(cases[i].prompt.size()));
  }
  expect_no_leaks(*e);
  if (stats) *stats = e->stats();
}

TEST(Engine, BatchGreedyMatchesEachRequestAlone) {
  EngineSetup s;
  s.max_seqs = 4;  // more requests than slots: some wait
  expect_all_match_alone(s, mixed_cases());
}

TEST(Engine, ChunkedPrefillMatchesWholePrefill) {
  EngineSetup s;
  s.budget = 16;  // every prompt over 16 tokens is prefilled over several steps
  s.max_seqs = 3;
  EngineStats stats;
  expect_all_match_alone(s, mixed_cases(), &stats);
  EXPECT_GT(stats.steps, 10);
}

TEST(Engine, PreemptionUnderMemoryPressureKeepsOutputs) {
  EngineSetup s;
  s.kv_cache_tokens = 96;  // 24 blocks of 4: fits any one request, not all of them at once
  s.budget = 32;
  EngineStats stats;
  expect_all_match_alone(s, mixed_cases(), &stats);
  EXPECT_GT(stats.preemptions, 0) << "the pool was meant to be too small to hold every request";
}

TEST(Engine, PreemptionWithoutPrefixCache) {
  EngineSetup s;
  s.kv_cache_tokens = 96;
  s.budget = 24;
  s.prefix_cache = false;
  EngineStats stats;
  expect_all_match_alone(s, mixed_cases(), &stats);
  EXPECT_GT(stats.preemptions, 0);
  EXPECT_EQ(stats.prompt_tokens_cached, 0);
}

TEST(Engine, PrefixCacheSkipsSharedPrefix) {
  EngineSetup s;
  auto e = make_engine(s);
  ASSERT_TRUE(e);
  const std::vector<int32_t> a = make_prompt(40, 1, 32), b = make_prompt(40, 2, 32);
  ASSERT_TRUE(e->add_request(a, greedy(5)).ok());
  Collected first = drain(*e);
  auto id = e->add_request(b, greedy(5));
  ASSERT_TRUE(id.ok());
  Collected second = drain(*e);
  EXPECT_EQ(second.tokens[*id], alone(b, 5));
  const EngineStats stats = e->stats();
  EXPECT_GE(stats.prompt_tokens_cached, 32)
      << "the 32 shared tokens (8 blocks) should come from the cache";
  EXPECT_GT(stats.prefix_hit_blocks, 0);
  expect_no_leaks(*e);
}

TEST(Engine, GoldenGreedyStopsAtEos) {
  std::ifstream in(fixture("llama_mha") + "/golden.json");
  const nlohmann::json g = nlohmann::json::parse(in);
  const auto prompt = g["prompt_ids"].get<std::vector<int32_t>>();
  const auto golden = g["generated_ids"].get<std::vector<int32_t>>();
  const auto eos_at = std::find(golden.begin(), golden.end(), 2) - golden.begin();
  ASSERT_LT(eos_at, static_cast<long>(golden.size()));
  auto e = make_engine(EngineSetup{});
  ASSERT_TRUE(e);
  SamplingParams p;
  p.max_tokens = 20;
  auto eos_id = e->add_request(prompt, p);
  SamplingParams stop_ids = p;
  stop_ids.stop_token_ids = {golden[3]};
  auto stop_id = e->add_request(prompt, stop_ids);
  auto ignore_id = e->add_request(prompt, greedy(20));
  ASSERT_TRUE(eos_id.ok() && stop_id.ok() && ignore_id.ok());
  Collected c = drain(*e);
  EXPECT_EQ(c.tokens[*eos_id], std::vector<int32_t>(golden.begin(), golden.begin() + eos_at + 1));
  EXPECT_EQ(c.final[*eos_id].finish_reason, FinishReason::kStop);
  EXPECT_EQ(c.tokens[*stop_id], std::vector<int32_t>(golden.begin(), golden.begin() + 4));
  EXPECT_EQ(c.final[*stop_id].finish_reason, FinishReason::kStop);
  EXPECT_EQ(c.tokens[*ignore_id], golden);
  EXPECT_EQ(c.final[*ignore_id].finish_reason, FinishReason::kLength);
  expect_no_leaks(*e);
}

TEST(Engine, AbortMidPrefillAndMidDecodeFreesEverything) {
  EngineSetup s;
  s.budget = 8;
  auto e = make_engine(s);
  ASSERT_TRUE(e);
  auto long_prompt = e->add_request(make_prompt(60, 1), greedy(10));
  auto decoding = e->add_request(make_prompt(5, 2), greedy(50));
  auto queued = e->add_request(make_prompt(5, 3), greedy(5));
  ASSERT_TRUE(long_prompt.ok() && decoding.ok() && queued.ok());
  e->abort(*queued);  // before it ever ran
  Collected c;
  auto run_step = [&] {
    for (const RequestOutput& o : e->step()) {
      auto& t = c.tokens[o.id];
      t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finished) c.final[o.id] = o;
    }
  };
  run_step();
  EXPECT_EQ(c.final[*queued].finish_reason, FinishReason::kAbort);
  EXPECT_TRUE(c.tokens[*queued].empty());
  for (int i = 0; i < 3; ++i) run_step();  // the long prompt is part-way through its prefill
  EXPECT_TRUE(c.tokens[*long_prompt].empty());
  e->abort(*long_prompt);
  run_step();
  EXPECT_EQ(c.final[*long_prompt].finish_reason, FinishReason::kAbort);
  for (int i = 0; i < 10; ++i) run_step();
  EXPECT_FALSE(c.final.count(*decoding));
  EXPECT_GT(c.tokens[*decoding].size(), 3u);
  e->abort(*decoding);
  e->abort(*decoding);  // twice is harmless
  e->abort(12345);      // unknown ids are ignored
  run_step();
  EXPECT_EQ(c.final[*decoding].finish_reason, FinishReason::kAbort);
  EXPECT_FALSE(e->has_unfinished());
  EXPECT_TRUE(e->step().empty());
  expect_no_leaks(*e);
  // The engine still works afterwards.
  auto again = e->add_request(make_prompt(5, 2), greedy(6));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(drain(*e).tokens[*again], alone(make_prompt(5, 2), 6));
}

TEST(Engine, TooLargeRequestFailsAloneOthersFinish) {
  EngineSetup s;
  s.kv_cache_tokens = 64;
  s.max_model_len = 128;
  auto e = make_engine(s);
  ASSERT_TRUE(e);
  auto ok1 = e->add_request(make_prompt(10, 1), greedy(8));
  auto too_big_for_cache = e->add_request(make_prompt(50, 2), greedy(30));
  auto too_long = e->add_request(make_prompt(120, 3), greedy(20));
  auto ok2 = e->add_request(make_prompt(7, 4), greedy(8));
  ASSERT_TRUE(ok1.ok() && too_big_for_cache.ok() && too_long.ok() && ok2.ok());
  Collected c = drain(*e);
  EXPECT_EQ(c.final[*too_big_for_cache].finish_reason, FinishReason::kError);
  EXPECT_NE(c.final[*too_big_for_cache].error.find("KV cache"), std::string::npos)
      << c.final[*too_big_for_cache].error;
  EXPECT_EQ(c.final[*too_long].finish_reason, FinishReason::kError);
  EXPECT_NE(c.final[*too_long].error.find("model length"), std::string::npos)
      << c.final[*too_long].error;
  EXPECT_EQ(c.tokens[*ok1], alone(make_prompt(10, 1), 8));
  EXPECT_EQ(c.tokens[*ok2], alone(make_prompt(7, 4), 8));
  expect_no_leaks(*e);
}

TEST(Engine, AddAndAbortFromAnotherThreadWhileStepping) {
  EngineSetup s;
  s.max_seqs = 4;
  s.budget = 16;
  s.kv_cache_tokens = 128;
  auto e = make_engine(s);
  ASSERT_TRUE(e);
  constexpr int kRequests = 40;
  std::atomic<bool> adder_done{false};
  std::vector<RequestId> ids(kRequests);
  std::thread adder([&] {
    for (int i = 0; i < kRequests; ++i) {
      auto id = e->add_request(make_prompt(3 + i % 9, i, 2), greedy(3 + i % 5));
      ASSERT_TRUE(id.ok());
      ids[i] = *id;
      if (i % 3 == 0) e->abort(*id);
      if (i % 7 == 0 && i > 0) e->abort(ids[i - 1]);  // maybe already running or finished
      std::this_thread::yield();
    }
    adder_done = true;
  });
  std::map<RequestId, RequestOutput> final;
  std::map<RequestId, int64_t> tokens;
  // Bounded by time, not steps: steps with nothing queued are instant while the adder starts up.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((!adder_done || e->has_unfinished()) && std::chrono::steady_clock::now() < deadline) {
    const std::vector<RequestOutput> outs = e->step();
    if (outs.empty()) std::this_thread::yield();
    for (const RequestOutput& o : outs) {
      EXPECT_FALSE(final.count(o.id));
      tokens[o.id] += static_cast<int64_t>(o.new_token_ids.size());
      if (o.finished) final[o.id] = o;
    }
  }
  adder.join();
  EXPECT_FALSE(e->has_unfinished());
  ASSERT_EQ(final.size(), static_cast<size_t>(kRequests));
  std::set<RequestId> distinct(ids.begin(), ids.end());
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kRequests));
  for (int i = 0; i < kRequests; ++i) {
    const RequestOutput& o = final[ids[i]];
    if (i % 3 == 0) {
      EXPECT_EQ(o.finish_reason, FinishReason::kAbort) << i;
    } else if (o.finish_reason != FinishReason::kAbort) {
      EXPECT_EQ(o.finish_reason, FinishReason::kLength) << i << ": " << o.error;
      EXPECT_EQ(tokens[ids[i]], 3 + i % 5) << i;
    }
  }
  expect_no_leaks(*e);
}

TEST(Engine, SeededSamplingIsReproducibleWhateverTheBatch) {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 100;
  p.top_p = 0.95f;
  p.min_p = 0.02f;
  p.repetition_penalty = 1.3f;
  p.frequency_penalty = 0.4f;
  p.presence_penalty = 0.3f;
  p.max_tokens = 16;
  p.ignore_eos = true;
  p.seed = 7;
  const std::vector<int32_t> prompt = make_prompt(12, 9);
  // Alone.
  auto solo = make_engine(EngineSetup{});
  ASSERT_TRUE(solo);
  auto solo_id = solo->add_request(prompt, p);
  ASSERT_TRUE(solo_id.ok());
  const std::vector<int32_t> want = drain(*solo).tokens[*solo_id];
  ASSERT_EQ(want.size(), 16u);
  // In a crowd, under memory pressure, with the same and with other seeds.
  EngineSetup crowded;
  crowded.kv_cache_tokens = 64;
  crowded.budget = 16;
  auto e = make_engine(crowded);
  ASSERT_TRUE(e);
  std::vector<RequestId> same;
  RequestId other = 0;
  for (int i = 0; i < 6; ++i) {
    SamplingParams q = p;
    q.seed = i == 4 ? 8 : 7;
    auto id = e->add_request(i % 2 ? make_prompt(9 + i, i) : prompt, q);
    ASSERT_TRUE(id.ok());
    if (i % 2 == 0 && i != 4) same.push_back(*id);
    if (i == 4) other = *id;
  }
  Collected c = drain(*e);
  for (RequestId id : same) EXPECT_EQ(c.tokens[id], want) << "request " << id;
  EXPECT_NE(c.tokens[other], want) << "a different seed should draw differently";
  expect_no_leaks(*e);
}

// The overlapped decode loop (EngineOptions::overlap_steps) against stepping in turn: greedy
// requests of many lengths (one and two tokens too), seeded draws with logprobs and logit bias, a
// stop token met early, and a second wave that arrives mid-run (overlap pauses while it waits)
// give the same tokens, logprobs and finish reasons either way; with penalties no step overlaps.
struct OverlapRun {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<TokenLogprob>> logprobs;
  std::vector<FinishReason> reasons;
  EngineStats stats;
};
OverlapRun run_overlap_case(bool overlap, bool penalties, int abort_after = -1) {
  EngineSetup setup;
  setup.overlap = overlap;
  setup.max_seqs = 6;
  auto e = make_engine(setup);
  OverlapRun out;
  if (!e) return out;
  std::vector<std::pair<std::vector<int32_t>, SamplingParams>> wave1, wave2;
  for (int i = 0; i < 5; ++i) {
    SamplingParams p = greedy(i == 0 ? 1 : i == 1 ? 2 : 6 + 3 * i);
    if (i == 2) {
      p.temperature = 0.8f;
      p.top_k = 40;
      p.top_p = 0.9f;
      p.min_p = 0.01f;
      p.seed = 11;
      p.logprobs = 3;
      p.logit_bias = {{7, 3.0f}, {9, -2.0f}};
    }
    if (i == 3) p.stop_token_ids = {alone(make_prompt(9 + i, i), 4)[2]};  // its third token
    if (penalties) p.repetition_penalty = 1.2f;
    wave1.push_back({make_prompt(9 + i, i), p});
  }
  for (int i = 0; i < 3; ++i) {
    SamplingParams p = greedy(5 + i);
    p.logprobs = i;
    wave2.push_back({make_prompt(14 + i, 20 + i), p});
  }
  std::vector<RequestId> ids;
  for (auto& [prompt, p] : wave1) ids.push_back(*e->add_request(prompt, p));
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::map<RequestId, std::vector<TokenLogprob>> logprobs;
  std::map<RequestId, FinishReason> reasons;
  for (int step = 0; step < 1000 && (e->has_unfinished() || step < 6); ++step) {
    if (step == 5)
      for (auto& [prompt, p] : wave2) ids.push_back(*e->add_request(prompt, p));
    if (step == abort_after) e->abort(ids[4]);
    for (const RequestOutput& o : e->step()) {
      auto& t = tokens[o.id];
      t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      auto& l = logprobs[o.id];
      l.insert(l.end(), o.logprobs.begin(), o.logprobs.end());
      if (o.finished) reasons[o.id] = o.finish_reason;
    }
  }
  for (RequestId id : ids) {
    out.tokens.push_back(tokens[id]);
    out.logprobs.push_back(logprobs[id]);
    out.reasons.push_back(reasons.count(id) ? reasons[id] : FinishReason::kNone);
  }
  out.stats = e->stats();
  EXPECT_EQ(out.stats.kv_free_blocks, out.stats.kv_total_blocks) << "KV blocks left held";
  return out;
}

void expect_same_outputs(const OverlapRun& got, const OverlapRun& want) {
  ASSERT_EQ(got.tokens.size(), want.tokens.size());
  for (size_t i = 0; i < want.tokens.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(got.tokens[i], want.tokens[i]);
    EXPECT_EQ(got.reasons[i], want.reasons[i]);
    ASSERT_EQ(got.logprobs[i].size(), want.logprobs[i].size());
    for (size_t t = 0; t < want.logprobs[i].size(); ++t) {
      EXPECT_EQ(got.logprobs[i][t].token, want.logprobs[i][t].token);
      EXPECT_FLOAT_EQ(got.logprobs[i][t].logprob, want.logprobs[i][t].logprob);
      EXPECT_EQ(got.logprobs[i][t].top, want.logprobs[i][t].top);
    }
  }
}

TEST(Engine, OverlappedDecodeGivesTheOutputsOfSteppingInTurn) {
  const OverlapRun in_turn = run_overlap_case(false, false);
  const OverlapRun overlapped = run_overlap_case(true, false);
  expect_same_outputs(overlapped, in_turn);
  EXPECT_EQ(in_turn.stats.overlapped_steps, 0);
  EXPECT_GT(overlapped.stats.overlapped_steps, 5);
  EXPECT_EQ(in_turn.tokens[0].size(), 1u);
  EXPECT_EQ(in_turn.tokens[3].size(), 3u) << "the stop token ends request 3 at its third token";
  EXPECT_EQ(in_turn.reasons[3], FinishReason::kStop);
  EXPECT_EQ(in_turn.logprobs[2].size(), in_turn.tokens[2].size());
  // An abort while an overlapped step holding the request is in flight.
  const OverlapRun aborted_in_turn = run_overlap_case(false, false, 3);
  const OverlapRun aborted = run_overlap_case(true, false, 3);
  expect_same_outputs(aborted, aborted_in_turn);
  EXPECT_EQ(aborted.reasons[4], FinishReason::kAbort);
  EXPECT_GT(aborted.stats.overlapped_steps, 0);
}

TEST(Engine, PenalisedRequestsAreNotOverlapped) {
  const OverlapRun in_turn = run_overlap_case(false, true);
  const OverlapRun overlapped = run_overlap_case(true, true);
  expect_same_outputs(overlapped, in_turn);
  // The second wave has no penalties: it overlaps once the first wave is done.
  EXPECT_LT(overlapped.stats.overlapped_steps,
            run_overlap_case(true, false).stats.overlapped_steps);
}

TEST(Engine, BadRequestsAreRejected) {
  auto e = make_engine(EngineSetup{});
  ASSERT_TRUE(e);
  auto expect_bad = [&](const SamplingParams& p, const std::string& field) {
    auto id = e->add_request({1, 2, 3}, p);
    ASSERT_FALSE(id.ok()) << field;
    EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(id.status().message().find("'" + field + "'"), std::string::npos)
        << id.status().message();
  };
  SamplingParams p;
  p.temperature = -1;
  expect_bad(p, "temperature");
  p = {};
  p.top_k = -1;
  expect_bad(p, "top_k");
  p = {};
  p.top_p = 0;
  expect_bad(p, "top_p");
  p.top_p = 1.5f;
  expect_bad(p, "top_p");
  p = {};
  p.min_p = 2;
  expect_bad(p, "min_p");
  p = {};
  p.repetition_penalty = 0;
  expect_bad(p, "repetition_penalty");
  p = {};
  p.frequency_penalty = 3;
  expect_bad(p, "frequency_penalty");
  p = {};
  p.presence_penalty = -2.5f;
  expect_bad(p, "presence_penalty");
  p = {};
  p.max_tokens = 0;
  expect_bad(p, "max_tokens");
  p = {};
  p.stop_token_ids = {512};
  expect_bad(p, "stop_token_ids");
  p = {};
  p.stop = {"x"};  // this fixture has no tokenizer
  expect_bad(p, "stop");
  EXPECT_FALSE(e->add_request({}, SamplingParams{}).ok());
  auto out_of_vocab = e->add_request({1, 600}, SamplingParams{});
  ASSERT_FALSE(out_of_vocab.ok());
  EXPECT_NE(out_of_vocab.status().message().find("600"), std::string::npos);
  EXPECT_FALSE(e->add_text_request("hello", SamplingParams{}).ok());  // no tokenizer
  EXPECT_FALSE(e->has_unfinished());

  EngineOptions bad;
  bad.model.model_dir = fixture("llama_mha");
  bad.max_num_batched_tokens = 4;
  bad.max_num_seqs = 8;
  auto refused = Engine::load(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("max_num_seqs"), std::string::npos);
}

// Text: the GGUF fixture carries a small byte-level BPE tokenizer.
TEST(Engine, TextStreamsAndStopsAtStopStrings) {
  EngineSetup s;
  s.model = gguf_fixture("llama_mha.f32.gguf");
  auto e = make_engine(s);
  ASSERT_TRUE(e);
  ASSERT_TRUE(e->has_tokenizer());
  auto full_id = e->add_text_request("the quick brown fox", greedy(24));
  ASSERT_TRUE(full_id.ok()) << full_id.status().to_string();
  auto results = e->run_to_completion();
  ASSERT_EQ(results.size(), 1u);
  const std::string full = results[0].text;
  ASSERT_GE(full.size(), 6u) << "the fixture should produce some text";
  // A stop string from the middle of the text, starting and ending on character boundaries.
  auto boundary = [&](size_t i) {
    return i >= full.size() || (static_cast<unsigned char>(full[i]) & 0xC0) != 0x80;
  };
  size_t at = full.size() / 2;
  while (at > 0 && !boundary(at)) --at;
  size_t end = at + 1;
  while (end < full.size() && !boundary(end)) ++end;
  if (end < full.size()) ++end;
  while (end < full.size() && !boundary(end)) ++end;
  const std::string stop = full.substr(at, end - at);
  const std::string want = full.substr(0, full.find(stop));

  SamplingParams p = greedy(24);
  p.stop = {"never appears \x01", stop};
  auto stop_id = e->add_text_request("the quick brown fox", p);
  ASSERT_TRUE(stop_id.ok());
  Collected c = drain(*e);
  EXPECT_EQ(c.text[*stop_id], want) << "stop '" << stop << "' in '" << full << "'";
  EXPECT_EQ(c.final[*stop_id].finish_reason, FinishReason::kStop);
  EXPECT_LE(c.tokens[*stop_id].size(), results[0].token_ids.size());
  expect_no_leaks(*e);
}

}  // namespace
}  // namespace roofline

namespace roofline {
namespace {

// Profiling live traffic: the next N steps, whatever they hold, timed call by call and analysed
// together; the outputs are the same as without the profile.
TEST(EngineProfile, RecordsTheNextStepsAndLeavesTheOutputsAlone) {
  auto plain = make_engine(EngineSetup{});
  auto profiled = make_engine(EngineSetup{});
  ASSERT_TRUE(plain && profiled);
  EXPECT_FALSE(profiled->take_profile().has_value());  // none started
  ASSERT_TRUE(profiled->start_profile(4, 20, 0.02).ok());
  SamplingParams params;
  params.max_tokens = 6;
  params.ignore_eos = true;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(plain->add_request(make_prompt(9 + i, i), params).ok());
    ASSERT_TRUE(profiled->add_request(make_prompt(9 + i, i), params).ok());
  }
  const auto want = plain->run_to_completion();
  std::optional<ProfileResult> got;
  std::map<RequestId, std::vector<int32_t>> tokens;
  int steps = 0;
  while (profiled->has_unfinished()) {
    for (const RequestOutput& o : profiled->step())
      tokens[o.id].insert(tokens[o.id].end(), o.new_token_ids.begin(), o.new_token_ids.end());
    ++steps;
    if (steps < 4) {
      EXPECT_FALSE(profiled->take_profile().has_value()) << "after step " << steps;
    } else if (steps == 4) {
      got = profiled->take_profile();
    }
  }
  ASSERT_EQ(want.size(), 3u);
  for (const RequestResult& w : want) EXPECT_EQ(tokens[w.id], w.token_ids) << "request " << w.id;
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(got->gpu);
  EXPECT_DOUBLE_EQ(got->bytes_per_s, 20e9);
  EXPECT_GT(got->ms_per_step, 0.0);
  EXPECT_GT(got->device_ms_per_step, 0.0);
  EXPECT_NE(got->report.find("measured"), std::string::npos) << got->report;
  EXPECT_NE(got->trace_json.find("traceEvents"), std::string::npos);
  EXPECT_FALSE(profiled->take_profile().has_value());  // handed out once
  EXPECT_EQ(steps, 6);                                 // 1 prefill step + 5 more tokens each
}

TEST(EngineProfile, BadStepsOrCeilingsAreInvalidArguments) {
  auto e = make_engine(EngineSetup{});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->start_profile(0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->start_profile(10001).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->start_profile(3, -1).code(), StatusCode::kInvalidArgument);
  // NaN passes a "< 0" test, and an infinite ceiling makes every roofline 0.
  const Status nan = e->start_profile(3, std::nan(""));
  EXPECT_EQ(nan.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(nan.message().find("bandwidth_gbps must be finite"), std::string::npos)
      << nan.message();
  EXPECT_EQ(e->start_profile(3, 0, std::numeric_limits<double>::infinity()).code(),
            StatusCode::kInvalidArgument);
}

TEST(EngineProfile, CancelledBeforeItsStepsNothingComesBack) {
  auto e = make_engine(EngineSetup{});
  ASSERT_TRUE(e);
  ASSERT_TRUE(e->start_profile(2, 20, 0.02).ok());
  e->cancel_profile();
  SamplingParams params;
  params.max_tokens = 4;
  ASSERT_TRUE(e->add_request(make_prompt(8, 1), params).ok());
  e->run_to_completion();
  EXPECT_FALSE(e->take_profile().has_value());
}

}  // namespace
}  // namespace roofline
