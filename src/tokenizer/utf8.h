// UTF-8 helpers for the tokenizer: validation with replacement, code point iteration, and the
// "complete prefix" split the streaming decoder needs.
//
// Invalid input is repaired the way Python's bytes.decode(errors="replace") and Rust's
// String::from_utf8_lossy do it (the Unicode "maximal subpart" practice): every maximal prefix of
// a would-be sequence that cannot be completed becomes one U+FFFD. Matching that practice is what
// lets roofline's encoder agree with Hugging Face tokenizers on bytes that are not UTF-8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace roofline::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid sequence at text[pos], or 0 if the bytes there are not a complete valid
// sequence. *invalid_len (if given) receives the length of the maximal invalid subpart in that
// case (>= 1), and *truncated whether that subpart runs into the end of the text (a sequence that
// more bytes could still complete).
size_t sequence_length(std::string_view text, size_t pos, size_t* invalid_len = nullptr,
                       bool* truncated = nullptr);

bool is_valid(std::string_view text);

// Returns text with every maximal invalid subpart replaced by U+FFFD.
std::string sanitize(std::string_view text);

// Moves the longest prefix of *pending that ends on a sequence boundary into the result (with
// invalid subparts replaced), leaving in *pending only a trailing, still-completable partial
// sequence (at most 3 bytes).
std::string take_complete(std::string* pending);

// Decodes the (valid) sequence at text[pos]; *len receives its length. Precondition: the text is
// valid UTF-8 at pos.
uint32_t decode(std::string_view text, size_t pos, size_t* len);
void append(uint32_t code_point, std::string* out);

// Unicode White_Space (what Rust's char::is_whitespace and HF's lstrip/rstrip use).
bool is_whitespace(uint32_t code_point);

}  // namespace roofline::utf8
