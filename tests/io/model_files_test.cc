// open_model_files: a directory opens as Hugging Face, a .gguf file as GGUF (with its GgufFile
// kept for the tokenizer), anything else is refused with a message that says what is accepted.
#include "io/model_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

namespace roofline {
namespace {

const std::string kRoot = std::string(ROOFLINE_SOURCE_DIR) + "/tests/fixtures/";

TEST(ModelFiles, OpensHuggingFaceDirectory) {
  auto m = open_model_files(kRoot + "models/llama_mha");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->config.architecture_name, "LlamaForCausalLM");
  EXPECT_EQ(m->gguf, nullptr);
  EXPECT_TRUE(m->weights->contains("lm_head.weight"));
}

TEST(ModelFiles, OpensGguf) {
  auto m = open_model_files(kRoot + "gguf/qwen2_bias_gqa7_tied.f32.gguf");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->config.architecture_name, "Qwen2ForCausalLM");
  ASSERT_NE(m->gguf, nullptr);
  EXPECT_EQ(*m->gguf->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_TRUE(m->weights->contains("model.layers.1.self_attn.k_proj.bias"));
  EXPECT_EQ(m->weights->total_bytes(), 388768u);
  // The config and weights agree the way the graph builder will check them.
  EXPECT_TRUE(
      m->weights
          ->get_float("model.embed_tokens.weight", {m->config.vocab_size, m->config.hidden_size})
          .ok());
}

TEST(ModelFiles, RefusesOtherPaths) {
  auto missing = open_model_files(kRoot + "models/no_such_model");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(".gguf"), std::string::npos);

  auto json = open_model_files(kRoot + "models/llama_mha/config.json");
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(json.status().message().find("without the .gguf extension"), std::string::npos)
      << json.status().to_string();

  EXPECT_FALSE(open_model_files("").ok());

  // A .gguf that is not GGUF inside.
  char path[] = "/tmp/roofline_model_files_XXXXXX.gguf";
  const int fd = mkstemps(path, 5);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "not a model", 11), 11);
  close(fd);
  auto bad = open_model_files(path);
  std::remove(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a GGUF file"), std::string::npos)
      << bad.status().to_string();
}

}  // namespace
}  // namespace roofline
