// Tests for the tokenizer file readers (src/io/tokenizer_files.h): tokenizer_config.json and
// generation_config.json fields are read, and every malformed or unsupported tokenizer.json is an
// error that names the problem and the file (not JSON, wrong types, ids out of range or
// duplicated, merges over unknown tokens, unknown model / normaliser / pre-tokenizer, a regex
// PCRE2 rejects, unknown GGUF pre-tokenizer names).
#include "io/tokenizer_files.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace roofline {
namespace {

using nlohmann::json;

constexpr const char* kSource = "test/tokenizer.json";

// A minimal valid byte-level tokenizer.json: bytes 'a', 'b', merge "a b", one special token.
json base() {
  return json::parse(R"({
    "added_tokens": [{"id": 3, "content": "<|end|>", "special": true, "lstrip": false,
                      "rstrip": false, "single_word": false, "normalized": false}],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "post_processor": null,
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "byte_fallback": false,
              "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}
  })");
}

StatusOr<TokenizerSpec> parse(const json& j, const std::string& config = "",
                              const std::string& generation = "") {
  return parse_tokenizer_json(j.dump(), config, generation, kSource);
}

#define EXPECT_ERROR(result_, code_, phrase_)                                             \
  do {                                                                                    \
    auto status_ = (result_).status();                                                    \
    EXPECT_EQ(status_.code(), (code_)) << status_.to_string();                            \
    EXPECT_NE(status_.message().find(phrase_), std::string::npos) << status_.to_string(); \
    EXPECT_NE(status_.message().find(kSource), std::string::npos) << status_.to_string(); \
  } while (0)

TEST(TokenizerJsonTest, ParsesMinimalByteLevel) {
  auto spec = parse(base());
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  EXPECT_EQ(spec->kind, TokenizerKind::kByteLevelBpe);
  EXPECT_EQ(spec->vocab.size(), 4u);
  EXPECT_EQ(spec->merges.size(), 1u);
  EXPECT_EQ(spec->splits.size(), 1u);  // the GPT-2 regex
  auto tok = Tokenizer::create(std::move(spec).value());
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ((*tok)->encode("ab<|end|>ab"), (std::vector<int32_t>{2, 3, 2}));
}

TEST(TokenizerJsonTest, ReadsConfigAndGenerationConfig) {
  const std::string config = R"({"bos_token": {"content": "a"}, "eos_token": "<|end|>",
    "add_bos_token": true,
    "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})";
  auto spec = parse(base(), config, R"({"eos_token_id": [3, 1]})");
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  EXPECT_EQ(spec->bos_id, 0);
  EXPECT_EQ(spec->eos_id, 3);
  EXPECT_TRUE(spec->add_bos);  // no post_processor: the config decides
  EXPECT_EQ(spec->chat_template, "D");
  auto tok = Tokenizer::create(std::move(spec).value());
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ((*tok)->eos_ids(), (std::vector<int32_t>{3, 1}));

  auto plain = parse(base(), R"({"chat_template": "{{ x }}"})");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->chat_template, "{{ x }}");
}

TEST(TokenizerJsonTest, ArrayMergesAndTemplateBos) {
  json j = base();
  j["model"]["merges"] = json::parse(R"([["a", "b"]])");
  j["post_processor"] = json::parse(R"({"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<|end|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [], "special_tokens": {}})");
  auto spec = parse(j);
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  EXPECT_EQ(spec->merges[0], (std::pair<std::string, std::string>("a", "b")));
  EXPECT_TRUE(spec->add_bos);
  EXPECT_EQ(spec->bos_id, 3);
}

TEST(TokenizerJsonTest, RejectsMalformedFiles) {
  EXPECT_ERROR(parse_tokenizer_json("{not json", "", "", kSource), StatusCode::kInvalidArgument,
               "not valid JSON");
  EXPECT_ERROR(parse_tokenizer_json("[1, 2]", "", "", kSource), StatusCode::kInvalidArgument,
               "must be an object");
  json j = base();
  j["model"]["vocab"]["c"] = "seven";
  EXPECT_ERROR(parse(j), StatusCode::kInvalidArgument, "model.vocab[\"c\"]");
  j = base();
  j["model"]["vocab"] = json::array();
  EXPECT_ERROR(parse(j), StatusCode::kInvalidArgument, "model.vocab");
  j = base();
  j["model"]["vocab"]["c"] = 1000;
  EXPECT_ERROR(parse(j), StatusCode::kOutOfRange, "id 1000");
  j = base();
  j["model"]["vocab"]["c"] = -1;
  EXPECT_ERROR(parse(j), StatusCode::kOutOfRange, "id -1");
  j = base();
  j["model"]["vocab"]["c"] = 1;
  EXPECT_ERROR(parse(j), StatusCode::kInvalidArgument, "used by both");
  j = base();
  j["added_tokens"][0]["id"] = 99;
  EXPECT_ERROR(parse(j), StatusCode::kOutOfRange, "added token");
  j = base();
  j["added_tokens"][0]["special"] = "yes";
  EXPECT_ERROR(parse(j), StatusCode::kInvalidArgument, "added_tokens[0].special");
  j = base();
  j["model"]["merges"] = json::parse(R"(["a"])");
  EXPECT_ERROR(parse(j), StatusCode::kInvalidArgument, "merge #0");
  j = base();
  j["model"]["merges"] = json::parse(R"([7])");
  EXPECT_ERROR(parse(j), StatusCode::kInvalidArgument, "model.merges[0]");
  EXPECT_ERROR(parse(base(), "{bad"), StatusCode::kInvalidArgument, "tokenizer_config.json");
  EXPECT_ERROR(parse(base(), R"({"chat_template": 5})"), StatusCode::kInvalidArgument,
               "chat_template");
  EXPECT_ERROR(parse(base(), R"({"eos_token": "<nope>"})"), StatusCode::kInvalidArgument,
               "'<nope>' is not in the vocabulary");
  EXPECT_ERROR(parse(base(), "", R"({"eos_token_id": 77})"), StatusCode::kOutOfRange, "77");
}

TEST(TokenizerJsonTest, MergeOverUnknownTokenFailsAtCreate) {
  json j = base();
  j["model"]["merges"] = json::parse(R"(["a zz"])");
  auto spec = parse(j);
  ASSERT_TRUE(spec.ok());
  auto tok = Tokenizer::create(std::move(spec).value());
  EXPECT_ERROR(tok, StatusCode::kInvalidArgument, "'zz', which is not in the vocabulary");
}

TEST(TokenizerJsonTest, RegexRejectedByPcre2FailsAtCreate) {
  json j = base();
  j["pre_tokenizer"] = json::parse(R"({"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "[unclosed"}, "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})");
  auto spec = parse(j);
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  auto tok = Tokenizer::create(std::move(spec).value());
  EXPECT_ERROR(tok, StatusCode::kInvalidArgument, "rejected by PCRE2");
}

TEST(TokenizerJsonTest, UnsupportedComponentsAreUnimplemented) {
  json j = base();
  j["model"]["type"] = "Unigram";
  EXPECT_ERROR(parse(j), StatusCode::kUnimplemented, "model type 'Unigram'");
  j = base();
  j["normalizer"] = json::parse(R"({"type": "NFC"})");
  EXPECT_ERROR(parse(j), StatusCode::kUnimplemented, "normalizer 'NFC'");
  j = base();
  j["pre_tokenizer"] = json::parse(R"({"type": "Whitespace"})");
  EXPECT_ERROR(parse(j), StatusCode::kUnimplemented, "pre_tokenizer 'Whitespace'");
  j = base();
  j["pre_tokenizer"] = json::parse(R"({"type": "Split", "pattern": {"Regex": "x"},
    "behavior": "Isolated", "invert": true})");
  EXPECT_ERROR(parse(j), StatusCode::kUnimplemented, "invert");
  j = base();
  j["decoder"] = json::parse(R"({"type": "WordPiece"})");
  EXPECT_ERROR(parse(j), StatusCode::kUnimplemented, "decoder 'WordPiece'");
  j = base();
  j["model"]["dropout"] = 0.1;
  EXPECT_ERROR(parse(j), StatusCode::kUnimplemented, "dropout");
  j = base();
  j["post_processor"] = json::parse(R"({"type": "BertProcessing"})");
  EXPECT_ERROR(parse(j), StatusCode::kUnimplemented, "post_processor 'BertProcessing'");
}

TEST(TokenizerJsonTest, SentencePieceShapes) {
  json j = base();
  j["pre_tokenizer"] = nullptr;
  j["decoder"] = json::parse(R"({"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
    {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})");
  j["normalizer"] = json::parse(R"({"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]})");
  auto spec = parse(j);
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  EXPECT_EQ(spec->kind, TokenizerKind::kSentencePieceBpe);
  EXPECT_EQ(spec->prefix_space, PrefixSpace::kEverySegment);
  EXPECT_TRUE(spec->replace_spaces);
  EXPECT_TRUE(spec->decode_strip_leading_space);

  j["normalizer"] = json::parse(R"({"type": "Prepend", "prepend": "#"})");
  EXPECT_ERROR(parse(j), StatusCode::kUnimplemented, "Prepend('#')");
}

TEST(TokenizerJsonTest, MissingDirectoryIsNotFound) {
  auto spec = load_tokenizer_json("/nonexistent/model");
  EXPECT_EQ(spec.status().code(), StatusCode::kNotFound);
  EXPECT_NE(spec.status().message().find("tokenizer.json"), std::string::npos);
}

TEST(GgufPreTokenizerTest, KnownAndUnknownNames) {
  bool ignore_merges = false;
  auto smollm = gguf_pre_tokenizer_splits("smollm", &ignore_merges);
  ASSERT_TRUE(smollm.ok());
  EXPECT_EQ(smollm->size(), 2u);
  EXPECT_FALSE(ignore_merges);
  auto llama3 = gguf_pre_tokenizer_splits("llama-bpe", &ignore_merges);
  ASSERT_TRUE(llama3.ok());
  EXPECT_TRUE(ignore_merges);
  for (const char* name : {"default", "gpt-2", "qwen2"}) {
    EXPECT_TRUE(gguf_pre_tokenizer_splits(name, &ignore_merges).ok()) << name;
  }
  auto unknown = gguf_pre_tokenizer_splits("chameleon", &ignore_merges);
  EXPECT_EQ(unknown.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(unknown.status().message().find("'chameleon'"), std::string::npos);
}

}  // namespace
}  // namespace roofline
