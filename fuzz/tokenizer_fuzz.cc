// libFuzzer target: Tokenizer::encode / decode / StreamDecoder on arbitrary bytes, with the
// byte-level and the SentencePiece-style fixture tokenizers (built once). It must never crash or
// read out of bounds (ASan, UBSan), every id must be in the vocabulary, decode must return valid
// UTF-8, streaming must equal one-shot decoding, and valid UTF-8 without added-token strings must
// round-trip exactly (byte-level) or up to the prefix '▁' after special tokens (SentencePiece).
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "io/tokenizer_files.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer_fuzz_check.h"

namespace {

std::unique_ptr<roofline::Tokenizer> load(const char* name) {
  auto spec = roofline::load_tokenizer_json(std::string(ROOFLINE_SOURCE_DIR) +
                                            "/tests/fixtures/tokenizers/" + name);
  if (!spec.ok()) std::abort();  // the fixtures are part of the tree
  auto tok = roofline::Tokenizer::create(std::move(spec).value());
  if (!tok.ok()) std::abort();
  return std::move(tok).value();
}

void check(const roofline::Tokenizer& tok, const std::string& text) {
  roofline::fuzz::check_encode_decode(tok, text);
  // Round trip: only for valid UTF-8 free of '<' (no added-token string can occur) and, for the
  // SentencePiece tokenizer, of '▁' runs the decoder cannot tell from spaces.
  if (roofline::utf8::is_valid(text) && text.find('<') == std::string::npos &&
      text.find("\xE2\x96\x81") == std::string::npos) {
    if (tok.decode(tok.encode(text, false), false) != text) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<roofline::Tokenizer> byte_level = load("bytelevel");
  static const std::unique_ptr<roofline::Tokenizer> sentencepiece = load("sentencepiece");
  const std::string text(reinterpret_cast<const char*>(data), size);
  check(*byte_level, text);
  check(*sentencepiece, text);
  return 0;
}
