// Bad input to the runtime and the model loader: each case gets a clear Status naming the problem,
// and nothing (KV blocks, sequence lengths) changes when a step is refused.
#include "runtime/model_runner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/model_config.h"
#include "io/weight_store.h"
#include "models/dense_decoder.h"
#include "roofline/model.h"

namespace roofline {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) {
  return std::string(ROOFLINE_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

// A scratch copy of a fixture whose config.json the test may rewrite.
class ScratchModel {
 public:
  explicit ScratchModel(const std::string& name) {
    dir_ = fs::temp_directory_path() / ("roofline_runner_test_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(counter_++));
    fs::create_directories(dir_);
    for (const auto& e : fs::directory_iterator(fixture(name)))
      fs::copy(e.path(), dir_ / e.path().filename());
    std::ifstream in(dir_ / "config.json");
    config_ = nlohmann::json::parse(in);
  }
  ~ScratchModel() { fs::remove_all(dir_); }
  nlohmann::json& config() { return config_; }
  std::string write() {
    std::ofstream(dir_ / "config.json") << config_.dump();
    return dir_.string();
  }

 private:
  static inline int counter_ = 0;
  fs::path dir_;
  nlohmann::json config_;
};

Status load_status(const std::string& dir) {
  ModelOptions o;
  o.model_dir = dir;
  auto m = Model::load(o);
  return m.ok() ? ok_status() : m.status();
}

std::unique_ptr<ModelRunner> runner(int64_t kv_tokens = 0, int64_t max_model_len = 0) {
  RunnerOptions o;
  o.model_dir = fixture("llama_mha");
  o.kv_block_size = 4;
  o.max_step_tokens = 32;
  o.max_seqs = 4;
  o.kv_cache_tokens = kv_tokens;
  o.max_model_len = max_model_len;
  auto r = ModelRunner::create(o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return std::move(r).value();
}

TEST(ModelLoad, MissingDirectory) {
  Status s = load_status("/nonexistent/model");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("config.json"), std::string::npos) << s.message();
}

TEST(ModelLoad, UnsupportedArchitecture) {
  ScratchModel m("llama_mha");
  m.config()["architectures"] = {"GPT2LMHeadModel"};
  Status s = load_status(m.write());
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("GPT2LMHeadModel"), std::string::npos) << s.message();
}

TEST(ModelLoad, ConfigNamesMoreLayersThanTheWeightsHave) {
  ScratchModel m("llama_mha");
  m.config()["num_hidden_layers"] = 3;
  Status s = load_status(m.write());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model.layers.2."), std::string::npos) << s.message();
}

// Fewer layers in config.json than in the checkpoint: running it would silently drop layers.
TEST(ModelLoad, ConfigNamesFewerLayersThanTheWeightsHave) {
  ScratchModel m("llama_mha");
  m.config()["num_hidden_layers"] = 1;
  Status s = load_status(m.write());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("hold layer 1 ('model.layers.1."), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("num_hidden_layers is 1"), std::string::npos) << s.message();
}

// Tensors the graph does not read are listed (for a warning), inv_freq buffers aside.
TEST(ModelLoad, UnusedCheckpointTensorsAreListed) {
  auto c = load_model_config(fixture("llama_mha"));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto store = WeightStore::create_owning("scratch");
  for (const auto& [name, shape] : dense_decoder_weight_shapes(*c))
    ASSERT_TRUE(store->add_virtual(name, DType::kBF16, shape).ok());
  auto none = unused_checkpoint_tensors(*c, *store);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  for (const char* extra :
       {"model.layers.0.self_attn.q_proj.bias", "model.layers.1.self_attn.rotary_emb.inv_freq",
        "vision.proj.weight", "model.layers.x.odd"})
    ASSERT_TRUE(store->add_virtual(extra, DType::kBF16, Shape{4}).ok());
  auto unused = unused_checkpoint_tensors(*c, *store);
  ASSERT_TRUE(unused.ok());
  EXPECT_EQ(*unused, (std::vector<std::string>{"model.layers.0.self_attn.q_proj.bias",
                                               "model.layers.x.odd", "vision.proj.weight"}));
}

// A tokenizer from another model: a bos id it adds past the model's vocabulary is an error at
// load; more tokens than the vocabulary is a warning (text that encodes to them is refused later).
TEST(ModelLoad, TokenizerFromAnotherModel) {
  const fs::path tokenizer = fs::path(ROOFLINE_SOURCE_DIR) / "tests/fixtures/tokenizers/bytelevel";
  ScratchModel m("llama_mha");  // vocabulary 512; the byte-level tokenizer has 3003 tokens
  const fs::path dir = m.write();
  fs::copy(tokenizer / "tokenizer_config.json", dir / "tokenizer_config.json");
  nlohmann::json tok = nlohmann::json::parse(std::ifstream(tokenizer / "tokenizer.json"));
  std::ofstream(dir / "tokenizer.json") << tok.dump();
  testing::internal::CaptureStderr();
  Status s = load_status(dir.string());
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_NE(log.find("has 3003 tokens, more than the model's vocabulary of 512"), std::string::npos)
      << log;
  // Move <|begin_of_text|> (added to every prompt) from id 0 to 2999.
  auto& vocab = tok["model"]["vocab"];
  for (auto it = vocab.begin(); it != vocab.end(); ++it)
    if (it.value() == 2999) it.value() = 0;
  vocab["<|begin_of_text|>"] = 2999;
  tok["added_tokens"][0]["id"] = 2999;
  for (auto& p : tok["post_processor"]["processors"])
    if (p["type"] == "TemplateProcessing") p["special_tokens"]["<|begin_of_text|>"]["ids"] = {2999};
  std::ofstream(dir / "tokenizer.json") << tok.dump();
  s = load_status(dir.string());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("begins every prompt with token id 2999, outside the model's "
                             "vocabulary of 512"),
            std::string::npos)
      << s.message();
}

TEST(ModelLoad, ConfigShapeDisagreesWithWeights) {
  ScratchModel m("llama_mha");
  m.config()["intermediate_size"] = 128;
  Status s = load_status(m.write());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("mlp"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[160, 64]"), std::string::npos) << s.message();
}

TEST(ModelLoad, MalformedConfig) {
  ScratchModel m("llama_mha");
  m.write();
  const std::string dir = m.write();
  std::ofstream(dir + "/config.json")
      << "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": ";
  Status s = load_status(dir);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("config.json"), std::string::npos) << s.message();
}

TEST(ModelLoad, BadOptions) {
  RunnerOptions o;
  o.model_dir = fixture("llama_mha");
  o.kv_block_size = 0;
  EXPECT_EQ(ModelRunner::create(o).status().code(), StatusCode::kInvalidArgument);
  o.kv_block_size = 16;
  o.max_seqs = 1000;
  o.max_step_tokens = 10;
  auto r = ModelRunner::create(o);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("--max-seqs"), std::string::npos);
}

// What check_runner_options refuses needs no model file: each error names its flag, and the
// public check_model_options (what the CLI runs before loading) says the same.
TEST(ModelLoad, OptionsAreCheckedBeforeAnyFile) {
  auto refused = [](const RunnerOptions& o, const std::string& flag) {
    const Status s = check_runner_options(o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << flag;
    EXPECT_NE(s.message().find(flag), std::string::npos) << s.to_string();
  };
  RunnerOptions o;
  o.model_dir = "/nonexistent";
  EXPECT_TRUE(check_runner_options(o).ok());  // the path is the loader's to find missing
  o.dummy_weights = "llama-tiny";
  refused(o, "exactly one");
  o.model_dir.clear();
  o.dummy_weights = "gpt5";
  refused(o, "--dummy-weights 'gpt5'");
  o.dummy_weights = "llama-tiny";
  for (const char* bad : {"tpu", "cuda:", "cuda:x", "cuda:1234", "CUDA"}) {
    o.device = bad;
    refused(o, "--device");
  }
  for (const char* good : {"cpu", "cuda", "cuda:0", "cuda:123"}) {
    o.device = good;
    EXPECT_TRUE(check_runner_options(o).ok()) << good;
  }
  o.device = "cpu";
  o.max_model_len = (1 << 24) + 1;
  refused(o, "--max-model-len");
  o.max_model_len = 0;
  o.kv_cache_tokens = -1;
  refused(o, "--kv-cache-tokens");
  o.kv_cache_tokens = 0;
  o.kv_memory_fraction = 1.5;
  refused(o, "--kv-memory-fraction must be in (0, 0.95], got 1.5");

  ModelOptions m;
  m.dummy_weights = "llama-tiny";
  EXPECT_TRUE(check_model_options(m).ok());
  m.num_threads = 5000;
  EXPECT_NE(check_model_options(m).message().find("--threads"), std::string::npos);
  m.num_threads = 0;
  m.device = "tpu";
  EXPECT_NE(check_model_options(m).message().find("--device"), std::string::npos);
}

// `roofline bench`'s graph floor and kernel count need the CUDA backend's decode graphs: on the
// CPU backend, even after a decode step, replaying or counting one is Unimplemented (the bench
// then prints neither).
TEST(ModelRunnerStep, ReplayingADecodeGraphNeedsTheCudaBackend) {
  auto r = runner();
  int32_t seq = *r->add_sequence();
  std::vector<float> out;
  ASSERT_TRUE(r->step({{seq, {1, 2, 3}}}, false, &out).ok());
  ASSERT_TRUE(r->step({{seq, {4}}}, false, &out).ok());
  EXPECT_EQ(r->replay_last_decode_graph(8).status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(r->last_decode_graph_nodes().status().code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(r->graph_report().nodes.empty());
  EXPECT_EQ(r->sequence_length(seq), 4);
}

int gathers(const Plan& plan) {
  int n = 0;
  for (const PlanCall& c : plan.calls) n += c.op == OpKind::kGatherLastTokens;
  return n;
}

TEST(ModelRunnerStep, DecodeStepsRunTheAllTokenPlanWithoutTheGather) {
  // A step of one token a sequence takes the all-token plan: its rows are the last tokens, so the
  // last-token plan's gather would only copy them. A step with a longer entry gathers. Both give
  // the logits of each sequence's last token, bit for bit those of the gathering plan (the graph
  // norms rows one by one): a second runner with the same prompts, whose decode step carries a
  // longer entry, computes the same rows.
  auto r = runner();
  const int32_t a = *r->add_sequence(), b = *r->add_sequence();
  std::vector<float> prefill, decode;
  ASSERT_TRUE(r->step({{a, {1, 2, 3}}, {b, {9, 8}}}, false, &prefill).ok());
  EXPECT_EQ(gathers(*r->last_plan()), 1);
  ASSERT_TRUE(r->step({{a, {4}}, {b, {5}}}, false, &decode).ok());
  EXPECT_EQ(gathers(*r->last_plan()), 0);
  const std::vector<Plan>& all = r->plans(true);
  EXPECT_TRUE(
      std::any_of(all.begin(), all.end(), [&](const Plan& p) { return &p == r->last_plan(); }));
  const size_t vocab = static_cast<size_t>(r->config().vocab_size);
  ASSERT_EQ(decode.size(), 2 * vocab);

  auto other = runner();
  const int32_t c = *other->add_sequence(), d = *other->add_sequence(), e = *other->add_sequence();
  std::vector<float> unused, mixed;
  ASSERT_TRUE(other->step({{c, {1, 2, 3}}, {d, {9, 8}}}, false, &unused).ok());
  // c and d decode as a and b did, beside e's two-token prefill: the gathering plan.
  ASSERT_TRUE(other->step({{c, {4}}, {d, {5}}, {e, {7, 7}}}, false, &mixed).ok());
  EXPECT_EQ(gathers(*other->last_plan()), 1);
  ASSERT_EQ(mixed.size(), 3 * vocab);
  mixed.resize(2 * vocab);
  EXPECT_EQ(mixed, decode);
}

TEST(ModelRunnerStep, TokenOutOfVocabulary) {
  auto r = runner();
  int32_t seq = *r->add_sequence();
  std::vector<float> out;
  Status s = r->step({{seq, {1, 512}}}, false, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("512"), std::string::npos);
  EXPECT_EQ(r->sequence_length(seq), 0);
  s = r->step({{seq, {-3}}}, false, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(ModelRunnerStep, RefusedStepsChangeNothing) {
  auto r = runner(/*kv_tokens=*/16, /*max_model_len=*/12);
  const int64_t free0 = r->free_kv_blocks();
  int32_t a = *r->add_sequence();
  int32_t b = *r->add_sequence();
  std::vector<float> out;
  // Longer than the model length.
  Status s = r->step({{a, std::vector<int32_t>(13, 7)}}, false, &out);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  // Fill the cache: 12 tokens use 3 of the 4 blocks; 8 more for b need 2.
  ASSERT_TRUE(r->step({{a, std::vector<int32_t>(12, 7)}}, false, &out).ok());
  s = r->step({{b, std::vector<int32_t>(8, 7)}}, false, &out);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("--kv-cache-tokens"), std::string::npos);
  EXPECT_EQ(r->sequence_length(b), 0);
  EXPECT_EQ(r->free_kv_blocks(), free0 - 3);
  // Same sequence twice, unknown sequence, empty entry, too many tokens.
  EXPECT_EQ(r->step({{b, {1}}, {b, {2}}}, false, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r->step({{99, {1}}}, false, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r->step({{b, {}}}, false, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r->step({}, false, &out).code(), StatusCode::kInvalidArgument);
  // Releasing frees the blocks and the freed sequence can no longer step.
  ASSERT_TRUE(r->release_sequence(a).ok());
  EXPECT_EQ(r->free_kv_blocks(), free0);
  EXPECT_EQ(r->step({{a, {1}}}, false, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(r->step({{b, std::vector<int32_t>(8, 7)}}, false, &out).ok());
}

TEST(ModelRunnerStep, TooManyTokensInOneStep) {
  auto r = runner();
  int32_t a = *r->add_sequence();
  std::vector<float> out;
  Status s = r->step({{a, std::vector<int32_t>(33, 1)}}, false, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--max-step-tokens"), std::string::npos);
}

// Prefix caching on llama_mha with 4-token blocks.
std::unique_ptr<ModelRunner> prefix_runner(bool cache, int64_t kv_tokens = 0) {
  RunnerOptions o;
  o.model_dir = fixture("llama_mha");
  o.kv_block_size = 4;
  o.max_step_tokens = 32;
  o.max_seqs = 4;
  o.max_model_len = 64;
  o.kv_cache_tokens = kv_tokens;
  o.enable_prefix_cache = cache;
  auto r = ModelRunner::create(o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return std::move(r).value();
}

::testing::AssertionResult logits_close(const std::vector<float>& got,
                                        const std::vector<float>& want, float tol = 1e-5f) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " logits, expected " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= tol + tol * std::fabs(want[i])))
      return ::testing::AssertionFailure() << "logit " << i << ": " << got[i] << " vs " << want[i];
  return ::testing::AssertionSuccess();
}

TEST(ModelRunnerPrefixCache, SecondSequenceAdoptsFullBlocksAndMatches) {
  auto r = prefix_runner(true);
  const std::vector<int32_t> prompt = {1, 17, 300, 42, 9, 77, 123, 500, 3, 64, 211};  // 11 tokens
  const int64_t total = r->kv_stats().total_blocks;
  int32_t a = *r->add_sequence();
  EXPECT_EQ(*r->adopt_cached_prefix(a, prompt), 0);  // empty cache: one miss, then the walk stops
  std::vector<float> la, lb;
  ASSERT_TRUE(r->step({{a, prompt}}, false, &la).ok());
  KvStats k = r->kv_stats();
  EXPECT_EQ(k.cached_blocks, 2);  // 11 tokens: two full blocks registered
  EXPECT_EQ(k.prefix_hit_blocks, 0);
  EXPECT_EQ(k.prefix_miss_blocks, 1);
  EXPECT_EQ(k.free_blocks, total - 3);

  int32_t b = *r->add_sequence();
  EXPECT_EQ(*r->adopt_cached_prefix(b, prompt), 8);
  EXPECT_EQ(r->sequence_length(b), 8);
  EXPECT_EQ(r->kv_stats().free_blocks, total - 3) << "adopted blocks are shared, not copied";
  ASSERT_TRUE(
      r->step({{b, std::vector<int32_t>(prompt.begin() + 8, prompt.end())}}, false, &lb).ok());
  EXPECT_TRUE(logits_close(lb, la));
  k = r->kv_stats();
  EXPECT_EQ(k.prefix_hit_blocks, 2);
  EXPECT_EQ(k.prefix_miss_blocks, 1);
  EXPECT_EQ(k.free_blocks, total - 4);
  // Both decode on: a writes into its own third block, b into its own; still equal.
  ASSERT_TRUE(r->step({{a, {5}}, {b, {5}}}, false, &la).ok());
  ASSERT_EQ(la.size(), 2u * 512);
  EXPECT_TRUE(logits_close(std::vector<float>(la.begin() + 512, la.end()),
                           std::vector<float>(la.begin(), la.begin() + 512)));

  // A different prompt: no hit. An 8-token prompt equal to the first 8: capped at one block so a
  // token is left to compute.
  int32_t c = *r->add_sequence();
  std::vector<int32_t> other = prompt;
  other[0] = 2;
  EXPECT_EQ(*r->adopt_cached_prefix(c, other), 0);
  int32_t d = *r->add_sequence();
  EXPECT_EQ(*r->adopt_cached_prefix(d, std::vector<int32_t>(prompt.begin(), prompt.begin() + 8)),
            4);
  EXPECT_EQ(*r->adopt_cached_prefix(*r->add_sequence(),
                                    std::vector<int32_t>(prompt.begin(), prompt.begin() + 4)),
            0);
  k = r->kv_stats();
  EXPECT_EQ(k.prefix_hit_blocks, 3);
  EXPECT_EQ(k.prefix_miss_blocks, 2);

  // Adopting into a sequence that holds tokens, or one that is not open, is an error.
  EXPECT_EQ(r->adopt_cached_prefix(a, prompt).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r->adopt_cached_prefix(d, prompt).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r->adopt_cached_prefix(99, prompt).status().code(), StatusCode::kInvalidArgument);

  // Release everything: the whole pool is allocatable again, the full blocks still cached.
  for (int32_t s = 0; s < 5; ++s) ASSERT_TRUE(r->release_sequence(s).ok());
  k = r->kv_stats();
  EXPECT_EQ(k.free_blocks, total);
  EXPECT_EQ(r->free_kv_blocks(), total);
  EXPECT_EQ(k.cached_blocks, 3);  // prompt's two blocks and a's third (prompt[8..10] + 5)
  EXPECT_EQ(k.evictions, 0);
}

TEST(ModelRunnerPrefixCache, DisabledCachesNothing) {
  auto r = prefix_runner(false);
  const std::vector<int32_t> prompt = {1, 17, 300, 42, 9, 77, 123, 500, 3, 64, 211};
  std::vector<float> out;
  for (int i = 0; i < 2; ++i) {
    int32_t s = *r->add_sequence();
    EXPECT_EQ(*r->adopt_cached_prefix(s, prompt), 0);
    ASSERT_TRUE(r->step({{s, prompt}}, false, &out).ok());
  }
  const KvStats k = r->kv_stats();
  EXPECT_EQ(k.cached_blocks, 0);
  EXPECT_EQ(k.prefix_hit_blocks, 0);
  EXPECT_EQ(k.prefix_miss_blocks, 0);
  EXPECT_EQ(k.free_blocks, k.total_blocks - 6);
  // Still an error on a non-empty sequence.
  EXPECT_EQ(r->adopt_cached_prefix(0, prompt).status().code(), StatusCode::kInvalidArgument);
}

// A pool of 8 blocks and requests over two 12-token system prompts with varied questions: cached
// blocks are evicted and revived constantly. Every request's logits (prompt and two decode
// steps) must equal those of a runner without caching.
TEST(ModelRunnerPrefixCache, EvictionUnderATinyPoolKeepsResultsExact) {
  auto cached = prefix_runner(true, /*kv_tokens=*/32);
  auto plain = prefix_runner(false);
  ASSERT_EQ(cached->kv_stats().total_blocks, 8);
  const std::vector<std::vector<int32_t>> systems = {
      {1, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20},
      {1, 10, 11, 12, 99, 98, 97, 96, 95, 94, 93, 92}};
  auto run = [](ModelRunner& r, const std::vector<int32_t>& prompt, bool adopt, int64_t* adopted,
                std::vector<float>* logits) -> Status {
    ROOFLINE_ASSIGN_OR_RETURN(int32_t s, r.add_sequence());
    int64_t start = 0;
    if (adopt) {
      ROOFLINE_ASSIGN_OR_RETURN(start, r.adopt_cached_prefix(s, prompt));
    }
    *adopted = start;
    std::vector<float> out;
    logits->clear();
    ROOFLINE_RETURN_IF_ERROR(
        r.step({{s, std::vector<int32_t>(prompt.begin() + start, prompt.end())}}, false, &out));
    logits->insert(logits->end(), out.begin(), out.end());
    for (int32_t t : {7, 8}) {
      ROOFLINE_RETURN_IF_ERROR(r.step({{s, {t}}}, false, &out));
      logits->insert(logits->end(), out.begin(), out.end());
    }
    return r.release_sequence(s);
  };
  int64_t adopted_tokens = 0;
  for (int i = 0; i < 12; ++i) {
    std::vector<int32_t> prompt = systems[(i / 2) % 2];  // AABBAABB...
    for (int q = 0; q <= i % 5; ++q) prompt.push_back(200 + 13 * i + q);
    std::vector<float> want, got;
    int64_t adopted = 0, unused = 0;
    ASSERT_TRUE(run(*plain, prompt, false, &unused, &want).ok());
    Status s = run(*cached, prompt, true, &adopted, &got);
    ASSERT_TRUE(s.ok()) << "request " << i << ": " << s.to_string();
    EXPECT_TRUE(logits_close(got, want))
        << "request " << i << " (adopted " << adopted << " tokens)";
    adopted_tokens += adopted;
    EXPECT_EQ(cached->free_kv_blocks(), 8);
  }
  const KvStats k = cached->kv_stats();
  EXPECT_GT(k.evictions, 0) << "the pool was meant to be too small to keep everything";
  EXPECT_GT(k.prefix_hit_blocks, 0);
  EXPECT_EQ(adopted_tokens, 4 * k.prefix_hit_blocks);
}

// Two sequences that prefill the same prompt in one step both compute it; the first keeps the
// cache entry and a third sequence adopts it.
TEST(ModelRunnerPrefixCache, SamePromptTwiceInOneStep) {
  auto r = prefix_runner(true);
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  int32_t a = *r->add_sequence(), b = *r->add_sequence();
  std::vector<float> out, third;
  ASSERT_TRUE(r->step({{a, prompt}, {b, prompt}}, false, &out).ok());
  EXPECT_EQ(r->kv_stats().cached_blocks, 2);
  EXPECT_TRUE(logits_close(std::vector<float>(out.begin() + 512, out.end()),
                           std::vector<float>(out.begin(), out.begin() + 512)));
  int32_t c = *r->add_sequence();
  EXPECT_EQ(*r->adopt_cached_prefix(c, prompt), 8);
  ASSERT_TRUE(r->step({{c, {9}}}, false, &third).ok());
  EXPECT_TRUE(logits_close(third, std::vector<float>(out.begin(), out.begin() + 512)));
  for (int32_t s : {a, b, c}) ASSERT_TRUE(r->release_sequence(s).ok());
  EXPECT_EQ(r->free_kv_blocks(), r->kv_stats().total_blocks);
}

TEST(ModelGenerate, BadSamplingOptions) {
  ModelOptions o;
  o.model_dir = fixture("llama_mha");
  auto m = Model::load(o);
  ASSERT_TRUE(m.ok());
  GenerateOptions g;
  g.top_p = 0;
  EXPECT_EQ((*m)->generate({1}, g, nullptr).status().code(), StatusCode::kInvalidArgument);
  g = GenerateOptions{};
  g.temperature = -1;
  EXPECT_EQ((*m)->generate({1}, g, nullptr).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*m)->generate({}, GenerateOptions{}, nullptr).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(ModelGenerate, SeededSamplingIsReproducibleAndStreams) {
  ModelOptions o;
  o.model_dir = fixture("llama_mha");  // logits within +-5: sampling at temperature 1.5 varies
  auto m = Model::load(o);
  ASSERT_TRUE(m.ok());
  GenerateOptions g;
  g.temperature = 1.5f;
  g.top_k = 50;
  g.top_p = 0.95f;
  g.seed = 42;
  g.max_new_tokens = 24;
  g.stop_at_eos = false;
  std::vector<int32_t> streamed;
  auto a = (*m)->generate({1, 2, 3}, g, [&](int32_t t) {
    streamed.push_back(t);
    return true;
  });
  auto b = (*m)->generate({1, 2, 3}, g, nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(*a, streamed);
  g.seed = 43;
  auto c = (*m)->generate({1, 2, 3}, g, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(*a, *c) << "different seeds drew the same 24 tokens at temperature 1.5";
  // The callback can stop generation.
  int calls = 0;
  GenerateStats stats;
  auto d = (*m)->generate(
      {1, 2, 3}, g, [&](int32_t) { return ++calls < 5; }, &stats);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->size(), 5u);
  EXPECT_EQ(stats.end, GenerateEnd::kStopped);
}

// Generation is held to the model length as the engine's requests are (prompt + generated tokens
// <= max_model_len): it stops there and says so (GenerateStats::end) instead of passing for a
// completed max_new_tokens; a budget that ends exactly at the length is kMaxTokens; a prompt that
// fills the length is an error that says what to change.
TEST(ModelGenerate, StopsAtTheModelLengthAndSaysSo) {
  ModelOptions o;
  o.model_dir = fixture("llama_mha");
  o.max_model_len = 12;
  auto m = Model::load(o);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  GenerateOptions g;
  g.stop_at_eos = false;
  g.max_new_tokens = 10;
  GenerateStats stats;
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8};
  auto out = (*m)->generate(prompt, g, nullptr, &stats);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(out->size(), 4u);  // 8 + 4 = 12
  EXPECT_EQ(stats.generated_tokens, 4);
  EXPECT_EQ(stats.end, GenerateEnd::kModelLength);
  EXPECT_EQ(stats.max_model_len, 12);
  EXPECT_STREQ(generate_end_name(stats.end), "model_length");
  for (int64_t budget : {4, 3}) {
    g.max_new_tokens = budget;
    out = (*m)->generate(prompt, g, nullptr, &stats);
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(static_cast<int64_t>(out->size()), budget);
    EXPECT_EQ(stats.end, GenerateEnd::kMaxTokens) << budget;
  }
  // 11 prompt tokens leave room for one; 12 for none.
  g.max_new_tokens = 10;
  out = (*m)->generate(std::vector<int32_t>(11, 5), g, nullptr, &stats);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->size(), 1u);
  EXPECT_EQ(stats.end, GenerateEnd::kModelLength);
  out = (*m)->generate(std::vector<int32_t>(12, 5), g, nullptr, &stats);
  EXPECT_EQ(out.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(out.status().message().find("no room to generate within the model length of 12"),
            std::string::npos)
      << out.status().to_string();
}

}  // namespace
}  // namespace roofline
