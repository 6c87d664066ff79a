// Tests for parse_model_config / load_model_config: the Hugging Face fixture configs parse to the
// values transformers uses, both config styles (4.x rope_theta + rope_scaling, 5.x
// rope_parameters) are read, and every wrong type, out-of-range value and unsupported feature is
// an error naming the field and the file.
#include "io/model_config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "safetensors_test_util.h"

namespace roofline {
namespace {

using nlohmann::json;

constexpr const char* kSource = "test/config.json";

std::string fixture_dir(const std::string& name) {
  return std::string(ROOFLINE_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

ModelConfig load_fixture(const std::string& name) {
  auto c = load_model_config(fixture_dir(name));
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? *c : ModelConfig();
}

// A minimal valid transformers 4.x Llama config.
json base_config() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"],
    "vocab_size": 1000, "hidden_size": 128, "intermediate_size": 256,
    "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-5, "hidden_act": "silu", "rope_theta": 500000.0,
    "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16"
  })");
}

StatusOr<ModelConfig> parse(const json& j) { return parse_model_config(j.dump(), kSource); }

// Parses `base` with `key` set to the JSON value `value` (given as JSON text).
StatusOr<ModelConfig> parse_with(const char* key, const std::string& value,
                                 json base = base_config()) {
  base[key] = json::parse(value);
  return parse(base);
}

#define EXPECT_ERROR(result_, code_, phrase_)                                             \
  do {                                                                                    \
    auto status_ = (result_).status();                                                    \
    EXPECT_EQ(status_.code(), (code_)) << status_.to_string();                            \
    EXPECT_NE(status_.message().find(phrase_), std::string::npos) << status_.to_string(); \
    EXPECT_NE(status_.message().find(kSource), std::string::npos) << status_.to_string(); \
  } while (0)

TEST(ModelConfigFixtures, LlamaMha) {
  ModelConfig c = load_fixture("llama_mha");
  EXPECT_EQ(c.architecture, Architecture::kLlama);
  EXPECT_EQ(c.architecture_name, "LlamaForCausalLM");
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 160);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.max_position_embeddings, 256);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kDefault);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.dtype, DType::kF32);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>({2}));
}

TEST(ModelConfigFixtures, LlamaGqaTiedBf16) {
  ModelConfig c = load_fixture("llama_gqa4_tied_bf16");
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.dtype, DType::kBF16);
}

TEST(ModelConfigFixtures, Llama3RopeScaled) {
  ModelConfig c = load_fixture("llama3_rope_scaled_sharded");
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 8.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(c.rope_scaling.original_max_position, 64);
  EXPECT_EQ(c.num_kv_heads, 2);
}

TEST(ModelConfigFixtures, LlamaAttentionBias) {
  ModelConfig c = load_fixture("llama_attn_bias");
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.o_bias);
  EXPECT_FALSE(c.qk_norm);
}

TEST(ModelConfigFixtures, MistralF16) {
  ModelConfig c = load_fixture("mistral_gqa4_f16");
  EXPECT_EQ(c.architecture, Architecture::kMistral);
  EXPECT_EQ(c.dtype, DType::kF16);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
}

TEST(ModelConfigFixtures, Qwen2BiasTied) {
  ModelConfig c = load_fixture("qwen2_bias_gqa7_tied");
  EXPECT_EQ(c.architecture, Architecture::kQwen2);
  EXPECT_EQ(c.hidden_size, 56);
  EXPECT_EQ(c.num_heads, 7);
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_EQ(c.head_dim, 8);  // no head_dim in the file: 56 / 7
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.sliding_window, 0);
}

TEST(ModelConfigFixtures, Qwen3QkNorm) {
  ModelConfig c = load_fixture("qwen3_qknorm_hd32_sharded");
  EXPECT_EQ(c.architecture, Architecture::kQwen3);
  EXPECT_EQ(c.head_dim, 32);  // explicit, not 64 / 4
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
  EXPECT_EQ(c.dtype, DType::kBF16);
  EXPECT_FALSE(c.tie_word_embeddings);
}

TEST(ModelConfig, LegacyStyleLlama3RopeScaling) {
  json j = base_config();
  j["rope_scaling"] = json::parse(R"({"type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0,
                                      "original_max_position_embeddings": 8192})");
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_DOUBLE_EQ(c->rope_theta, 500000.0);
  EXPECT_EQ(c->rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 32.0f);
  EXPECT_EQ(c->rope_scaling.original_max_position, 8192);
  EXPECT_EQ(c->dtype, DType::kBF16);  // from torch_dtype
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->max_position_embeddings, 4096);  // default
}

TEST(ModelConfig, LegacyStyleDefaultsAndLinear) {
  json j = base_config();
  j.erase("rope_theta");
  j["rope_scaling"] = nullptr;
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_EQ(c->rope_scaling.type, RopeScaling::Type::kDefault);

  auto linear = parse_with("rope_scaling", R"({"rope_type": "linear", "factor": 2})");
  ASSERT_TRUE(linear.ok()) << linear.status().to_string();
  EXPECT_EQ(linear->rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_FLOAT_EQ(linear->rope_scaling.factor, 2.0f);
}

TEST(ModelConfig, DefaultsForOptionalFields) {
  json j = base_config();
  for (const char* k : {"num_key_value_heads", "rms_norm_eps", "hidden_act", "bos_token_id",
                        "eos_token_id", "torch_dtype"})
    j.erase(k);
  j["head_dim"] = nullptr;
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-6f);
  EXPECT_EQ(c->bos_token_id, -1);
  EXPECT_TRUE(c->eos_token_ids.empty());
  EXPECT_EQ(c->dtype, DType::kBF16);
  EXPECT_FALSE(c->tie_word_embeddings);
}

TEST(ModelConfig, TokenIds) {
  auto list = parse_with("eos_token_id", "[128001, 128008, 128009]", [] {
    json j = base_config();
    j["vocab_size"] = 128256;
    return j;
  }());
  ASSERT_TRUE(list.ok()) << list.status().to_string();
  EXPECT_EQ(list->eos_token_ids, (std::vector<int32_t>{128001, 128008, 128009}));
  auto null_bos = parse_with("bos_token_id", "null");
  ASSERT_TRUE(null_bos.ok());
  EXPECT_EQ(null_bos->bos_token_id, -1);
  EXPECT_ERROR(parse_with("eos_token_id", "\"2\""), StatusCode::kInvalidArgument,
               "'eos_token_id' must be an integer");
  EXPECT_ERROR(parse_with("eos_token_id", "[2, \"x\"]"), StatusCode::kInvalidArgument,
               "'eos_token_id' must be an integer");
  EXPECT_ERROR(parse_with("bos_token_id", "5000"), StatusCode::kInvalidArgument,
               "'bos_token_id' is 5000");
}

TEST(ModelConfig, UnsupportedArchitectureNamesItAndTheSupportedList) {
  auto c = parse_with("architectures", R"(["GPT2LMHeadModel"])");
  EXPECT_ERROR(c, StatusCode::kUnimplemented, "'GPT2LMHeadModel'");
  EXPECT_ERROR(c, StatusCode::kUnimplemented,
               "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM");
  EXPECT_ERROR(parse_with("architectures", "[]"), StatusCode::kInvalidArgument, "'architectures'");
  EXPECT_ERROR(parse_with("architectures", "\"LlamaForCausalLM\""), StatusCode::kInvalidArgument,
               "'architectures'");
}

TEST(ModelConfig, MissingRequiredFieldIsNamed) {
  for (const char* k : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                        "num_attention_heads"}) {
    json j = base_config();
    j.erase(k);
    EXPECT_ERROR(parse(j), StatusCode::kInvalidArgument, "'" + std::string(k) + "' is missing");
  }
}

TEST(ModelConfig, WrongJsonTypesAreInvalidArgument) {
  EXPECT_ERROR(parse_with("hidden_size", "\"128\""), StatusCode::kInvalidArgument,
               "'hidden_size' must be an integer but is a string");
  EXPECT_ERROR(parse_with("hidden_size", "64.5"), StatusCode::kInvalidArgument,
               "'hidden_size' must be an integer but is a non-integer number");
  EXPECT_ERROR(parse_with("num_hidden_layers", "true"), StatusCode::kInvalidArgument,
               "'num_hidden_layers' must be an integer");
  EXPECT_ERROR(parse_with("rms_norm_eps", "\"1e-5\""), StatusCode::kInvalidArgument,
               "'rms_norm_eps' must be a number");
  EXPECT_ERROR(parse_with("tie_word_embeddings", "1"), StatusCode::kInvalidArgument,
               "'tie_word_embeddings' must be true or false");
  EXPECT_ERROR(parse_with("rope_scaling", "\"llama3\""), StatusCode::kInvalidArgument,
               "'rope_scaling' must be null or an object");
  EXPECT_ERROR(parse_with("rope_parameters", "[1]"), StatusCode::kInvalidArgument,
               "'rope_parameters' must be an object");
  EXPECT_ERROR(parse_with("torch_dtype", "16"), StatusCode::kInvalidArgument,
               "'torch_dtype' must be a string");
  EXPECT_ERROR(parse_with("hidden_act", "[]"), StatusCode::kInvalidArgument,
               "'hidden_act' must be a string");
}

TEST(ModelConfig, IntegersAreRangeChecked) {
  EXPECT_ERROR(parse_with("hidden_size", "-128"), StatusCode::kInvalidArgument,
               "'hidden_size' is -128");
  EXPECT_ERROR(parse_with("hidden_size", "0"), StatusCode::kInvalidArgument, "'hidden_size' is 0");
  EXPECT_ERROR(parse_with("hidden_size", "131072"), StatusCode::kInvalidArgument,
               "between 1 and 65536");
  EXPECT_ERROR(parse_with("vocab_size", "18446744073709551615"), StatusCode::kInvalidArgument,
               "'vocab_size' is 18446744073709551615");
  EXPECT_ERROR(parse_with("vocab_size", "16777217"), StatusCode::kInvalidArgument, "'vocab_size'");
  EXPECT_ERROR(parse_with("num_hidden_layers", "1025"), StatusCode::kInvalidArgument,
               "'num_hidden_layers'");
  EXPECT_ERROR(parse_with("intermediate_size", "2000000"), StatusCode::kInvalidArgument,
               "'intermediate_size'");
  EXPECT_ERROR(parse_with("num_attention_heads", "2048"), StatusCode::kInvalidArgument,
               "'num_attention_heads'");
  EXPECT_ERROR(parse_with("head_dim", "2048"), StatusCode::kInvalidArgument, "'head_dim'");
  EXPECT_ERROR(parse_with("max_position_embeddings", "0"), StatusCode::kInvalidArgument,
               "'max_position_embeddings'");
}

TEST(ModelConfig, HeadsMustDivide) {
  EXPECT_ERROR(parse_with("num_key_value_heads", "3"), StatusCode::kInvalidArgument,
               "does not divide num_attention_heads (8)");
  json j = base_config();
  j["num_attention_heads"] = 6;
  j["num_key_value_heads"] = 6;
  EXPECT_ERROR(parse(j), StatusCode::kInvalidArgument, "not a multiple of num_attention_heads");
}

TEST(ModelConfig, HeadDimFromConfigAndMustBeEven) {
  auto explicit_hd = parse_with("head_dim", "64");
  ASSERT_TRUE(explicit_hd.ok()) << explicit_hd.status().to_string();
  EXPECT_EQ(explicit_hd->head_dim, 64);
  EXPECT_ERROR(parse_with("head_dim", "15"), StatusCode::kInvalidArgument, "need it even");
  json j = base_config();
  j["hidden_size"] = 120;
  j["num_attention_heads"] = 8;  // 120 / 8 = 15: odd
  EXPECT_ERROR(parse(j), StatusCode::kInvalidArgument, "'head_dim' is 15");
}

TEST(ModelConfig, RmsNormEpsMustBeInZeroOne) {
  EXPECT_ERROR(parse_with("rms_norm_eps", "0"), StatusCode::kInvalidArgument, "'rms_norm_eps'");
  EXPECT_ERROR(parse_with("rms_norm_eps", "1.0"), StatusCode::kInvalidArgument, "'rms_norm_eps'");
  EXPECT_ERROR(parse_with("rms_norm_eps", "-1e-5"), StatusCode::kInvalidArgument, "'rms_norm_eps'");
  EXPECT_ERROR(parse_with("rms_norm_eps", "1e-60"), StatusCode::kInvalidArgument, "too small");
}

TEST(ModelConfig, UnsupportedFeaturesAreUnimplemented) {
  EXPECT_ERROR(parse_with("hidden_act", "\"gelu\""), StatusCode::kUnimplemented, "'gelu'");
  EXPECT_ERROR(parse_with("mlp_bias", "true"), StatusCode::kUnimplemented, "'mlp_bias'");
  EXPECT_ERROR(parse_with("torch_dtype", "\"float64\""), StatusCode::kUnimplemented, "'float64'");
}

TEST(ModelConfig, UnsupportedRopeTypesAreUnimplementedAndNamed) {
  EXPECT_ERROR(parse_with("rope_scaling", R"({"type": "yarn", "factor": 4})"),
               StatusCode::kUnimplemented, "'rope_scaling.type' is 'yarn'");
  EXPECT_ERROR(parse_with("rope_scaling", R"({"rope_type": "dynamic", "factor": 2})"),
               StatusCode::kUnimplemented, "'dynamic'");
  EXPECT_ERROR(parse_with("rope_parameters", R"({"rope_type": "longrope", "rope_theta": 1e4})"),
               StatusCode::kUnimplemented, "'rope_parameters.rope_type' is 'longrope'");
  EXPECT_ERROR(parse_with("rope_parameters", R"({"full_attention": {"rope_type": "default"}})"),
               StatusCode::kUnimplemented, "per-layer-type");
}

TEST(ModelConfig, RopeParametersTakePrecedence) {
  json j = base_config();
  j["rope_parameters"] =
      json::parse(R"({"rope_type": "linear", "factor": 4.0, "rope_theta": 1e6})");
  j["rope_scaling"] = json::parse(R"({"type": "yarn"})");  // ignored: v5 field wins
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e6);
  EXPECT_EQ(c->rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 4.0f);
}

TEST(ModelConfig, RopeParametersAreValidated) {
  EXPECT_ERROR(parse_with("rope_scaling", R"({"type": "linear"})"), StatusCode::kInvalidArgument,
               "'rope_scaling.factor' is missing");
  EXPECT_ERROR(parse_with("rope_scaling", R"({"type": "linear", "factor": -2})"),
               StatusCode::kInvalidArgument, "'rope_scaling.factor' is -2");
  EXPECT_ERROR(parse_with("rope_parameters", R"({"rope_type": "llama3", "factor": 8,
                                                 "low_freq_factor": 1, "high_freq_factor": 4})"),
               StatusCode::kInvalidArgument,
               "'rope_parameters.original_max_position_embeddings' is missing");
  EXPECT_ERROR(parse_with("rope_parameters", R"({"rope_type": "llama3", "factor": 8,
                                                 "low_freq_factor": 4, "high_freq_factor": 4,
                                                 "original_max_position_embeddings": 8192})"),
               StatusCode::kInvalidArgument, "greater than low_freq_factor");
  EXPECT_ERROR(parse_with("rope_parameters", R"({"rope_type": "llama3", "factor": 8,
                                                 "low_freq_factor": 0, "high_freq_factor": 4,
                                                 "original_max_position_embeddings": 8192})"),
               StatusCode::kInvalidArgument, "'rope_parameters.low_freq_factor' is 0");
  EXPECT_ERROR(parse_with("rope_theta", "-1"), StatusCode::kInvalidArgument, "'rope_theta'");
  EXPECT_ERROR(parse_with("rope_scaling", R"({"type": 3})"), StatusCode::kInvalidArgument,
               "'rope_scaling.type' must be a string");
}

// RoPE runs in float32: values that are finite as doubles but overflow or vanish there, or a
// llama3 ramp whose factors differ only below float precision, would turn into inf / NaN angles.
// Found by fuzz/model_config_fuzz (low 1e300, high 1e301 was accepted as two infinite factors).
TEST(ModelConfig, RopeValuesMustSurviveFloat32) {
  const char* llama3 = R"({"rope_type": "llama3", "factor": 8, "low_freq_factor": %s,
                           "high_freq_factor": %s, "original_max_position_embeddings": 8192})";
  auto with_factors = [&](const char* low, const char* high) {
    char text[256];
    std::snprintf(text, sizeof(text), llama3, low, high);
    return parse_with("rope_scaling", text);
  };
  EXPECT_ERROR(with_factors("1e300", "1e301"), StatusCode::kInvalidArgument,
               "'rope_scaling.low_freq_factor' is 1e+300; it must be greater than 0 and less than "
               "1000000");
  EXPECT_ERROR(with_factors("1", "1e7"), StatusCode::kInvalidArgument,
               "'rope_scaling.high_freq_factor' is 10000000.0");
  EXPECT_ERROR(with_factors("1e-50", "4"), StatusCode::kInvalidArgument,
               "'rope_scaling.low_freq_factor' is 0.000000; it must be positive in float32");
  EXPECT_ERROR(with_factors("1.0000000001", "1.0000000002"), StatusCode::kInvalidArgument,
               "greater than 'rope_scaling.low_freq_factor' (1.000000) in float32");
  EXPECT_ERROR(parse_with("rope_scaling", R"({"type": "linear", "factor": 1e-300})"),
               StatusCode::kInvalidArgument, "'rope_scaling.factor' is 0.000000");
  EXPECT_ERROR(parse_with("rope_scaling", R"({"type": "linear", "factor": 1e30})"),
               StatusCode::kInvalidArgument, "'rope_scaling.factor' is 1e+30");
  EXPECT_ERROR(parse_with("rope_theta", "1e-40"), StatusCode::kInvalidArgument,
               "'rope_theta' is 1e-40; it must be greater than 1 and less than 1000000000000");
  EXPECT_ERROR(parse_with("rope_theta", "1e300"), StatusCode::kInvalidArgument, "'rope_theta'");
  EXPECT_ERROR(parse_with("rope_theta", "1"), StatusCode::kInvalidArgument, "'rope_theta'");
  // The edges that remain: every released model's values parse.
  for (const char* theta : {"10000", "500000.0", "1e6", "1e8"})
    EXPECT_TRUE(parse_with("rope_theta", theta).ok()) << theta;
  EXPECT_TRUE(with_factors("1", "4").ok());
  EXPECT_TRUE(with_factors("0.5", "999999").ok());
}

TEST(ModelConfig, AttentionBiasFollowsTransformersPerArchitecture) {
  auto llama = parse_with("attention_bias", "true");
  ASSERT_TRUE(llama.ok());
  EXPECT_TRUE(llama->qkv_bias);
  EXPECT_TRUE(llama->o_bias);

  json qwen3 = base_config();
  qwen3["architectures"] = {"Qwen3ForCausalLM"};
  qwen3["attention_bias"] = true;
  auto q3 = parse(qwen3);
  ASSERT_TRUE(q3.ok()) << q3.status().to_string();
  EXPECT_TRUE(q3->qkv_bias);
  EXPECT_TRUE(q3->o_bias);
  EXPECT_TRUE(q3->qk_norm);

  json qwen2 = base_config();
  qwen2["architectures"] = {"Qwen2ForCausalLM"};
  qwen2["attention_bias"] = true;  // Qwen2 ignores it: q/k/v biased, o never
  auto q2 = parse(qwen2);
  ASSERT_TRUE(q2.ok()) << q2.status().to_string();
  EXPECT_TRUE(q2->qkv_bias);
  EXPECT_FALSE(q2->o_bias);
  EXPECT_FALSE(q2->qk_norm);
}

TEST(ModelConfig, SlidingWindow) {
  json mistral = base_config();
  mistral["architectures"] = {"MistralForCausalLM"};
  mistral["sliding_window"] = 4096;
  auto m = parse(mistral);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->sliding_window, 4096);
  mistral["sliding_window"] = "4096";
  EXPECT_ERROR(parse(mistral), StatusCode::kInvalidArgument, "'sliding_window' must be an integer");

  json qwen2 = base_config();
  qwen2["architectures"] = {"Qwen2ForCausalLM"};
  qwen2["sliding_window"] = 4096;
  qwen2["use_sliding_window"] = false;
  auto q = parse(qwen2);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(q->sliding_window, 0);
  qwen2["use_sliding_window"] = true;
  EXPECT_ERROR(parse(qwen2), StatusCode::kUnimplemented, "'use_sliding_window' is true");

  // Llama has no sliding window, whatever the file says.
  auto llama = parse_with("sliding_window", "128");
  ASSERT_TRUE(llama.ok());
  EXPECT_EQ(llama->sliding_window, 0);
}

TEST(ModelConfig, DtypeFieldNames) {
  json j = base_config();
  j.erase("torch_dtype");
  j["dtype"] = "float16";
  auto c = parse(j);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->dtype, DType::kF16);
  auto f32 = parse_with("torch_dtype", "\"float32\"");
  ASSERT_TRUE(f32.ok());
  EXPECT_EQ(f32->dtype, DType::kF32);
}

TEST(ModelConfig, MalformedJsonReportsTheParserPosition) {
  auto c = parse_model_config("{\"architectures\": [\"LlamaForCausalLM\"", kSource);
  EXPECT_ERROR(c, StatusCode::kInvalidArgument, "not valid JSON");
  EXPECT_ERROR(c, StatusCode::kInvalidArgument, "parse error");
  EXPECT_ERROR(parse_model_config("", kSource), StatusCode::kInvalidArgument, "not valid JSON");
  EXPECT_ERROR(parse_model_config("[1, 2]", kSource), StatusCode::kInvalidArgument,
               "not a JSON object");
}

TEST(ModelConfig, LoadFromDirectory) {
  testing::TempDir dir;
  auto missing = load_model_config(dir.path());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().to_string();
  EXPECT_NE(missing.status().message().find("config.json"), std::string::npos);
  dir.write("config.json", base_config().dump());
  auto c = load_model_config(dir.path());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->vocab_size, 1000);
  dir.write("config.json", "{\"hidden_size\": 12");
  auto bad = load_model_config(dir.path());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find(dir.file("config.json")), std::string::npos);
}

TEST(ModelConfig, ArchitectureNames) {
  EXPECT_STREQ(architecture_name(Architecture::kLlama), "LlamaForCausalLM");
  EXPECT_STREQ(architecture_name(Architecture::kMistral), "MistralForCausalLM");
  EXPECT_STREQ(architecture_name(Architecture::kQwen2), "Qwen2ForCausalLM");
  EXPECT_STREQ(architecture_name(Architecture::kQwen3), "Qwen3ForCausalLM");
}

}  // namespace
}  // namespace roofline
