// The built-in default model (SmolLM2-135M-Instruct, Q4_1 GGUF, installed by scripts/setup.sh into
// .models/) answers fixed questions coherently under greedy decoding through its own tokenizer and
// chat template on the CPU. The pinned answer prefixes (about 8-12 tokens each, recorded
// 2026-11-30) catch any regression in GGUF loading, dequantisation, tokenisation, the chat
// template or the forward pass. Skips itself, saying why, when the model is not installed.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "roofline/model.h"

namespace roofline {
namespace {

const std::string kModel =
    std::string(ROOFLINE_SOURCE_DIR) + "/.models/SmolLM2-135M-Instruct.Q4_1.gguf";

struct Case {
  const char* question;
  const char* answer_prefix;
};

class DefaultModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(kModel)) return;
    ModelOptions o;
    o.model_dir = kModel;
    auto m = Model::load(o);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    model_ = std::move(m).value().release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  void SetUp() override {
    if (!model_) GTEST_SKIP() << kModel << " is not installed (scripts/setup.sh installs it)";
  }
  static std::string answer(const std::string& question, int64_t max_tokens) {
    auto prompt = model_->render_chat({{"user", question}}, true);
    EXPECT_TRUE(prompt.ok()) << prompt.status().to_string();
    GenerateOptions g;
    g.max_new_tokens = max_tokens;
    auto text = model_->generate_text(*prompt, false, g, nullptr);
    EXPECT_TRUE(text.ok()) << text.status().to_string();
    return text.ok() ? *text : "";
  }
  static inline Model* model_ = nullptr;
};

TEST_F(DefaultModel, AnswersPinnedQuestions) {
  const Case cases[] = {
      {"What is the capital of France?", "The capital of France is Paris."},
      {"Name three primary colors.", "The primary colors are: Red, Blue, and Yellow."},
      {"What is the boiling point of water in Celsius?",
       "The boiling point of water in Celsius is approximately 100"},
  };
  for (const Case& c : cases) {
    const std::string got = answer(c.question, 16);
    EXPECT_EQ(got.substr(0, std::string(c.answer_prefix).size()), c.answer_prefix) << c.question;
  }
}

TEST_F(DefaultModel, TokenizerAndTemplateAreTheModels) {
  EXPECT_TRUE(model_->has_tokenizer());
  auto prompt = model_->render_chat({{"user", "Hi"}}, true);
  ASSERT_TRUE(prompt.ok());
  EXPECT_EQ(
      *prompt,
      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
      "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  auto ids = model_->tokenize("<|im_start|>user", false);
  ASSERT_TRUE(ids.ok());
  ASSERT_GE(ids->size(), 2u);
  EXPECT_EQ((*ids)[0], 1);  // <|im_start|> is one special token
  auto text = model_->detokenize(*ids);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "<|im_start|>user");
}

TEST_F(DefaultModel, StreamingSeesTheSameText) {
  auto prompt = model_->render_chat({{"user", "Say hello in Japanese."}}, true);
  ASSERT_TRUE(prompt.ok());
  GenerateOptions g;
  g.max_new_tokens = 24;
  std::string streamed;
  auto text = model_->generate_text(*prompt, false, g, [&](const std::string& piece) {
    streamed += piece;
    return true;
  });
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(streamed, *text);
  EXPECT_FALSE(text->empty());
}

}  // namespace
}  // namespace roofline
