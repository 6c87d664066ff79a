// What both tokenizer fuzz targets require of a working tokenizer on any text: ids inside the
// vocabulary, decode to valid UTF-8, and streamed decoding equal to one-shot decoding. Aborts (a
// finding) otherwise. Returns the ids and their decoding.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace roofline::fuzz {

inline std::pair<std::vector<int32_t>, std::string> check_encode_decode(const Tokenizer& tok,
                                                                        const std::string& text) {
  std::vector<int32_t> ids = tok.encode(text, true);
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.vocab_size()) std::abort();
  }
  std::string decoded = tok.decode(ids, false);
  if (!utf8::is_valid(decoded)) std::abort();
  Tokenizer::StreamDecoder stream(tok, false);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.next(id);
  streamed += stream.finish();
  if (streamed != decoded) std::abort();
  return {std::move(ids), std::move(decoded)};
}

}  // namespace roofline::fuzz
