// Tests for WeightStore: single-file and sharded directories, the checks on a hostile shard index
// (path traversal, missing shards, tensors the index promises but the shard lacks, tensors in two
// files), get/get_float errors, and every weight of the Hugging Face fixture models.
#include "io/weight_store.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "safetensors_test_util.h"

namespace roofline {
namespace {

using testing::f32_bytes;
using testing::make_safetensors;
using testing::TempDir;

constexpr const char* kIndex = "model.safetensors.index.json";

void expect_error(const Status& s, StatusCode code, const std::string& phrase) {
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(phrase), std::string::npos) << s.to_string();
}

std::string index_json(const std::map<std::string, std::string>& weight_map) {
  nlohmann::json j = {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}};
  return j.dump(2);
}

// Two shards: "a" and "b" in shard 1, "c" in shard 2.
void write_sharded(const TempDir& dir) {
  dir.write("model-1.safetensors", make_safetensors({{"a", "F32", {2, 2}, f32_bytes({1, 2, 3, 4})},
                                                     {"b", "I32", {1}, f32_bytes({0})}}));
  dir.write("model-2.safetensors", make_safetensors({{"c", "F32", {3}, f32_bytes({5, 6, 7})}}));
}

TEST(WeightStore, OpensSingleFile) {
  TempDir dir;
  dir.write("model.safetensors",
            make_safetensors({{"z.weight", "F32", {2, 3}, f32_bytes({1, 2, 3, 4, 5, 6})},
                              {"a.ids", "I64", {2}, std::string(16, '\0')}}));
  auto store = WeightStore::open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_EQ((*store)->names(), (std::vector<std::string>{"a.ids", "z.weight"}));
  EXPECT_EQ((*store)->total_bytes(), 24u + 16u);
  EXPECT_EQ((*store)->dir(), dir.path());
  EXPECT_TRUE((*store)->contains("z.weight"));
  EXPECT_FALSE((*store)->contains("y.weight"));
  auto w = (*store)->get_float("z.weight", Shape({2, 3}));
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w->as<const float>()[5], 6.0f);
}

TEST(WeightStore, GetUnknownTensorNamesTensorAndDirectory) {
  TempDir dir;
  dir.write("model.safetensors", make_safetensors({{"w", "F32", {1}, f32_bytes({1})}}));
  auto store = WeightStore::open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  auto t = (*store)->get("model.layers.9.mlp.up_proj.weight");
  expect_error(t.status(), StatusCode::kNotFound, "'model.layers.9.mlp.up_proj.weight'");
  EXPECT_NE(t.status().message().find(dir.path()), std::string::npos);
  expect_error((*store)->get_float("nope", Shape({1})).status(), StatusCode::kNotFound, "'nope'");
}

TEST(WeightStore, GetFloatChecksShapeExactly) {
  TempDir dir;
  dir.write("model.safetensors", make_safetensors({{"model.layers.3.mlp.up_proj.weight",
                                                    "F32",
                                                    {4, 2},
                                                    f32_bytes({1, 2, 3, 4, 5, 6, 7, 8})}}));
  auto store = WeightStore::open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  expect_error((*store)->get_float("model.layers.3.mlp.up_proj.weight", Shape({2, 4})).status(),
               StatusCode::kDataLoss,
               "tensor 'model.layers.3.mlp.up_proj.weight' has shape [4, 2] but the config "
               "implies [2, 4]: config.json and the weights");
  // Same element count, different rank, is still a mismatch.
  expect_error((*store)->get_float("model.layers.3.mlp.up_proj.weight", Shape({8})).status(),
               StatusCode::kDataLoss, "implies [8]");
}

TEST(WeightStore, GetFloatRejectsIntegerTensors) {
  TempDir dir;
  dir.write("model.safetensors", make_safetensors({{"ids", "I32", {2}, std::string(8, '\0')}}));
  auto store = WeightStore::open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  expect_error((*store)->get_float("ids", Shape({2})).status(), StatusCode::kInvalidArgument,
               "has dtype i32");
  EXPECT_TRUE((*store)->get("ids").ok());
}

TEST(WeightStore, NoWeightsIsNotFoundNamingBothFiles) {
  TempDir dir;
  auto store = WeightStore::open(dir.path());
  expect_error(store.status(), StatusCode::kNotFound, kIndex);
  expect_error(store.status(), StatusCode::kNotFound, "'model.safetensors'");
  expect_error(store.status(), StatusCode::kNotFound, dir.path());
}

TEST(WeightStore, OpensShardsThroughTheIndex) {
  TempDir dir;
  write_sharded(dir);
  dir.write(kIndex, index_json({{"a", "model-1.safetensors"},
                                {"b", "model-1.safetensors"},
                                {"c", "model-2.safetensors"}}));
  auto store = WeightStore::open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_EQ((*store)->names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ((*store)->total_bytes(), 16u + 4u + 12u);
  auto c = (*store)->get_float("c", Shape({3}));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->as<const float>()[2], 7.0f);
  // The index wins over a stray single file in the same directory.
  dir.write("model.safetensors", make_safetensors({{"stray", "U8", {1}, "x"}}));
  auto again = WeightStore::open(dir.path());
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_FALSE((*again)->contains("stray"));
}

TEST(WeightStore, RejectsPathTraversalInTheIndex) {
  TempDir dir;
  write_sharded(dir);
  for (const char* bad : {"../model-1.safetensors", "/etc/passwd", "sub/model-1.safetensors", "..",
                          "", "..\\evil.safetensors"}) {
    dir.write(kIndex, index_json({{"a", bad}}));
    auto store = WeightStore::open(dir.path());
    expect_error(store.status(), StatusCode::kInvalidArgument, "not a plain file name");
    expect_error(store.status(), StatusCode::kInvalidArgument, "tensor 'a'");
  }
}

TEST(WeightStore, MissingShardIsNotFound) {
  TempDir dir;
  write_sharded(dir);
  dir.write(kIndex, index_json({{"a", "model-1.safetensors"},
                                {"c", "model-2.safetensors"},
                                {"d", "model-3.safetensors"}}));
  auto store = WeightStore::open(dir.path());
  expect_error(store.status(), StatusCode::kNotFound, "shard 'model-3.safetensors'");
  expect_error(store.status(), StatusCode::kNotFound, "does not exist");
}

TEST(WeightStore, RejectsIndexEntryAbsentFromItsShard) {
  TempDir dir;
  write_sharded(dir);
  // "c" lives in shard 2 but the index says shard 1.
  dir.write(kIndex, index_json({{"a", "model-1.safetensors"}, {"c", "model-1.safetensors"}}));
  auto store = WeightStore::open(dir.path());
  expect_error(store.status(), StatusCode::kDataLoss,
               "says tensor 'c' is in 'model-1.safetensors' but that shard has no such tensor");
  // A name that no shard has.
  dir.write(kIndex, index_json({{"a", "model-1.safetensors"}, {"ghost", "model-2.safetensors"}}));
  expect_error(WeightStore::open(dir.path()).status(), StatusCode::kDataLoss, "tensor 'ghost'");
}

TEST(WeightStore, RejectsTensorInTwoFiles) {
  TempDir dir;
  dir.write("model-1.safetensors", make_safetensors({{"a", "F32", {1}, f32_bytes({1})}}));
  dir.write("model-2.safetensors", make_safetensors({{"a", "F32", {1}, f32_bytes({2})},
                                                     {"b", "F32", {1}, f32_bytes({3})}}));
  dir.write(kIndex, index_json({{"a", "model-1.safetensors"}, {"b", "model-2.safetensors"}}));
  expect_error(WeightStore::open(dir.path()).status(), StatusCode::kDataLoss,
               "tensor 'a' appears in both");
}

TEST(WeightStore, RejectsMalformedIndex) {
  TempDir dir;
  write_sharded(dir);
  dir.write(kIndex, "{\"weight_map\": {");
  expect_error(WeightStore::open(dir.path()).status(), StatusCode::kDataLoss, "not valid JSON");
  dir.write(kIndex, "{\"metadata\": {}}");
  expect_error(WeightStore::open(dir.path()).status(), StatusCode::kDataLoss, "'weight_map'");
  dir.write(kIndex, "{\"weight_map\": {\"a\": 3}}");
  expect_error(WeightStore::open(dir.path()).status(), StatusCode::kDataLoss,
               "not to a shard file name");
  dir.write(kIndex, "{\"weight_map\": {}}");
  expect_error(WeightStore::open(dir.path()).status(), StatusCode::kDataLoss, "empty");
}

TEST(WeightStore, CorruptShardErrorNamesTheShard) {
  TempDir dir;
  write_sharded(dir);
  dir.write("model-2.safetensors", "short");
  dir.write(kIndex, index_json({{"a", "model-1.safetensors"}, {"c", "model-2.safetensors"}}));
  auto store = WeightStore::open(dir.path());
  expect_error(store.status(), StatusCode::kDataLoss, "model-2.safetensors");
}

// Every weight a model of this config has, with the shape transformers gives it.
std::map<std::string, Shape> expected_weights(const ModelConfig& c) {
  const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  std::map<std::string, Shape> w = {{"model.embed_tokens.weight", {c.vocab_size, h}},
                                    {"model.norm.weight", {h}}};
  if (!c.tie_word_embeddings) w["lm_head.weight"] = {c.vocab_size, h};
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    w[p + "input_layernorm.weight"] = {h};
    w[p + "post_attention_layernorm.weight"] = {h};
    w[p + "self_attn.q_proj.weight"] = {q, h};
    w[p + "self_attn.k_proj.weight"] = {kv, h};
    w[p + "self_attn.v_proj.weight"] = {kv, h};
    w[p + "self_attn.o_proj.weight"] = {h, q};
    w[p + "mlp.gate_proj.weight"] = {c.intermediate_size, h};
    w[p + "mlp.up_proj.weight"] = {c.intermediate_size, h};
    w[p + "mlp.down_proj.weight"] = {h, c.intermediate_size};
    if (c.qkv_bias) {
      w[p + "self_attn.q_proj.bias"] = {q};
      w[p + "self_attn.k_proj.bias"] = {kv};
      w[p + "self_attn.v_proj.bias"] = {kv};
    }
    if (c.o_bias) w[p + "self_attn.o_proj.bias"] = {h};
    if (c.qk_norm) {
      w[p + "self_attn.q_norm.weight"] = {c.head_dim};
      w[p + "self_attn.k_norm.weight"] = {c.head_dim};
    }
  }
  return w;
}

struct FixtureCase {
  const char* name;
  DType weight_dtype;
};

// Names the case in test output instead of gtest's byte dump of the struct.
void PrintTo(const FixtureCase& c, std::ostream* os) { *os << c.name; }

class FixtureWeights : public ::testing::TestWithParam<FixtureCase> {};

TEST_P(FixtureWeights, EveryWeightOpensWithTheShapeTheConfigImplies) {
  const std::string dir =
      std::string(ROOFLINE_SOURCE_DIR) + "/tests/fixtures/models/" + GetParam().name;
  auto config = load_model_config(dir);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  auto store = WeightStore::open(dir);
  ASSERT_TRUE(store.ok()) << store.status().to_string();

  const std::map<std::string, Shape> expected = expected_weights(*config);
  std::vector<std::string> expected_names;
  uint64_t expected_bytes = 0;
  for (const auto& [name, shape] : expected) {
    expected_names.push_back(name);
    auto t = (*store)->get_float(name, shape);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    EXPECT_EQ(t->dtype, GetParam().weight_dtype) << name;
    EXPECT_NE(t->data, nullptr);
    expected_bytes += static_cast<uint64_t>(t->size_bytes());
  }
  EXPECT_EQ((*store)->names(), expected_names);
  EXPECT_EQ((*store)->total_bytes(), expected_bytes);
}

// An owning store (how GGUF weights arrive) hands out aligned writable tensors and refuses
// duplicates and empty shapes; virtual tensors (dummy weights) have a shape but no bytes.
TEST(OwningWeightStore, OwnsAndRegistersTensors) {
  std::unique_ptr<WeightStore> store = WeightStore::create_owning("model.gguf");
  auto t = store->add_owned("w", DType::kF32, {3, 5});
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ASSERT_NE(t->data, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % 64, 0u);
  for (int i = 0; i < 15; ++i) t->as<float>()[i] = static_cast<float>(i);
  auto back = store->get_float("w", {3, 5});
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->as<float>()[14], 14.0f);
  EXPECT_FALSE(store->add_owned("w", DType::kF32, {1}).ok());
  EXPECT_FALSE(store->add_owned("empty", DType::kF32, {0, 4}).ok());
  EXPECT_FALSE(store->add_owned("huge", DType::kF32, {int64_t{1} << 62, 4}).ok());
  ASSERT_TRUE(store->add_virtual("v", DType::kBF16, {4, 8}).ok());
  EXPECT_EQ(store->get("v")->data, nullptr);
  EXPECT_FALSE(store->add_virtual("v", DType::kBF16, {4, 8}).ok());
  EXPECT_EQ(store->total_bytes(), 60u + 64u);
  EXPECT_EQ(store->names(), (std::vector<std::string>{"v", "w"}));
  auto missing = store->get("nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("model.gguf"), std::string::npos);
  auto shape = store->get_float("w", {5, 3});
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("metadata"), std::string::npos)
      << shape.status().to_string();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureWeights,
                         ::testing::Values(FixtureCase{"llama_mha", DType::kF32},
                                           FixtureCase{"llama_gqa4_tied_bf16", DType::kBF16},
                                           FixtureCase{"llama3_rope_scaled_sharded", DType::kF32},
                                           FixtureCase{"llama_attn_bias", DType::kF32},
                                           FixtureCase{"mistral_gqa4_f16", DType::kF16},
                                           FixtureCase{"qwen2_bias_gqa7_tied", DType::kF32},
                                           FixtureCase{"qwen3_qknorm_hd32_sharded", DType::kBF16}),
                         [](const ::testing::TestParamInfo<FixtureCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace roofline
