// RegexSplitter: one pre-tokenisation split (a PCRE2 regex or a literal string plus a
// SplitBehavior) applied to a list of pieces of text.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "roofline/status.h"
#include "tokenizer/tokenizer.h"

namespace roofline {

class RegexSplitter {
 public:
  // InvalidArgument naming the pattern, PCRE2's message and the offset if PCRE2 rejects it.
  static StatusOr<std::unique_ptr<RegexSplitter>> create(const RegexSplit& split);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Splits every piece of `in` (valid UTF-8 views into one buffer) and appends the non-empty
  // results to *out in order. Thread-safe.
  void split(const std::vector<std::string_view>& in, std::vector<std::string_view>* out) const;

 private:
  RegexSplitter() = default;
  void* code_ = nullptr;  // pcre2_code_8*, kept opaque so pcre2.h stays out of this header
  SplitBehavior behavior_ = SplitBehavior::kIsolated;
};

// Hugging Face's "word character" for single_word added tokens: a letter, number or '_' (Rust's
// char::is_alphanumeric, approximated by \p{L} and \p{N}).
bool is_word_char(uint32_t code_point);

}  // namespace roofline
