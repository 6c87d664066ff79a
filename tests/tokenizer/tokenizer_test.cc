// Tokenizer algorithms on small hand-made specs: llama.cpp-style score merging, byte fallback,
// UTF-8 repair of the input, the streaming decoder's hold-back of partial characters, and the
// validation errors of Tokenizer::create.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tokenizer/utf8.h"

namespace roofline {
namespace {

const std::string kMeta = "\xE2\x96\x81";  // '▁'

// Byte-level spec whose vocabulary is just the 256 byte tokens (no merges): every byte of the
// text is one id, which makes the streaming decoder see split characters.
TokenizerSpec bytes_only_spec() {
  TokenizerSpec spec;
  spec.kind = TokenizerKind::kByteLevelBpe;
  spec.source = "bytes-only";
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    std::string s;
    utf8::append(printable ? b : next++, &s);
    spec.vocab.push_back(s);
  }
  spec.splits.push_back({"\\s+|\\S+", SplitBehavior::kIsolated, false});
  return spec;
}

// SentencePiece vocabulary with scores and no merges (a GGUF "llama" tokenizer).
TokenizerSpec score_spec() {
  TokenizerSpec spec;
  spec.kind = TokenizerKind::kSentencePieceBpe;
  spec.source = "score-spec";
  spec.vocab = {"<unk>", "<s>", "</s>", kMeta,       "a",         "b",
                "c",     "ab",  "bc",   kMeta + "a", kMeta + "ab"};
  spec.scores = {0, 0, 0, -1, -2, -2, -2, -5, -3, -4, -6};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    spec.vocab.push_back(name);
    spec.scores.push_back(0);
  }
  spec.unk_id = 0;
  spec.bos_id = 1;
  spec.eos_id = 2;
  spec.add_bos = true;
  spec.byte_fallback = true;
  spec.replace_spaces = true;
  spec.prefix_space = PrefixSpace::kEverySegment;
  spec.decode_strip_leading_space = true;
  spec.added_tokens = {{1, "<s>", true}, {2, "</s>", true}};
  return spec;
}

std::unique_ptr<Tokenizer> make(TokenizerSpec spec) {
  auto tok = Tokenizer::create(std::move(spec));
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

TEST(TokenizerTest, ScoreMergesBestScoreFirst) {
  auto tok = make(score_spec());
  ASSERT_NE(tok, nullptr);
  // "▁abc": candidates ▁a(-4), ab(-5), bc(-3): bc wins, then ▁a; "▁a"+"bc" is no token.
  EXPECT_EQ(tok->encode("abc", false), (std::vector<int32_t>{9, 8}));
  // "▁ab": ▁a(-4) beats ab(-5), then ▁a+b = ▁ab(-6).
  EXPECT_EQ(tok->encode("ab"), (std::vector<int32_t>{1, 10}));
  // The prefix is stripped only at the start of the output, as HF's Strip decoder does.
  EXPECT_EQ(tok->decode(tok->encode("ab")), "<s> ab");
  EXPECT_EQ(tok->decode(tok->encode("ab"), true), "ab");
}

TEST(TokenizerTest, ByteFallbackForUnknownCharacters) {
  auto tok = make(score_spec());
  ASSERT_NE(tok, nullptr);
  const int32_t base = 11;  // <0x00>
  // "é" = C3 A9 has no token: two byte tokens, after the prefix '▁'.
  EXPECT_EQ(tok->encode("\xC3\xA9", false), (std::vector<int32_t>{3, base + 0xC3, base + 0xA9}));
  EXPECT_EQ(tok->decode(tok->encode("\xC3\xA9 c", false)), "\xC3\xA9 c");
}

TEST(TokenizerTest, InvalidUtf8IsReplacedBeforeEncoding) {
  auto tok = make(bytes_only_spec());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->encode("a\xFF"
                        "b",
                        false),
            tok->encode("a\xEF\xBF\xBD"
                        "b",
                        false));
  // A truncated 3-byte sequence is one maximal subpart: one U+FFFD, like Python.
  EXPECT_EQ(tok->encode("x\xE4\xBDy", false), tok->encode("x\xEF\xBF\xBDy", false));
  EXPECT_EQ(tok->decode(tok->encode("\xC0\xAF", false)), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(TokenizerTest, StreamDecoderHoldsBackPartialCharacters) {
  auto tok = make(bytes_only_spec());
  ASSERT_NE(tok, nullptr);
  const std::string text = "h\xC3\xA9\xF0\x9F\x98\x80!";  // h é 😀 !
  const std::vector<int32_t> ids = tok->encode(text, false);
  ASSERT_EQ(ids.size(), text.size());
  Tokenizer::StreamDecoder stream(*tok);
  std::vector<std::string> outputs;
  for (int32_t id : ids) outputs.push_back(stream.next(id));
  EXPECT_EQ(outputs,
            (std::vector<std::string>{"h", "", "\xC3\xA9", "", "", "", "\xF0\x9F\x98\x80", "!"}));
  EXPECT_EQ(stream.finish(), "");
  // A dangling partial character is flushed as U+FFFD.
  EXPECT_EQ(stream.next(ids[3]), "");
  EXPECT_EQ(stream.next(ids[4]), "");
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD");
  // An invalid byte is not held back forever: the next character releases it as U+FFFD.
  EXPECT_EQ(stream.next(ids[3]), "");
  EXPECT_EQ(stream.next(ids[0]), "\xEF\xBF\xBDh");
}

TEST(TokenizerTest, StreamDecoderStripsOnlyTheFirstPrefixSpace) {
  auto tok = make(score_spec());
  ASSERT_NE(tok, nullptr);
  const std::vector<int32_t> ids = tok->encode("ab ab", true);
  Tokenizer::StreamDecoder stream(*tok, /*skip_special=*/true);
  std::string out;
  for (int32_t id : ids) out += stream.next(id);
  out += stream.finish();
  EXPECT_EQ(out, "ab ab");
  EXPECT_EQ(out, tok->decode(ids, true));
}

TEST(TokenizerTest, AccessorsAndOutOfRangeIds) {
  auto tok = make(score_spec());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 11 + 256);
  EXPECT_EQ(tok->token_to_id(kMeta + "ab"), 10);
  EXPECT_EQ(tok->token_to_id("nope"), -1);
  EXPECT_EQ(tok->id_to_token(7), "ab");
  EXPECT_EQ(tok->id_to_token(-1), "");
  EXPECT_EQ(tok->id_to_token(100000), "");
  EXPECT_EQ(tok->decode({-5, 100000, 7}), "ab");
  EXPECT_TRUE(tok->is_special(1));
  EXPECT_FALSE(tok->is_special(7));
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{2});
}

TEST(TokenizerTest, EmptyInput) {
  auto tok = make(score_spec());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->encode("", true), std::vector<int32_t>{1});
  EXPECT_TRUE(tok->encode("", false).empty());
  EXPECT_EQ(tok->decode({}), "");
}

#define EXPECT_CREATE_ERROR(spec_, code_, phrase_)                                                \
  do {                                                                                            \
    auto r_ = Tokenizer::create(spec_);                                                           \
    ASSERT_FALSE(r_.ok());                                                                        \
    EXPECT_EQ(r_.status().code(), (code_)) << r_.status().to_string();                            \
    EXPECT_NE(r_.status().message().find(phrase_), std::string::npos) << r_.status().to_string(); \
  } while (0)

TEST(TokenizerTest, CreateRejectsBadSpecs) {
  TokenizerSpec empty;
  EXPECT_CREATE_ERROR(empty, StatusCode::kInvalidArgument, "vocabulary is empty");

  TokenizerSpec bad_regex = bytes_only_spec();
  bad_regex.splits.push_back({"(unclosed", SplitBehavior::kIsolated, false});
  EXPECT_CREATE_ERROR(bad_regex, StatusCode::kInvalidArgument, "rejected by PCRE2");

  TokenizerSpec bad_merge = score_spec();
  bad_merge.scores.clear();
  bad_merge.merges = {{"a", "zz"}};
  EXPECT_CREATE_ERROR(bad_merge, StatusCode::kInvalidArgument, "'zz'");

  TokenizerSpec merged_missing = score_spec();
  merged_missing.scores.clear();
  merged_missing.merges = {{"a", "c"}};
  EXPECT_CREATE_ERROR(merged_missing, StatusCode::kInvalidArgument, "'ac'");

  TokenizerSpec bad_bos = score_spec();
  bad_bos.bos_id = 100000;
  EXPECT_CREATE_ERROR(bad_bos, StatusCode::kOutOfRange, "bos id 100000");

  TokenizerSpec bad_added = score_spec();
  bad_added.added_tokens.push_back({5, "<other>", true});
  EXPECT_CREATE_ERROR(bad_added, StatusCode::kInvalidArgument, "is both 'b'");

  TokenizerSpec bad_scores = score_spec();
  bad_scores.scores.pop_back();
  EXPECT_CREATE_ERROR(bad_scores, StatusCode::kInvalidArgument, "scores");

  TokenizerSpec neither = score_spec();
  neither.scores.clear();
  EXPECT_CREATE_ERROR(neither, StatusCode::kInvalidArgument, "neither");
}

TEST(Utf8Test, SanitizeFollowsMaximalSubparts) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8::sanitize("ok"), "ok");
  EXPECT_EQ(utf8::sanitize("\x80"), r);
  EXPECT_EQ(utf8::sanitize("\xE4\xBD"), r);              // truncated: one subpart
  EXPECT_EQ(utf8::sanitize("\xED\xA0\x80"), r + r + r);  // surrogate: E D is invalid at byte 2
  EXPECT_EQ(utf8::sanitize("\xF4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
  EXPECT_TRUE(utf8::is_valid("\xF0\x9F\x98\x80"));
  EXPECT_FALSE(utf8::is_valid("\xF0\x9F\x98"));
}

}  // namespace
}  // namespace roofline
