// Walks a parsed template and produces text: Jinja2 scoping (a fresh scope per loop iteration,
// macros that see only globals and their parameters), Python operator semantics, the filters,
// tests, globals and str/dict methods that chat templates use, and transformers' additions
// (raise_exception, strftime_now, namespace, tojson without HTML escaping, the sandbox's refusal
// to mutate lists). Hostile templates are bounded by output size, loop iterations and depth.
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/chat_template/jinja_ast.h"

namespace roofline::jinja {

struct RenderLimits {
  uint64_t max_output_bytes;
  uint64_t max_loop_iterations;
  uint32_t max_depth;
};

class Interpreter {
 public:
  // `globals` holds the context variables (messages, add_generation_prompt, bos_token, ...);
  // `now` pins strftime_now's clock.
  Interpreter(const RenderLimits& limits, std::optional<std::tm> now);

  // Throws TemplateError.
  std::string render(const Template& tmpl,
                     const std::vector<std::pair<std::string, Value>>& globals);

  // Fails if a string or list about to be built would exceed the output limit.
  void check_size(uint64_t size, const SourcePos& pos) const;
  const std::optional<std::tm>& now() const { return now_; }
  Value call_macro(const Stmt& macro, CallArgs& args);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Scope = std::unordered_map<std::string, Value>;

  Flow exec_body(const Body& body, std::string& out);
  Flow exec(const Stmt& s, std::string& out);
  void exec_for(const Stmt& s, std::string& out);
  void assign(const Stmt& s, Value value);

  Value eval(const Expr& e);
  Value eval_binary(const Expr& e);
  Value eval_compare(const Expr& e);
  Value eval_call(const Expr& e);
  Value eval_attr(const Value& obj, const std::string& name, const SourcePos& pos);
  Value eval_item(const Value& obj, const Value& key, const SourcePos& pos);
  Value eval_slice(const Expr& e);
  Value call_method(const Value& obj, const std::string& name, CallArgs& args,
                    const SourcePos& pos);
  Value apply_filter(const std::string& name, const Value& input, CallArgs& args,
                     const SourcePos& pos);
  bool apply_test(const std::string& name, const Value& input, CallArgs& args,
                  const SourcePos& pos);
  CallArgs eval_args(const Expr& e, size_t first_kid);
  std::vector<Value> iterate(const Value& v, const SourcePos& pos);

  Value lookup(const std::string& name) const;
  void set_var(const std::string& name, Value value);
  void append_output(std::string& out, const std::string& text, const SourcePos& pos);
  [[noreturn]] void fail(const SourcePos& pos, const std::string& message) const;
  void require_defined(const Value& v, const SourcePos& pos) const;

  RenderLimits limits_;
  std::optional<std::tm> now_;
  std::vector<Scope> scopes_;   // scopes_[0] holds the globals
  std::vector<size_t> floors_;  // macro bodies see only scopes_[0] and scopes from their floor
  uint64_t iterations_ = 0;
  uint32_t depth_ = 0;
  friend struct DepthScope;
};

}  // namespace roofline::jinja
