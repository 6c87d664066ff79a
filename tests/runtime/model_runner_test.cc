// Bad input to the runtime and the model loader: each case gets a clear Status naming the problem,
// and nothing (KV blocks, sequence lengths) changes when a step is refused.
#include "runtime/model_runner.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

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
    for (const auto& e : fs::directory_iterator(fixture(name))) fs::copy(e.path(), dir_ / e.path().filename());
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
  std::ofstream(dir + "/config.json") << "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": ";
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
  EXPECT_EQ((*m)->generate({}, GenerateOptions{}, nullptr).status().code(), StatusCode::kInvalidArgument);
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
  auto a = (*m)->generate({1, 2, 3}, g, [&](int32_t t) { streamed.push_back(t); return true; });
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
  auto d = (*m)->generate({1, 2, 3}, g, [&](int32_t) { return ++calls < 5; });
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->size(), 5u);
}

}  // namespace
}  // namespace roofline
