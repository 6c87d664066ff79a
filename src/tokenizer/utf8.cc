// UTF-8 validation, repair and iteration (see utf8.h). The ranges of the second byte follow the
// Unicode standard's table 3-7 (well-formed byte sequences): they exclude overlong forms,
// surrogates and code points above U+10FFFF, so an invalid subpart ends exactly where Python's
// decoder ends it.
#include "tokenizer/utf8.h"

namespace roofline::utf8 {

size_t sequence_length(std::string_view text, size_t pos, size_t* invalid_len, bool* truncated) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t b0 = byte(pos);
  if (b0 < 0x80) return 1;
  size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    if (invalid_len) *invalid_len = 1;
    if (truncated) *truncated = false;
    return 0;
  }
  size_t i = 1;
  for (; i < need; ++i) {
    if (pos + i >= text.size()) {
      if (invalid_len) *invalid_len = i;
      if (truncated) *truncated = true;
      return 0;
    }
    const uint8_t b = byte(pos + i);
    const bool ok = i == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) {
      if (invalid_len) *invalid_len = i;
      if (truncated) *truncated = false;
      return 0;
    }
  }
  return need;
}

bool is_valid(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = sequence_length(text, pos);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

std::string sanitize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t bad = 0;
    const size_t n = sequence_length(text, pos, &bad);
    if (n != 0) {
      out.append(text.substr(pos, n));
      pos += n;
    } else {
      out.append(kReplacement);
      pos += bad;
    }
  }
  return out;
}

std::string take_complete(std::string* pending) {
  std::string out;
  const std::string_view text(*pending);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t bad = 0;
    bool truncated = false;
    const size_t n = sequence_length(text, pos, &bad, &truncated);
    if (n != 0) {
      out.append(text.substr(pos, n));
      pos += n;
    } else if (truncated) {
      break;  // the next token may complete it
    } else {
      out.append(kReplacement);
      pos += bad;
    }
  }
  pending->erase(0, pos);
  return out;
}

uint32_t decode(std::string_view text, size_t pos, size_t* len) {
  const auto b = [&](size_t i) {
    return static_cast<uint32_t>(static_cast<uint8_t>(text[pos + i]));
  };
  const uint32_t b0 = b(0);
  if (b0 < 0x80) {
    *len = 1;
    return b0;
  }
  if (b0 < 0xE0) {
    *len = 2;
    return ((b0 & 0x1F) << 6) | (b(1) & 0x3F);
  }
  if (b0 < 0xF0) {
    *len = 3;
    return ((b0 & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
  }
  *len = 4;
  return ((b0 & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
}

void append(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_whitespace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

}  // namespace roofline::utf8
