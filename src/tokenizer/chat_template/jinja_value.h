// Jinja runtime values with Python semantics: what a chat template sees and computes.
//
// Chat templates are written against Python objects (str, int, float, bool, None, list, tuple,
// dict, jinja's Undefined and Namespace), and their output depends on Python's rules: str(True) is
// "True", len() counts code points, dicts keep insertion order, 1 == 1.0 == True. Value mirrors
// those rules so rendered prompts match transformers byte for byte. Lists, dicts and namespaces are
// shared by reference, as in Python, because `ns.x = ...` must be visible through every alias.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace roofline::jinja {

// Raised inside the interpreter and turned into a Status at the ChatTemplate boundary: evaluation
// is deeply recursive, and one unwinding error type keeps every evaluator line free of plumbing.
// `kind` picks the Status code.
struct TemplateError : std::runtime_error {
  enum class Kind { kSyntax, kUnsupported, kRuntime, kRaised, kLimit };
  TemplateError(Kind k, const std::string& message) : std::runtime_error(message), kind(k) {}
  Kind kind;
};

[[noreturn]] void throw_runtime(const std::string& message);

class Value;
class Interpreter;

class Dict;
struct CallArgs;
using NativeFunction = std::function<Value(Interpreter&, CallArgs&)>;

class Value {
 public:
  enum class Type { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

  Value() = default;  // Undefined
  static Value undefined(std::string name_hint);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value floating(double f);
  static Value string(std::string s);
  static Value list(std::vector<Value> items, bool is_tuple = false);
  static Value dict();
  static Value namespace_object();
  static Value function(std::string name, NativeFunction fn);

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::kUndefined; }
  bool is_none() const { return type_ == Type::kNone; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_int() const { return type_ == Type::kInt; }
  bool is_float() const { return type_ == Type::kFloat; }
  bool is_number() const { return is_bool() || is_int() || is_float(); }  // Python: bool is an int
  bool is_string() const { return type_ == Type::kString; }
  bool is_list() const { return type_ == Type::kList; }
  bool is_tuple() const { return type_ == Type::kList && is_tuple_; }
  bool is_dict() const { return type_ == Type::kDict; }
  bool is_namespace() const { return type_ == Type::kDict && is_namespace_; }
  bool is_function() const { return type_ == Type::kFunction; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return is_bool() ? (b_ ? 1 : 0) : i_; }  // for bool and int
  double as_double() const { return is_float() ? f_ : static_cast<double>(as_int()); }
  const std::string& as_string() const { return s_; }
  std::vector<Value>& list_items() const { return *list_; }
  Dict& dict_items() const { return *dict_; }
  const std::string& name() const { return s_; }  // Undefined's variable name, function name
  Value call(Interpreter& interp, CallArgs& args) const { return (*fn_)(interp, args); }

  bool truthy() const;
  // Python str(): what {{ value }}, `~` and |string produce. Undefined is "".
  std::string str() const;
  // Python repr(): how items print inside str() of a list or dict.
  std::string repr() const;
  // Python's type name, for error messages ("'str' and 'int'").
  const char* type_name() const;

 private:
  Type type_ = Type::kUndefined;
  bool is_tuple_ = false;
  bool is_namespace_ = false;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0.0;
  std::string s_;
  std::shared_ptr<std::vector<Value>> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<NativeFunction> fn_;
};

// Positional and keyword arguments of a call.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// An insertion-ordered str-keyed dict (JSON objects and template dict literals only use str keys).
class Dict {
 public:
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value value);
  size_t size() const { return items_.size(); }
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }

 private:
  std::vector<std::pair<std::string, Value>> items_;
  std::unordered_map<std::string, size_t> index_;
};

// Python ==, with 1 == 1.0 == True and deep list/dict comparison.
bool values_equal(const Value& a, const Value& b);
// Python <; throws for unorderable types ("'<' not supported between 'str' and 'int'").
bool values_less(const Value& a, const Value& b);

// Python's repr() of a float ("1.0", "0.1", "1e+16", "inf").
std::string python_float_repr(double f);

// json.dumps(value, ensure_ascii=False, indent=..., separators=..., sort_keys=...), as
// transformers' tojson filter calls it. indent < 0 means None.
struct JsonOptions {
  int indent = -1;
  std::string item_separator;  // empty: Python's default for the indent mode
  std::string key_separator;
  bool sort_keys = false;
};
std::string to_json(const Value& value, const JsonOptions& options);

// UTF-8 helpers: Python indexes strings by code point.
std::vector<size_t> utf8_code_point_offsets(const std::string& s);  // start byte of each, plus end
bool is_python_space(uint32_t code_point);

}  // namespace roofline::jinja
