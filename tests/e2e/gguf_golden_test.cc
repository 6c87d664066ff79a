// End to end from GGUF: the fixture models converted the way llama.cpp's converter does
// (tests/fixtures/make_gguf_fixtures.py: ggml names, llama q/k rows permuted, f32 or bf16
// tensors) must reproduce the Hugging Face golden logits and greedy tokens of the model
// directories they came from, through the same loader entry point the CLI uses.
//
// Tolerances: the f32/bf16 files hold the HF weights exactly, so the HF golden tolerance of
// tests/e2e/hf_golden_test.cc (atol 1e-4 + rtol 1e-4, see its header for the measurement)
// applies unchanged, and the GGUF model must agree with the same model loaded from its HF
// directory to 1e-5 (measured: identical, max |diff| 0). The Q8_0 file changes the weights
// themselves (each within half a quantisation step); measured (2026-11-30) its largest
// |logit - golden| is 0.061 with |logits| up to 4.7, so atol 0.15 + rtol 0.02 leaves ~2.5x headroom
// while a wrong q/k permutation or block scale (errors of order 1) still fails. Its free-running
// greedy tokens match the golden ones for 13 steps and flip at step 14, where the golden
// top-1/top-2 margin is 0.027 (less than the Q8_0 error); the test checks the first kQ8GreedySteps
// = 12.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/npy.h"
#include "golden_util.h"
#include "roofline/model.h"

namespace roofline {
namespace {

using testing::expect_close;
using testing::Golden;
using testing::load_golden;

std::string fixtures() { return std::string(ROOFLINE_SOURCE_DIR) + "/tests/fixtures/"; }

std::unique_ptr<Model> load(const std::string& path, int64_t block_size) {
  ModelOptions o;
  o.model_dir = path;
  o.kv_block_size = block_size;
  o.max_step_tokens = 64;
  o.max_seqs = 4;
  auto m = Model::load(o);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(m).value() : nullptr;
}

struct Case {
  const char* gguf;
  const char* hf;
};

class GgufGolden : public ::testing::TestWithParam<std::tuple<Case, int64_t>> {};

TEST_P(GgufGolden, LogitsAndGreedyTokensMatchTransformers) {
  const auto& [c, block_size] = GetParam();
  Golden g = load_golden(c.hf);
  auto model = load(fixtures() + "gguf/" + c.gguf, block_size);
  ASSERT_NE(model, nullptr);
  const int64_t vocab = model->info().vocab_size;
  const int64_t steps = static_cast<int64_t>(g.generated.size());
  std::vector<int32_t> greedy;
  auto logits = model->logits(g.prompt, steps, &greedy);
  ASSERT_TRUE(logits.ok()) << logits.status().to_string();
  ASSERT_EQ(g.logits.shape,
            (std::vector<int64_t>{static_cast<int64_t>(g.prompt.size()) + steps, vocab}));
  expect_close(*logits, g.logits.data, vocab, 1e-4f, 1e-4f, std::string(c.gguf) + " vs golden");
  ASSERT_EQ(greedy.size(), g.generated.size() + 1);
  EXPECT_EQ(std::vector<int32_t>(greedy.begin(), greedy.end() - 1), g.generated) << c.gguf;

  // The same model from its Hugging Face directory: only the weight container differs.
  auto hf = load(fixtures() + "models/" + c.hf, block_size);
  ASSERT_NE(hf, nullptr);
  auto hf_logits = hf->logits(g.prompt, steps, nullptr);
  ASSERT_TRUE(hf_logits.ok());
  expect_close(*logits, *hf_logits, vocab, 1e-5f, 1e-5f, std::string(c.gguf) + " vs HF dir");
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, GgufGolden,
    ::testing::Combine(
        ::testing::Values(Case{"llama_mha.f32.gguf", "llama_mha"},
                          Case{"qwen2_bias_gqa7_tied.f32.gguf", "qwen2_bias_gqa7_tied"},
                          Case{"qwen3_qknorm_hd32_sharded.bf16.gguf", "qwen3_qknorm_hd32_sharded"}),
        ::testing::Values<int64_t>(16, 5)),
    [](const auto& info) {
      std::string name = std::get<0>(info.param).hf;
      return name + "_block" + std::to_string(std::get<1>(info.param));
    });

constexpr int kQ8GreedySteps = 12;

TEST(GgufGoldenQ8_0, LogitsCloseAndFirstGreedyTokensMatch) {
  Golden g = load_golden("llama_mha");
  auto model = load(fixtures() + "gguf/llama_mha.q8_0.gguf", 16);
  ASSERT_NE(model, nullptr);
  const int64_t vocab = model->info().vocab_size;
  // Teacher-forced on the golden tokens (prefill of prompt + generated), so one early greedy
  // flip cannot cascade into unrelated later rows.
  std::vector<int32_t> full = g.prompt;
  full.insert(full.end(), g.generated.begin(), g.generated.end());
  auto logits = model->logits(full, 0, nullptr);
  ASSERT_TRUE(logits.ok()) << logits.status().to_string();
  ASSERT_EQ(logits->size(), g.logits.data.size());
  expect_close(*logits, g.logits.data, vocab, 0.15f, 0.02f, "llama_mha.q8_0 vs golden");

  std::vector<int32_t> greedy;
  auto decoded = model->logits(g.prompt, kQ8GreedySteps, &greedy);
  ASSERT_TRUE(decoded.ok());
  ASSERT_GE(greedy.size(), static_cast<size_t>(kQ8GreedySteps));
  EXPECT_EQ(std::vector<int32_t>(greedy.begin(), greedy.begin() + kQ8GreedySteps),
            std::vector<int32_t>(g.generated.begin(), g.generated.begin() + kQ8GreedySteps));
}

}  // namespace
}  // namespace roofline
