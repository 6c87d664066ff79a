// Jinja2 parser: tokens into the statement/expression trees of jinja_ast.h, following jinja2's
// grammar and operator precedence. Filters, tests and statements outside the supported subset are
// rejected here, at compile time, with their name and line:column, so an unsupported template
// never renders halfway.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tokenizer/chat_template/jinja_ast.h"

namespace roofline::jinja {

// Throws TemplateError. `max_depth` bounds expression and block nesting, so hostile input cannot
// exhaust the stack of this recursive-descent parser or of the interpreter that walks the tree.
std::unique_ptr<Template> parse_template(const std::string& source, uint32_t max_depth);

// The names the interpreter implements; the parser checks filters and tests against them.
bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);

}  // namespace roofline::jinja
