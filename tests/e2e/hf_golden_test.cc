// End to end against Hugging Face transformers: every fixture model in tests/fixtures/models
// (made by tests/fixtures/make_fixtures.py) must reproduce the golden fp32 logits of a prompt
// prefill plus 20 greedy decode steps, and the same greedy tokens, for several KV block sizes;
// and the runtime's different ways of computing the same thing (chunked prefill, one long
// prefill, batched sequences, unfused graph) must agree with each other.
//
// Tolerance: both sides compute in fp32 but sum in different orders (torch's GEMM blocking vs
// our row dot products). Measured (2026-11-30): the largest |difference| over all rows is 1.9e-6
// for fixtures whose logits stay within +-5 and 1.7e-5 for the two whose logits reach 39 and 60.
// atol 1e-4 + rtol 1e-4 leaves 5x headroom over that and is still 70x smaller than the smallest
// top-1/top-2 greedy margin of any fixture (0.0072), so a real bug (a wrong RoPE angle, a
// mis-indexed KV slot) cannot hide inside it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/npy.h"
#include "golden_util.h"
#include "ops/attention/attention.h"
#include "roofline/model.h"
#include "runtime/model_runner.h"

namespace roofline {
namespace {

using testing::expect_close;
using testing::fixture_dir;
using testing::Golden;
using testing::load_golden;

constexpr float kAtol = 1e-4f;
constexpr float kRtol = 1e-4f;

const std::vector<std::string>& fixture_names() {
  static const std::vector<std::string> names = {"llama_mha",
                                                 "llama_gqa4_tied_bf16",
                                                 "llama3_rope_scaled_sharded",
                                                 "llama_attn_bias",
                                                 "mistral_gqa4_f16",
                                                 "qwen2_bias_gqa7_tied",
                                                 "qwen3_qknorm_hd32_sharded",
                                                 "llama_gqa4_hd64_bf16",
                                                 "mistral_swa8_hd128",
                                                 "qwen2_bias_gqa2_hd64_tied"};
  return names;
}

std::unique_ptr<Model> load(const std::string& name, int64_t block_size,
                            int64_t max_step_tokens = 512, bool fuse = true) {
  ModelOptions o;
  o.model_dir = fixture_dir(name);
  o.kv_block_size = block_size;
  o.max_step_tokens = max_step_tokens;
  o.max_seqs = std::min<int64_t>(8, max_step_tokens);
  o.fuse = fuse;
  auto m = Model::load(o);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(m).value() : nullptr;
}

class HfGolden : public ::testing::TestWithParam<std::tuple<std::string, int64_t>> {};

TEST_P(HfGolden, LogitsAndGreedyTokensMatchTransformers) {
  const auto& [name, block_size] = GetParam();
  Golden g = load_golden(name);
  auto model = load(name, block_size);
  ASSERT_NE(model, nullptr);
  const int64_t vocab = model->info().vocab_size;
  const int64_t steps = static_cast<int64_t>(g.generated.size());
  std::vector<int32_t> greedy;
  auto logits = model->logits(g.prompt, steps, &greedy);
  ASSERT_TRUE(logits.ok()) << logits.status().to_string();
  ASSERT_EQ(g.logits.shape,
            (std::vector<int64_t>{static_cast<int64_t>(g.prompt.size()) + steps, vocab}));
  expect_close(*logits, g.logits.data, vocab, kAtol, kRtol, name + " prefill+decode");
  ASSERT_EQ(greedy.size(), g.generated.size() + 1);
  EXPECT_EQ(std::vector<int32_t>(greedy.begin(), greedy.end() - 1), g.generated) << name;

  // generate() takes the same path through the sampler: greedy tokens must be identical.
  GenerateOptions go;
  go.max_new_tokens = steps;
  go.stop_at_eos = false;
  auto gen = model->generate(g.prompt, go, nullptr);
  ASSERT_TRUE(gen.ok()) << gen.status().to_string();
  EXPECT_EQ(*gen, g.generated);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfGolden,
                         ::testing::Combine(::testing::ValuesIn(fixture_names()),
                                            ::testing::Values<int64_t>(16, 1, 5)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_block" +
                                  std::to_string(std::get<1>(info.param));
                         });

class Consistency : public ::testing::TestWithParam<std::string> {};

// Prefill then decode must equal one prefill of the whole sequence (the KV cache holds exactly
// what recomputation would), and chunked prefill must equal whole prefill.
TEST_P(Consistency, PrefillDecodeEqualsLongPrefillAndChunks) {
  const std::string name = GetParam();
  Golden g = load_golden(name);
  std::vector<int32_t> full = g.prompt;
  full.insert(full.end(), g.generated.begin(), g.generated.end());
  auto whole = load(name, 16);
  auto chunked = load(name, 5, /*max_step_tokens=*/4);
  ASSERT_NE(whole, nullptr);
  ASSERT_NE(chunked, nullptr);
  const int64_t vocab = whole->info().vocab_size;
  auto decoded = whole->logits(g.prompt, static_cast<int64_t>(g.generated.size()), nullptr);
  auto one_prefill = whole->logits(full, 0, nullptr);
  auto chunk_prefill = chunked->logits(full, 0, nullptr);
  ASSERT_TRUE(decoded.ok() && one_prefill.ok() && chunk_prefill.ok());
  // Same arithmetic in the same order per row: only the attention's key count per step differs.
  expect_close(*decoded, *one_prefill, vocab, 1e-5f, 1e-5f, name + " decode vs long prefill");
  expect_close(*chunk_prefill, *one_prefill, vocab, 1e-5f, 1e-5f, name + " chunked vs whole");
}

// The fusion passes change how the graph runs, not what it computes.
TEST_P(Consistency, UnfusedGraphMatchesFused) {
  const std::string name = GetParam();
  Golden g = load_golden(name);
  auto fused = load(name, 16);
  auto unfused = load(name, 16, 512, /*fuse=*/false);
  ASSERT_NE(fused, nullptr);
  ASSERT_NE(unfused, nullptr);
  auto a = fused->logits(g.prompt, 4, nullptr);
  auto b = unfused->logits(g.prompt, 4, nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  expect_close(*a, *b, fused->info().vocab_size, 1e-5f, 1e-5f, name + " fused vs unfused");
}

// Several sequences of different lengths in one step, mixing a prefill with decodes, equal each
// sequence run alone.
TEST_P(Consistency, BatchedSequencesEqualSolo) {
  const std::string name = GetParam();
  Golden g = load_golden(name);
  RunnerOptions ro;
  ro.model_dir = fixture_dir(name);
  ro.kv_block_size = 4;
  ro.max_step_tokens = 64;
  ro.max_seqs = 4;
  auto batch = ModelRunner::create(ro);
  ASSERT_TRUE(batch.ok()) << batch.status().to_string();
  const int64_t vocab = (*batch)->config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {
      g.prompt, {5, 9}, {g.generated.begin(), g.generated.begin() + 7}};
  // Solo: each prompt alone, then two greedy-free decode steps with fixed tokens.
  const std::vector<int32_t> follow = {3, 300};
  std::vector<std::vector<float>> solo(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto r = ModelRunner::create(ro);
    ASSERT_TRUE(r.ok());
    auto seq = (*r)->add_sequence();
    ASSERT_TRUE(seq.ok());
    std::vector<float> out;
    ASSERT_TRUE((*r)->step({{*seq, prompts[i]}}, false, &out).ok());
    for (int32_t t : follow) {
      ASSERT_TRUE((*r)->step({{*seq, {t}}}, false, &out).ok());
    }
    solo[i] = out;
  }
  // Batched: sequence 0 prefills first; then 1 and 2 prefill while 0 decodes; then all decode.
  const int64_t initial_free = (*batch)->free_kv_blocks();
  std::vector<int32_t> ids;
  for (size_t i = 0; i < prompts.size(); ++i) ids.push_back(*(*batch)->add_sequence());
  std::vector<float> out;
  ASSERT_TRUE((*batch)->step({{ids[0], prompts[0]}}, false, &out).ok());
  ASSERT_TRUE(
      (*batch)
          ->step({{ids[1], prompts[1]}, {ids[0], {follow[0]}}, {ids[2], prompts[2]}}, false, &out)
          .ok());
  ASSERT_TRUE(
      (*batch)
          ->step({{ids[1], {follow[0]}}, {ids[2], {follow[0]}}, {ids[0], {follow[1]}}}, false, &out)
          .ok());
  std::vector<float> last0(out.begin() + 2 * vocab, out.end());
  expect_close(last0, solo[0], vocab, 1e-5f, 1e-5f, name + " batched seq 0");
  ASSERT_TRUE((*batch)->step({{ids[2], {follow[1]}}, {ids[1], {follow[1]}}}, false, &out).ok());
  expect_close(std::vector<float>(out.begin() + vocab, out.end()), solo[1], vocab, 1e-5f, 1e-5f,
               name + " batched seq 1");
  expect_close(std::vector<float>(out.begin(), out.begin() + vocab), solo[2], vocab, 1e-5f, 1e-5f,
               name + " batched seq 2");
  // Releasing every sequence returns every block.
  EXPECT_LT((*batch)->free_kv_blocks(), initial_free);
  for (int32_t id : ids) ASSERT_TRUE((*batch)->release_sequence(id).ok());
  EXPECT_EQ((*batch)->free_kv_blocks(), initial_free);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Consistency, ::testing::ValuesIn(fixture_names()));

// The fixtures whose head_dim the CUDA attention kernels support (head_dim 32, 64, 128, 256; the
// 16-wide fixtures run on the CPU only). CudaFixtures.ListIsExactlyTheSupportedFixtures keeps the
// list in step with the fixtures' configs.
const std::vector<std::string>& cuda_fixture_names() {
  static const std::vector<std::string> names = {"qwen3_qknorm_hd32_sharded",
                                                 "llama_gqa4_hd64_bf16", "mistral_swa8_hd128",
                                                 "qwen2_bias_gqa2_hd64_tied"};
  return names;
}

// A fixture's attention head_dim from its config.json: head_dim, else hidden_size / heads.
int64_t fixture_head_dim(const std::string& name) {
  std::ifstream f(fixture_dir(name) + "/config.json");
  const nlohmann::json c = nlohmann::json::parse(f);
  if (c.contains("head_dim") && c["head_dim"].is_number_integer())
    return c["head_dim"].get<int64_t>();
  return c["hidden_size"].get<int64_t>() / c["num_attention_heads"].get<int64_t>();
}

TEST(CudaFixtures, ListIsExactlyTheSupportedFixtures) {
  std::vector<std::string> supported;
  for (const std::string& name : fixture_names())
    if (paged_attention_cuda_supports_head_dim(fixture_head_dim(name))) supported.push_back(name);
  EXPECT_EQ(supported, cuda_fixture_names());
  EXPECT_FALSE(cuda_fixture_names().empty()) << "no fixture exercises the CUDA backend";
}

class CudaConsistency : public ::testing::TestWithParam<std::string> {};

// The CUDA backend (bf16 weights, activations and KV cache) on those fixtures: the prompt's
// prefill rows and the decode rows while its greedy tokens agree with the golden ones must stay
// within bf16 error of the fp32 goldens. bf16 keeps 8 significant bits, so each of the ~10
// roundings on a row's path adds up to 2^-9 relative error of the values involved; with logits up
// to 60 and activations of order 1..10 the tolerance is 0.02 + 2% of the row's largest |logit|.
// Runs on the fixtures whose head_dim the CUDA kernels support (cuda_fixture_names), so on a GPU
// host it always runs; it skips itself only where no CUDA backend can exist: a CPU-only build
// (kUnimplemented) or a machine without a CUDA device (kNotFound).
TEST_P(CudaConsistency, CudaBackendMatchesGoldens) {
  const std::string name = GetParam();
  ModelOptions o;
  o.model_dir = fixture_dir(name);
  o.device = "cuda";
  auto m = Model::load(o);
  if (!m.ok() && (m.status().code() == StatusCode::kUnimplemented ||
                  m.status().code() == StatusCode::kNotFound))
    GTEST_SKIP() << m.status().to_string();
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  Golden g = load_golden(name);
  const int64_t vocab = (*m)->info().vocab_size;
  const int64_t steps = static_cast<int64_t>(g.generated.size());
  std::vector<int32_t> greedy;
  auto logits = (*m)->logits(g.prompt, steps, &greedy);
  ASSERT_TRUE(logits.ok()) << logits.status().to_string();
  size_t agree = 0;
  while (agree < g.generated.size() && greedy[agree] == g.generated[agree]) ++agree;
  const size_t rows = g.prompt.size() + agree;
  for (size_t r = 0; r < rows; ++r) {
    float row_max = 0;
    for (int64_t v = 0; v < vocab; ++v)
      row_max = std::max(row_max, std::fabs(g.logits.data[r * vocab + v]));
    const float tol = 0.02f + 0.02f * row_max;
    for (int64_t v = 0; v < vocab; ++v) {
      const float got = (*logits)[r * vocab + v], want = g.logits.data[r * vocab + v];
      ASSERT_LE(std::fabs(got - want), tol)
          << name << " row " << r << " col " << v << " got " << got << " want " << want;
    }
  }
  // A divergence is only acceptable where the reference itself was a near-tie.
  if (agree < g.generated.size()) {
    const float* row = g.logits.data.data() + (g.prompt.size() + agree - 1) * vocab;
    std::vector<float> sorted(row, row + vocab);
    std::sort(sorted.begin(), sorted.end());
    const float margin = sorted[vocab - 1] - sorted[vocab - 2];
    EXPECT_LE(margin, 0.02f + 0.02f * std::fabs(sorted[vocab - 1]))
        << name << ": greedy tokens diverge at step " << agree << " where the reference margin is "
        << margin;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaConsistency, ::testing::ValuesIn(cuda_fixture_names()));

}  // namespace
}  // namespace roofline
