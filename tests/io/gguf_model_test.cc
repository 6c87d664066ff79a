// GGUF -> ModelConfig and weights: the converted fixtures (tests/fixtures/make_gguf_fixtures.py)
// must give the same config as the Hugging Face config.json and bit-identical f32 weights under
// the same names (so llama's q/k un-permutation is exact); a tiny synthetic model checks biases,
// qk-norm, tied embeddings and every way a file can be unusable.
#include "io/gguf_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "gguf_test_util.h"

namespace roofline {
namespace {

using testing::GgufBuilder;
using testing::tiny_model;
using testing::TinyModelOptions;

const std::string kRoot = std::string(ROOFLINE_SOURCE_DIR) + "/tests/fixtures/";

struct Fixture {
  const char* hf_dir;
  const char* gguf;
};

class ConvertedFixture : public ::testing::TestWithParam<Fixture> {};

TEST_P(ConvertedFixture, ConfigMatchesConfigJson) {
  auto hf = load_model_config(kRoot + "models/" + GetParam().hf_dir);
  ASSERT_TRUE(hf.ok()) << hf.status().to_string();
  auto file = GgufFile::open(kRoot + "gguf/" + GetParam().gguf);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto c = model_config_from_gguf(**file);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->architecture, hf->architecture);
  EXPECT_EQ(c->architecture_name, hf->architecture_name);
  EXPECT_EQ(c->vocab_size, hf->vocab_size);
  EXPECT_EQ(c->hidden_size, hf->hidden_size);
  EXPECT_EQ(c->intermediate_size, hf->intermediate_size);
  EXPECT_EQ(c->num_layers, hf->num_layers);
  EXPECT_EQ(c->num_heads, hf->num_heads);
  EXPECT_EQ(c->num_kv_heads, hf->num_kv_heads);
  EXPECT_EQ(c->head_dim, hf->head_dim);
  EXPECT_EQ(c->max_position_embeddings, hf->max_position_embeddings);
  EXPECT_EQ(c->rms_norm_eps, hf->rms_norm_eps);
  // GGUF stores rope.freq_base as f32; the reference computes with it rounded the same way.
  EXPECT_EQ(static_cast<float>(c->rope_theta), static_cast<float>(hf->rope_theta));
  EXPECT_EQ(c->rope_scaling.type, hf->rope_scaling.type);
  EXPECT_EQ(c->tie_word_embeddings, hf->tie_word_embeddings);
  EXPECT_EQ(c->qkv_bias, hf->qkv_bias);
  EXPECT_EQ(c->o_bias, hf->o_bias);
  EXPECT_EQ(c->qk_norm, hf->qk_norm);
  EXPECT_EQ(c->sliding_window, hf->sliding_window);
  EXPECT_EQ(c->bos_token_id, hf->bos_token_id);
  EXPECT_EQ(c->eos_token_ids, hf->eos_token_ids);
}

TEST_P(ConvertedFixture, WeightsEqualTheHuggingFaceTensorsBitForBit) {
  auto hf = WeightStore::open(kRoot + "models/" + GetParam().hf_dir);
  ASSERT_TRUE(hf.ok()) << hf.status().to_string();
  auto file = GgufFile::open(kRoot + "gguf/" + GetParam().gguf);
  ASSERT_TRUE(file.ok());
  auto c = model_config_from_gguf(**file);
  ASSERT_TRUE(c.ok());
  auto store = load_gguf_weights(**file, *c);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_EQ((*store)->names(), (*hf)->names());
  for (const std::string& name : (*hf)->names()) {
    TensorView want = *(*hf)->get(name);
    auto got = (*store)->get_float(name, want.shape);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_EQ(got->dtype, DType::kF32);
    for (int64_t i = 0; i < want.numel(); ++i) {
      const float w = load_as_f32(want.data, want.dtype, i);
      ASSERT_EQ(got->as<float>()[i], w) << name << " element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, ConvertedFixture,
    ::testing::Values(Fixture{"llama_mha", "llama_mha.f32.gguf"},
                      Fixture{"qwen2_bias_gqa7_tied", "qwen2_bias_gqa7_tied.f32.gguf"},
                      Fixture{"qwen3_qknorm_hd32_sharded", "qwen3_qknorm_hd32_sharded.bf16.gguf"}),
    [](const auto& info) { return std::string(info.param.hf_dir); });

// Q8_0 keeps each weight within half a quantisation step d = max|w| / 127 of its 32-block, plus
// the rounding of d to f16 (relative 2^-11, times |q| <= 127); norms stay f32 and exact.
TEST(GgufModel, Q8_0WeightsAreWithinHalfAStep) {
  auto hf = WeightStore::open(kRoot + "models/llama_mha");
  auto file = GgufFile::open(kRoot + "gguf/llama_mha.q8_0.gguf");
  ASSERT_TRUE(hf.ok() && file.ok());
  auto c = model_config_from_gguf(**file);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto store = load_gguf_weights(**file, *c);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  for (const std::string& name : (*hf)->names()) {
    TensorView want = *(*hf)->get(name);
    TensorView got = *(*store)->get(name);
    const bool quantised = want.shape.rank == 2;
    for (int64_t b = 0; b < want.numel(); b += 32) {
      float amax = 0;
      for (int64_t i = b; i < b + 32 && i < want.numel(); ++i)
        amax = std::max(amax, std::fabs(want.as<float>()[i]));
      for (int64_t i = b; i < b + 32 && i < want.numel(); ++i) {
        const float diff = std::fabs(got.as<float>()[i] - want.as<float>()[i]);
        if (quantised)
          ASSERT_LE(diff, amax / 127 * (0.5f + 127.0f / 2048) * 1.001f) << name << " element " << i;
        else
          ASSERT_EQ(diff, 0.0f) << name << " element " << i;
      }
    }
  }
}

TEST(GgufModel, NameMapping) {
  EXPECT_EQ(*hf_tensor_name("token_embd.weight"), "model.embed_tokens.weight");
  EXPECT_EQ(*hf_tensor_name("output_norm.weight"), "model.norm.weight");
  EXPECT_EQ(*hf_tensor_name("output.weight"), "lm_head.weight");
  EXPECT_EQ(*hf_tensor_name("blk.12.attn_q.bias"), "model.layers.12.self_attn.q_proj.bias");
  EXPECT_EQ(*hf_tensor_name("blk.0.ffn_norm.weight"),
            "model.layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(*hf_tensor_name("blk.3.attn_k_norm.weight"), "model.layers.3.self_attn.k_norm.weight");
  for (const char* bad :
       {"blk.x.attn_q.weight", "blk..attn_q.weight", "blk.01.attn_q.weight", "blk.0.attn_qq.weight",
        "blk.0.attn_q.scale", "blk.0", "rope_freqs.weight", "blk.1234567.attn_q.weight"})
    EXPECT_FALSE(hf_tensor_name(bad).has_value()) << bad;
}

// The inverse of llama.cpp's permute(w, n_head): reshape(n_head, 2, hd/2).swapaxes(1, 2).
TEST(GgufModel, QkRowPermutationInvertsTheConverter) {
  const int64_t hd = 6, heads = 3;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t s = 0; s < 2; ++s)
      for (int64_t j = 0; j < hd / 2; ++j) {
        const int64_t hf_row = h * hd + s * (hd / 2) + j;  // HF layout [heads, 2, hd/2]
        const int64_t gguf_row = h * hd + j * 2 + s;       // after swapaxes: [heads, hd/2, 2]
        EXPECT_EQ(llama_qk_hf_row(gguf_row, hd), hf_row);
      }
}

StatusOr<std::unique_ptr<WeightStore>> load_tiny(const GgufBuilder& b,
                                                 ModelConfig* config = nullptr,
                                                 std::vector<uint8_t>* keep = nullptr) {
  static std::vector<uint8_t> bytes;  // outlives the parse within one call
  bytes = b.build();
  if (keep) *keep = bytes;
  ROOFLINE_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> f,
                            GgufFile::parse(bytes.data(), bytes.size(), "tiny.gguf"));
  ROOFLINE_ASSIGN_OR_RETURN(ModelConfig c, model_config_from_gguf(*f));
  if (config) *config = c;
  return load_gguf_weights(*f, c);
}

TEST(GgufModel, LlamaBiasesAreUnpermutedLikeWeights) {
  TinyModelOptions o;
  o.biases = true;
  o.kv_heads = 1;
  GgufBuilder b = tiny_model(o);
  ModelConfig c;
  auto store = load_tiny(b, &c);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.o_bias);
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_FALSE(c.tie_word_embeddings);
  for (const char* proj : {"q_proj", "k_proj"}) {
    const std::string base = std::string("model.layers.0.self_attn.") + proj;
    const auto* gw = b.find(std::string("blk.0.attn_") + proj[0] + ".weight");
    const auto* gb = b.find(std::string("blk.0.attn_") + proj[0] + ".bias");
    TensorView w = *(*store)->get(base + ".weight");
    TensorView bias = *(*store)->get(base + ".bias");
    const int64_t rows = w.shape[0], cols = w.shape[1];
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t hf = llama_qk_hf_row(r, 4);
      float gguf_bias;
      std::memcpy(&gguf_bias, gb->data.data() + 4 * r, 4);
      EXPECT_EQ(bias.as<float>()[hf], gguf_bias) << proj << " bias row " << r;
      for (int64_t k = 0; k < cols; ++k) {
        float v;
        std::memcpy(&v, gw->data.data() + 4 * (r * cols + k), 4);
        EXPECT_EQ(w.as<float>()[hf * cols + k], v) << proj << " row " << r;
      }
    }
  }
  // v and o are not permuted.
  TensorView v = *(*store)->get("model.layers.0.self_attn.v_proj.bias");
  float v1;
  std::memcpy(&v1, b.find("blk.0.attn_v.bias")->data.data() + 4, 4);
  EXPECT_EQ(v.as<float>()[1], v1);
}

TEST(GgufModel, QwenIsNotPermutedAndReadsItsFeatures) {
  TinyModelOptions o;
  o.arch = "qwen3";
  o.qk_norm = true;
  o.tied = true;
  GgufBuilder b = tiny_model(o);
  ModelConfig c;
  auto store = load_tiny(b, &c);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_EQ(c.architecture, Architecture::kQwen3);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE((*store)->contains("lm_head.weight"));
  TensorView q = *(*store)->get("model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(0, std::memcmp(q.data, b.find("blk.0.attn_q.weight")->data.data(), q.size_bytes()));

  o.arch = "qwen2";
  o.qk_norm = false;
  o.biases = true;
  auto q2 = load_tiny(tiny_model(o), &c);
  ASSERT_TRUE(q2.ok()) << q2.status().to_string();
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
  o.biases = false;  // Qwen2 always has q/k/v biases
  EXPECT_ERROR(load_tiny(tiny_model(o)), kNotFound, "_proj.bias");
}

TEST(GgufModel, DefaultsAndLinearRope) {
  GgufBuilder b = tiny_model({});
  b.remove_kv("llama.attention.head_count_kv");
  b.remove_kv("llama.rope.freq_base");
  b.kv_str("llama.rope.scaling.type", "linear");
  b.kv_f32("llama.rope.scaling.factor", 4.0f);
  ModelConfig c;
  ASSERT_TRUE(load_tiny(b, &c).ok());
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 4);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_EQ(c.rope_scaling.factor, 4.0f);
}

TEST(GgufModel, UnsupportedModelsAreNamed) {
  GgufBuilder b = tiny_model({});
  b.set_kv_str("general.architecture", "phi3");
  EXPECT_ERROR(load_tiny(b), kUnimplemented, "'phi3'");
  b = tiny_model({});
  b.remove_kv("general.architecture");
  EXPECT_ERROR(load_tiny(b), kInvalidArgument, "general.architecture");
  b = tiny_model({});
  b.kv_u32("llama.expert_count", 8);
  EXPECT_ERROR(load_tiny(b), kUnimplemented, "mixture-of-experts");
  b = tiny_model({});
  b.tensor_f32("rope_freqs.weight", {2}, {1, 1});
  EXPECT_ERROR(load_tiny(b), kUnimplemented, "rope_freqs");
  b = tiny_model({});
  b.kv_str("llama.rope.scaling.type", "yarn");
  EXPECT_ERROR(load_tiny(b), kUnimplemented, "'yarn'");
  b = tiny_model({});
  b.kv_u32("llama.rope.dimension_count", 2);
  EXPECT_ERROR(load_tiny(b), kUnimplemented, "partial rotary");
  b = tiny_model({});
  b.tensor_f32("blk.0.extra.weight", {8}, std::vector<float>(8));
  EXPECT_ERROR(load_tiny(b), kUnimplemented, "'blk.0.extra.weight'");
  b = tiny_model({});
  b.tensor_f32("blk.1.attn_norm.weight", {8}, std::vector<float>(8));  // layer beyond block_count
  EXPECT_ERROR(load_tiny(b), kUnimplemented, "'blk.1.attn_norm.weight'");
}

TEST(GgufModel, BadMetadata) {
  GgufBuilder b = tiny_model({});
  b.remove_kv("llama.block_count");
  EXPECT_ERROR(load_tiny(b), kInvalidArgument, "llama.block_count");
  b = tiny_model({});
  b.set_kv_u32("llama.attention.head_count_kv", 3);
  EXPECT_ERROR(load_tiny(b), kInvalidArgument, "does not divide");
  b = tiny_model({});
  b.set_kv_u32("llama.block_count", 5000);
  EXPECT_ERROR(load_tiny(b), kInvalidArgument, "'llama.block_count' is 5000");
  b = tiny_model({});
  b.remove_kv("llama.embedding_length");
  b.kv_str("llama.embedding_length", "8");
  EXPECT_ERROR(load_tiny(b), kInvalidArgument, "llama.embedding_length");
  b = tiny_model({});
  b.set_kv_u32("tokenizer.ggml.eos_token_id", 16);
  EXPECT_ERROR(load_tiny(b), kInvalidArgument, "outside the vocabulary");
  b = tiny_model({});
  b.kv_u32("llama.vocab_size", 17);
  EXPECT_ERROR(load_tiny(b), kInvalidArgument, "contradicts itself");
  b = tiny_model({});
  b.remove_kv("llama.attention.layer_norm_rms_epsilon");
  b.kv_f32("llama.attention.layer_norm_rms_epsilon", -1.0f);
  EXPECT_ERROR(load_tiny(b), kInvalidArgument, "layer_norm_rms_epsilon");
  b = tiny_model({});
  b.kv_u32("llama.attention.value_length", 8);
  EXPECT_ERROR(load_tiny(b), kUnimplemented, "value_length");
}

TEST(GgufModel, BadTensors) {
  GgufBuilder b = tiny_model({});
  b.remove_tensor("blk.0.ffn_up.weight");
  EXPECT_ERROR(load_tiny(b), kNotFound, "model.layers.0.mlp.up_proj.weight");
  b = tiny_model({});
  b.find("blk.0.ffn_up.weight")->dims = {12, 8};  // transposed
  EXPECT_ERROR(load_tiny(b), kDataLoss, "'blk.0.ffn_up.weight' has shape [8, 12]");
  b = tiny_model({});
  b.find("token_embd.weight")->type = 99;  // unknown: parses, cannot load
  EXPECT_ERROR(load_tiny(b), kUnimplemented, "type 99");
  b = tiny_model({});
  auto* t = b.find("output_norm.weight");
  t->type = 6;  // Q5_0: known layout, no dequantiser; 8 elements is not a 32-block
  EXPECT_FALSE(load_tiny(b).ok());
}

TEST(GgufModel, LoadsDequantisedTypes) {
  // An F16 embedding and a Q8_0-free mix: every value representable, so the load is exact.
  GgufBuilder b = tiny_model({});
  auto* emb = b.find("token_embd.weight");
  std::vector<uint8_t> f16(emb->data.size() / 2);
  for (size_t i = 0; i < f16.size() / 2; ++i) {
    float v;
    std::memcpy(&v, emb->data.data() + 4 * i, 4);
    const uint16_t h = f32_to_f16_bits(v);
    std::memcpy(f16.data() + 2 * i, &h, 2);
  }
  emb->type = 1;
  emb->data = f16;
  auto store = load_tiny(b);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  TensorView e = *(*store)->get("model.embed_tokens.weight");
  uint16_t h5;
  std::memcpy(&h5, f16.data() + 10, 2);
  EXPECT_EQ(e.as<float>()[5], f16_bits_to_f32(h5));
}

}  // namespace
}  // namespace roofline
