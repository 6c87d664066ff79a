// libFuzzer target: arbitrary bytes as a model's tokenizer.json (parse_tokenizer_json, then
// Tokenizer::create), the file `--model DIR` reads before anything else. It must return a Status
// for any input, never crash, throw or read out of bounds (ASan, UBSan). A tokenizer it accepts
// must then work: fixed texts (ASCII, multi-byte UTF-8, invalid bytes, an added-token-like string)
// encode to ids inside the vocabulary, decode to valid UTF-8, and decode the same streamed.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "io/tokenizer_files.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_fuzz_check.h"

namespace {

const char* const kTexts[] = {
    "Hello, world! 123 tokens",
    "  leading spaces and\ttabs\nnewlines  ",
    "na\xC3\xAFve caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x99\x82",
    "bad \xFF\xC0 bytes \xE2\x82",
    "<s>[INST] <|im_start|>user<|im_end|></s>",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  auto spec = roofline::parse_tokenizer_json(json, "", "", "fuzz-input");
  if (!spec.ok()) {
    if (spec.status().message().empty()) std::abort();  // an error must say what to fix
    return 0;
  }
  auto tok = roofline::Tokenizer::create(std::move(spec).value());
  if (!tok.ok()) {
    if (tok.status().message().empty()) std::abort();
    return 0;
  }
  for (const char* text : kTexts) roofline::fuzz::check_encode_decode(**tok, text);
  return 0;
}
