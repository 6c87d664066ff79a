// Jinja2 lexer: template data and tag contents into tokens, with transformers' whitespace control.
#include "tokenizer/chat_template/jinja_lexer.h"

#include <algorithm>
#include <charconv>
#include <cstring>

namespace roofline::jinja {

std::string at(const SourcePos& pos, const std::string& message) {
  return "line " + std::to_string(pos.line) + ", column " + std::to_string(pos.column) + ": " +
         message;
}

namespace {

[[noreturn]] void fail(TemplateError::Kind kind, const SourcePos& pos, const std::string& message) {
  throw TemplateError(kind, at(pos, message));
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

void append_utf8(uint32_t cp, std::string& out) {
  if (cp > 0x10FFFF) cp = 0xFFFD;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  explicit Lexer(const std::string& raw) {
    // jinja2 normalises \r\n and \r to \n in the source and drops one trailing newline
    // (keep_trailing_newline=False) before it lexes anything.
    src_.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '\r') {
        src_ += '\n';
        if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
      } else {
        src_ += raw[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    size_t p = 0;
    bool line_starting = true;
    const size_t n = src_.size();
    while (p < n) {
      size_t start = find_tag(p);
      if (start == std::string::npos) {
        emit_text(src_.substr(p), p);
        break;
      }
      std::string text = src_.substr(p, start - p);
      const char kind = src_[start + 1];
      const char modifier = start + 2 < n ? src_[start + 2] : '\0';
      if (modifier == '-') {
        size_t keep = text.size();
        while (keep > 0 && is_space(text[keep - 1])) --keep;
        text.resize(keep);
      } else if (kind != '{' && modifier != '+') {
        // lstrip_blocks: spaces and tabs alone between a line start and the tag are dropped.
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting) &&
            text.find_first_not_of(" \t", l_pos) == std::string::npos) {
          text.resize(l_pos);
        }
      }
      emit_text(text, p);
      size_t q = start + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
      if (kind == '#') {
        size_t close = src_.find("#}", q);
        if (close == std::string::npos) {
          fail(TemplateError::Kind::kSyntax, pos_of(start),
               "unterminated comment: '{#' has no matching '#}'");
        }
        const char before = close > q ? src_[close - 1] : '\0';
        p = finish_tag(close + 2, before == '-', before == '+', /*block=*/true);
      } else {
        p = lex_tag(start, q, kind == '%');
      }
      line_starting = p > 0 && src_[p - 1] == '\n';
    }
    Token end{Token::Type::kEnd, "", pos_of(src_.size())};
    tokens_.push_back(end);
    return std::move(tokens_);
  }

 private:
  SourcePos pos_of(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    size_t line = static_cast<size_t>(it - line_starts_.begin());
    return SourcePos{static_cast<int>(line), static_cast<int>(offset - line_starts_[line - 1] + 1)};
  }

  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return std::string::npos;
  }

  void emit_text(const std::string& text, size_t offset) {
    if (!text.empty()) tokens_.push_back(Token{Token::Type::kText, text, pos_of(offset)});
  }

  // After a tag's closing delimiter: `-` eats all following whitespace; otherwise a block or
  // comment tag eats one newline (trim_blocks) unless marked `+`.
  size_t finish_tag(size_t p, bool strip_after, bool keep, bool block) const {
    if (strip_after) {
      while (p < src_.size() && is_space(src_[p])) ++p;
    } else if (block && !keep && p < src_.size() && src_[p] == '\n') {
      ++p;
    }
    return p;
  }

  size_t lex_tag(size_t start, size_t p, bool block) {
    const char* close = block ? "%}" : "}}";
    tokens_.push_back(Token{block ? Token::Type::kBlockBegin : Token::Type::kVarBegin,
                            block ? "{%" : "{{", pos_of(start)});
    int balance = 0;
    bool first_word = true;
    const size_t n = src_.size();
    while (true) {
      while (p < n && is_space(src_[p])) ++p;
      if (p >= n) {
        fail(TemplateError::Kind::kSyntax, pos_of(start),
             std::string("unterminated tag: '") + (block ? "{%" : "{{") + "' has no matching '" +
                 close + "'");
      }
      if (balance == 0) {
        if (src_.compare(p, 2, close) == 0) {
          tokens_.push_back(
              Token{block ? Token::Type::kBlockEnd : Token::Type::kVarEnd, close, pos_of(p)});
          return finish_tag(p + 2, false, false, block);
        }
        if ((src_[p] == '-' || (block && src_[p] == '+')) && src_.compare(p + 1, 2, close) == 0) {
          tokens_.push_back(
              Token{block ? Token::Type::kBlockEnd : Token::Type::kVarEnd, close, pos_of(p)});
          return finish_tag(p + 3, src_[p] == '-', src_[p] == '+', block);
        }
      }
      const SourcePos pos = pos_of(p);
      const char c = src_[p];
      if (is_name_start(c)) {
        size_t e = p + 1;
        while (e < n && (is_name_start(src_[e]) || is_digit(src_[e]))) ++e;
        std::string name = src_.substr(p, e - p);
        if (block && first_word && name == "raw") {
          fail(TemplateError::Kind::kUnsupported, pos,
               "unsupported statement 'raw': chat templates in this engine cannot use raw blocks");
        }
        tokens_.push_back(Token{Token::Type::kName, name, pos});
        p = e;
      } else if (is_digit(c)) {
        p = lex_number(p, pos);
      } else if (c == '\'' || c == '"') {
        p = lex_string(p, pos);
      } else {
        static const char* kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (const char* two : kTwo) {
          if (src_.compare(p, 2, two) == 0) op = two;
        }
        if (op.empty()) {
          if (std::strchr("+-*/%~<>=.,:|()[]{}", c) == nullptr || c == '\0') {
            fail(TemplateError::Kind::kSyntax, pos,
                 std::string("unexpected character '") + c + "' inside a tag");
          }
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") ++balance;
        if (op == ")" || op == "]" || op == "}") {
          if (balance == 0) fail(TemplateError::Kind::kSyntax, pos, "unexpected '" + op + "'");
          --balance;
        }
        tokens_.push_back(Token{Token::Type::kOperator, op, pos});
        p += op.size();
      }
      first_word = false;
    }
  }

  size_t lex_number(size_t p, const SourcePos& pos) {
    const size_t n = src_.size();
    size_t e = p;
    std::string digits;
    auto take_digits = [&]() {
      while (e < n &&
             (is_digit(src_[e]) || (src_[e] == '_' && e + 1 < n && is_digit(src_[e + 1])))) {
        if (src_[e] != '_') digits += src_[e];
        ++e;
      }
    };
    take_digits();
    bool is_float = false;
    if (e + 1 < n && src_[e] == '.' && is_digit(src_[e + 1])) {
      is_float = true;
      digits += '.';
      ++e;
      take_digits();
    }
    if (e < n && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t save = e;
      std::string save_digits = digits;
      digits += 'e';
      ++e;
      if (e < n && (src_[e] == '+' || src_[e] == '-')) digits += src_[e++];
      if (e < n && is_digit(src_[e])) {
        is_float = true;
        take_digits();
      } else {
        e = save;
        digits = save_digits;
      }
    }
    Token t{is_float ? Token::Type::kFloat : Token::Type::kInt, src_.substr(p, e - p), pos};
    if (is_float) {
      auto r = std::from_chars(digits.data(), digits.data() + digits.size(), t.float_value);
      if (r.ec != std::errc()) t.float_value = digits[0] == '0' ? 0.0 : 1e308 * 10;
    } else {
      auto r = std::from_chars(digits.data(), digits.data() + digits.size(), t.int_value);
      if (r.ec != std::errc()) {
        fail(TemplateError::Kind::kUnsupported, pos,
             "integer literal " + t.text + " does not fit in 64 bits");
      }
    }
    tokens_.push_back(t);
    return e;
  }

  size_t lex_string(size_t p, const SourcePos& pos) {
    const char quote = src_[p];
    const size_t n = src_.size();
    std::string out;
    size_t i = p + 1;
    auto hex = [&](size_t digits) -> uint32_t {
      uint32_t v = 0;
      for (size_t k = 0; k < digits; ++k) {
        char h = i + k < n ? src_[i + k] : '\0';
        int d = is_digit(h)              ? h - '0'
                : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                         : -1;
        if (d < 0) fail(TemplateError::Kind::kSyntax, pos, "bad \\x/\\u escape in string literal");
        v = v * 16 + static_cast<uint32_t>(d);
      }
      i += digits;
      return v;
    };
    while (true) {
      if (i >= n) fail(TemplateError::Kind::kSyntax, pos, "unterminated string literal");
      char c = src_[i];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++i;
        continue;
      }
      if (i + 1 >= n) fail(TemplateError::Kind::kSyntax, pos, "unterminated string literal");
      char e = src_[i + 1];
      i += 2;
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case '0':
          out += '\0';
          break;
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case '\n':
          break;  // line continuation
        case 'x':
          append_utf8(hex(2), out);
          break;
        case 'u':
          append_utf8(hex(4), out);
          break;
        case 'U':
          append_utf8(hex(8), out);
          break;
        default:
          // Python keeps unknown escapes as written.
          out += '\\';
          out += e;
      }
    }
    tokens_.push_back(Token{Token::Type::kString, out, pos});
    return i + 1;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(source).run(); }

}  // namespace roofline::jinja
