// ChatTemplate: compiles a template once, renders conversations with transformers' context
// variables, and turns the interpreter's internal errors into Statuses.
#include "tokenizer/chat_template/chat_template.h"

#include <new>

#include "tokenizer/chat_template/jinja_interpreter.h"
#include "tokenizer/chat_template/jinja_parser.h"

namespace roofline {

namespace {

Status to_status(const jinja::TemplateError& e, const char* phase) {
  using K = jinja::TemplateError::Kind;
  const std::string where = std::string("chat template ") + phase + ": ";
  switch (e.kind) {
    case K::kSyntax:
      return invalid_argument(where + "syntax error at " + e.what());
    case K::kUnsupported:
      return unimplemented(where + e.what() +
                           " (the template uses Jinja beyond the subset this engine implements; "
                           "pass a simpler template or file an issue with the model name)");
    case K::kRaised:
      return invalid_argument(std::string("chat template raised an exception: ") + e.what());
    case K::kLimit:
      return resource_exhausted(where + e.what());
    case K::kRuntime:
      return invalid_argument(where + "error at " + e.what());
  }
  return internal_error(where + e.what());
}

}  // namespace

ChatTemplate::ChatTemplate(std::shared_ptr<const jinja::Template> tmpl, ChatTemplateLimits limits)
    : template_(std::move(tmpl)), limits_(limits) {}
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

StatusOr<ChatTemplate> ChatTemplate::compile(const std::string& source,
                                             const ChatTemplateLimits& limits) {
  if (limits.max_nesting_depth == 0 || limits.max_output_bytes == 0) {
    return invalid_argument("chat template limits must be positive");
  }
  try {
    std::shared_ptr<const jinja::Template> tmpl =
        jinja::parse_template(source, limits.max_nesting_depth);
    return ChatTemplate(std::move(tmpl), limits);
  } catch (const jinja::TemplateError& e) {
    return to_status(e, "compile");
  } catch (const std::bad_alloc&) {
    return resource_exhausted("chat template compile: out of memory");
  }
}

StatusOr<std::string> ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                           bool add_generation_prompt,
                                           const ChatTemplateVars& vars) const {
  using jinja::Value;
  std::vector<Value> list;
  list.reserve(messages.size());
  for (const auto& m : messages) {
    Value d = Value::dict();
    d.dict_items().set("role", Value::string(m.role));
    d.dict_items().set("content", Value::string(m.content));
    list.push_back(std::move(d));
  }
  // The variables transformers' render_jinja_template passes: tools and documents are defined
  // as None when absent, which templates test with `is not none`.
  std::vector<std::pair<std::string, Value>> globals;
  globals.emplace_back("messages", Value::list(std::move(list)));
  globals.emplace_back("tools", Value::none());
  globals.emplace_back("documents", Value::none());
  globals.emplace_back("add_generation_prompt", Value::boolean(add_generation_prompt));
  globals.emplace_back("bos_token", Value::string(vars.bos_token));
  globals.emplace_back("eos_token", Value::string(vars.eos_token));
  for (const auto& [k, v] : vars.strings) {
    if (vars.bools.count(k)) {
      return invalid_argument("chat template variable '" + k +
                              "' is given both as a string and a bool");
    }
    globals.emplace_back(k, Value::string(v));
  }
  for (const auto& [k, v] : vars.bools) globals.emplace_back(k, Value::boolean(v));
  jinja::Interpreter interp(
      jinja::RenderLimits{limits_.max_output_bytes, limits_.max_loop_iterations,
                          limits_.max_nesting_depth * 2 + 16},
      vars.now);
  try {
    return interp.render(*template_, globals);
  } catch (const jinja::TemplateError& e) {
    return to_status(e, "render");
  } catch (const std::bad_alloc&) {
    return resource_exhausted("chat template render: out of memory");
  }
}

}  // namespace roofline
