// Splits Jinja2 source into text and tag tokens, applying whitespace control the way
// transformers' environment does: trim_blocks (drop the newline after `%}` and `#}`),
// lstrip_blocks (drop spaces and tabs before `{%`/`{#` that start a line), `-` on either side of
// a tag (strip all adjacent whitespace) and `+` (keep it). Newlines are normalised to "\n" and one
// trailing newline is dropped, as jinja2's lexer does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/chat_template/jinja_ast.h"

namespace roofline::jinja {

struct Token {
  enum class Type {
    kText,        // literal template data
    kVarBegin,    // {{
    kVarEnd,      // }}
    kBlockBegin,  // {%
    kBlockEnd,    // %}
    kName,
    kString,  // escapes already decoded
    kInt,
    kFloat,
    kOperator,  // + - * / // % ** ~ == != < <= > >= = . , : | ( ) [ ] { }
    kEnd,       // end of input
  };
  Type type;
  std::string text;
  SourcePos pos;
  int64_t int_value = 0;
  double float_value = 0.0;
};

// Throws TemplateError (kSyntax) with line:column on an unterminated tag, comment or string.
std::vector<Token> tokenize(const std::string& source);

}  // namespace roofline::jinja
