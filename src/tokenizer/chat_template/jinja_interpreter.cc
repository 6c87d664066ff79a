// Jinja2 interpreter for chat templates. Semantics follow jinja2 3.1 + Python 3 as configured by
// transformers' _compile_jinja_template; each deviation a template could observe is an error.
#include "tokenizer/chat_template/jinja_interpreter.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <unordered_set>

#include "tokenizer/chat_template/jinja_parser.h"

namespace roofline::jinja {

namespace {

// jinja2.sandbox.MAX_RANGE: the sandbox refuses larger ranges, so templates never rely on them.
constexpr int64_t kMaxRange = 100000;

const Value* find_kwarg(CallArgs& args, const char* name) {
  for (auto& [k, v] : args.keyword) {
    if (k == name) return &v;
  }
  return nullptr;
}

// Positional argument i, else keyword `name`, else null.
const Value* arg(CallArgs& args, size_t i, const char* name) {
  if (i < args.positional.size()) return &args.positional[i];
  return find_kwarg(args, name);
}

std::vector<std::string> code_points(const std::string& s) {
  auto offsets = utf8_code_point_offsets(s);
  std::vector<std::string> out;
  out.reserve(offsets.size() - 1);
  for (size_t i = 0; i + 1 < offsets.size(); ++i)
    out.push_back(s.substr(offsets[i], offsets[i + 1] - offsets[i]));
  return out;
}

bool is_space_at(const std::string& s, size_t begin, size_t end) {
  if (end - begin == 1) return is_python_space(static_cast<unsigned char>(s[begin]));
  uint32_t cp = 0;
  unsigned char c = static_cast<unsigned char>(s[begin]);
  cp = (end - begin == 2) ? (c & 0x1F) : (end - begin == 3) ? (c & 0x0F) : (c & 0x07);
  for (size_t i = begin + 1; i < end; ++i)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i]) & 0x3F);
  return is_python_space(cp);
}

// str.strip / lstrip / rstrip: whitespace by default, else any code point of `chars`.
std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
  auto offsets = utf8_code_point_offsets(s);
  std::vector<std::string> strip_set;
  bool by_space = !chars || chars->is_none() || chars->is_undefined();
  if (!by_space) {
    if (!chars->is_string()) throw_runtime("strip arg must be None or str");
    strip_set = code_points(chars->as_string());
  }
  auto strippable = [&](size_t i) {
    if (by_space) return is_space_at(s, offsets[i], offsets[i + 1]);
    std::string cp = s.substr(offsets[i], offsets[i + 1] - offsets[i]);
    return std::find(strip_set.begin(), strip_set.end(), cp) != strip_set.end();
  };
  size_t n = offsets.size() - 1;
  size_t b = 0, e = n;
  if (left) {
    while (b < e && strippable(b)) ++b;
  }
  if (right) {
    while (e > b && strippable(e - 1)) --e;
  }
  return s.substr(offsets[b], offsets[e] - offsets[b]);
}

std::vector<Value> split(const std::string& s, const Value* sep, int64_t maxsplit) {
  std::vector<Value> out;
  if (!sep || sep->is_none()) {
    auto offsets = utf8_code_point_offsets(s);
    size_t n = offsets.size() - 1, i = 0;
    while (true) {
      while (i < n && is_space_at(s, offsets[i], offsets[i + 1])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = n;
        while (e > i && is_space_at(s, offsets[e - 1], offsets[e])) --e;
        out.push_back(Value::string(s.substr(offsets[i], offsets[e] - offsets[i])));
        break;
      }
      size_t j = i;
      while (j < n && !is_space_at(s, offsets[j], offsets[j + 1])) ++j;
      out.push_back(Value::string(s.substr(offsets[i], offsets[j] - offsets[i])));
      i = j;
    }
    return out;
  }
  if (!sep->is_string()) throw_runtime("must be str or None, not " + std::string(sep->type_name()));
  const std::string& d = sep->as_string();
  if (d.empty()) throw_runtime("empty separator");
  size_t start = 0;
  while (true) {
    size_t hit = s.find(d, start);
    if (hit == std::string::npos ||
        (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit)) {
      out.push_back(Value::string(s.substr(start)));
      break;
    }
    out.push_back(Value::string(s.substr(start, hit - start)));
    start = hit + d.size();
  }
  return out;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to,
                        int64_t count, uint64_t limit) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` around every code point.
    auto cps = code_points(s);
    int64_t done = 0;
    for (const auto& cp : cps) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      out += cp;
      if (out.size() > limit)
        throw TemplateError(TemplateError::Kind::kLimit, "replace: result too large");
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t hit = s.find(from, start);
    if (hit == std::string::npos) break;
    out.append(s, start, hit - start);
    out += to;
    start = hit + from.size();
    ++done;
    if (out.size() > limit)
      throw TemplateError(TemplateError::Kind::kLimit, "replace: result too large");
  }
  out.append(s, start, std::string::npos);
  return out;
}

std::string ascii_upper(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  }
  return s;
}
std::string ascii_lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  }
  return s;
}
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
std::string ascii_capitalize(const std::string& s) {
  std::string out = ascii_lower(s);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 32);
  return out;
}
std::string ascii_title(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    if (is_alpha(c)) {
      c = prev_cased ? (c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c)
                     : (c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c);
      prev_cased = true;
    } else {
      prev_cased = false;
    }
  }
  return out;
}

int64_t checked(bool overflow, int64_t v) {
  if (overflow) throw_runtime("integer overflow: this engine's integers are 64-bit");
  return v;
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) throw_runtime("integer division or modulo by zero");
  if (a == std::numeric_limits<int64_t>::min() && b == -1) throw_runtime("integer overflow");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// Whether `dict` is reachable from `value` through lists, dicts and namespaces. Values share
// lists, dicts and namespaces by reference, so storing a value into a namespace it reaches would
// make a reference cycle, which reference counting never frees. `seen` keeps a DAG of shared
// containers from being walked once per path.
bool reaches(const Value& value, const Dict* dict, std::unordered_set<const void*>* seen) {
  const void* container = value.is_dict()   ? static_cast<const void*>(&value.dict_items())
                          : value.is_list() ? static_cast<const void*>(&value.list_items())
                                            : nullptr;
  if (container == nullptr) return false;
  if (container == dict) return true;
  if (!seen->insert(container).second) return false;
  if (value.is_list()) {
    for (const Value& item : value.list_items())
      if (reaches(item, dict, seen)) return true;
    return false;
  }
  for (const auto& item : value.dict_items().items())
    if (reaches(item.second, dict, seen)) return true;
  return false;
}

}  // namespace

struct DepthScope {
  DepthScope(Interpreter& in, const SourcePos& pos) : interp(in) {
    if (++interp.depth_ > interp.limits_.max_depth) {
      throw TemplateError(
          TemplateError::Kind::kLimit,
          at(pos, "rendering recursed deeper than the limit of " +
                      std::to_string(interp.limits_.max_depth) + " levels (a recursive macro?)"));
    }
  }
  ~DepthScope() { --interp.depth_; }
  Interpreter& interp;
};

Interpreter::Interpreter(const RenderLimits& limits, std::optional<std::tm> now)
    : limits_(limits), now_(now) {}

void Interpreter::fail(const SourcePos& pos, const std::string& message) const {
  throw TemplateError(TemplateError::Kind::kRuntime, at(pos, message));
}

void Interpreter::check_size(uint64_t size, const SourcePos& pos) const {
  if (size > limits_.max_output_bytes) {
    throw TemplateError(TemplateError::Kind::kLimit,
                        at(pos, "a value or the output grew past the limit of " +
                                    std::to_string(limits_.max_output_bytes) + " bytes"));
  }
}

void Interpreter::require_defined(const Value& v, const SourcePos& pos) const {
  if (v.is_undefined())
    fail(pos, "'" + (v.name().empty() ? std::string("value") : v.name()) + "' is undefined");
}

void Interpreter::append_output(std::string& out, const std::string& text, const SourcePos& pos) {
  check_size(out.size() + text.size(), pos);
  out += text;
}

Value Interpreter::lookup(const std::string& name) const {
  size_t floor = floors_.empty() ? 0 : floors_.back();
  for (size_t i = scopes_.size(); i-- > floor;) {
    auto it = scopes_[i].find(name);
    if (it != scopes_[i].end()) return it->second;
  }
  if (floor > 0) {
    auto it = scopes_[0].find(name);
    if (it != scopes_[0].end()) return it->second;
  }
  return Value::undefined(name);
}

void Interpreter::set_var(const std::string& name, Value value) {
  scopes_.back()[name] = std::move(value);
}

std::string Interpreter::render(const Template& tmpl,
                                const std::vector<std::pair<std::string, Value>>& globals) {
  scopes_.assign(1, Scope{});
  Scope& g = scopes_[0];
  for (const auto& [k, v] : globals) g[k] = v;
  g["raise_exception"] = Value::function("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
    const Value* m = arg(a, 0, "message");
    throw TemplateError(TemplateError::Kind::kRaised, m ? m->str() : std::string());
  });
  g["strftime_now"] = Value::function("strftime_now", [](Interpreter& in, CallArgs& a) -> Value {
    const Value* f = arg(a, 0, "format");
    if (!f || !f->is_string()) throw_runtime("strftime_now(format) needs a format string");
    std::tm t{};
    if (in.now()) {
      t = *in.now();
    } else {
      std::time_t now = std::time(nullptr);
      localtime_r(&now, &t);
    }
    char buf[512];
    size_t n = std::strftime(buf, sizeof(buf), f->as_string().c_str(), &t);
    if (n == 0 && !f->as_string().empty())
      throw_runtime("strftime_now: format too long or empty result");
    return Value::string(std::string(buf, n));
  });
  auto make_dict = [](bool ns) {
    return [ns](Interpreter&, CallArgs& a) -> Value {
      Value d = ns ? Value::namespace_object() : Value::dict();
      if (!a.positional.empty()) {
        if (a.positional.size() > 1 || !a.positional[0].is_dict()) {
          throw_runtime(std::string(ns ? "namespace" : "dict") +
                        "() takes at most one dict argument");
        }
        for (const auto& [k, v] : a.positional[0].dict_items().items()) d.dict_items().set(k, v);
      }
      for (auto& [k, v] : a.keyword) {
        if (ns && !k.empty() && k[0] == '_') {
          throw_runtime(
              "Chat templates cannot store underscore-prefixed attributes on a namespace, but got "
              "'" +
              k + "'");
        }
        d.dict_items().set(k, v);
      }
      return d;
    };
  };
  g["namespace"] = Value::function("namespace", make_dict(true));
  g["dict"] = Value::function("dict", make_dict(false));
  g["range"] = Value::function("range", [](Interpreter&, CallArgs& a) -> Value {
    int64_t start = 0, stop = 0, step = 1;
    for (const auto& v : a.positional) {
      if (!v.is_int() && !v.is_bool()) throw_runtime("range() takes integer arguments");
    }
    if (a.positional.size() == 1) {
      stop = a.positional[0].as_int();
    } else if (a.positional.size() == 2 || a.positional.size() == 3) {
      start = a.positional[0].as_int();
      stop = a.positional[1].as_int();
      if (a.positional.size() == 3) step = a.positional[2].as_int();
    } else {
      throw_runtime("range() takes 1 to 3 integer arguments");
    }
    if (step == 0) throw_runtime("range() arg 3 must not be zero");
    __int128 count = step > 0 ? (static_cast<__int128>(stop) - start + step - 1) / step
                              : (static_cast<__int128>(start) - stop - step - 1) / -step;
    if (count < 0) count = 0;
    if (count > kMaxRange) {
      throw TemplateError(
          TemplateError::Kind::kLimit,
          "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    std::vector<Value> items;
    for (__int128 i = 0; i < count; ++i)
      items.push_back(Value::integer(static_cast<int64_t>(start + i * step)));
    return Value::list(std::move(items));
  });
  floors_.clear();
  iterations_ = 0;
  depth_ = 0;
  std::string out;
  exec_body(tmpl.body, out);
  return out;
}

Interpreter::Flow Interpreter::exec_body(const Body& body, std::string& out) {
  for (const auto& s : body) {
    Flow f = exec(*s, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s, std::string& out) {
  DepthScope depth(*this, s.pos);
  switch (s.kind) {
    case Stmt::Kind::kText:
      append_output(out, s.text, s.pos);
      return Flow::kNormal;
    case Stmt::Kind::kOutput:
      append_output(out, eval(*s.expr).str(), s.pos);
      return Flow::kNormal;
    case Stmt::Kind::kIf:
      for (size_t i = 0; i < s.conditions.size(); ++i) {
        if (eval(*s.conditions[i]).truthy()) return exec_body(s.bodies[i], out);
      }
      if (s.bodies.size() > s.conditions.size()) return exec_body(s.bodies.back(), out);
      return Flow::kNormal;
    case Stmt::Kind::kFor:
      exec_for(s, out);
      return Flow::kNormal;
    case Stmt::Kind::kSet:
      assign(s, eval(*s.expr));
      return Flow::kNormal;
    case Stmt::Kind::kSetBlock: {
      std::string captured;
      exec_body(s.bodies[0], captured);
      assign(s, Value::string(std::move(captured)));
      return Flow::kNormal;
    }
    case Stmt::Kind::kMacro: {
      const Stmt* macro = &s;
      set_var(s.text, Value::function(s.text, [macro](Interpreter& in, CallArgs& a) {
                return in.call_macro(*macro, a);
              }));
      return Flow::kNormal;
    }
    case Stmt::Kind::kBreak:
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      return Flow::kContinue;
    case Stmt::Kind::kGeneration:
      return exec_body(s.bodies[0], out);
  }
  return Flow::kNormal;
}

Value Interpreter::call_macro(const Stmt& macro, CallArgs& args) {
  DepthScope depth(*this, macro.pos);
  if (args.positional.size() > macro.targets.size()) {
    fail(macro.pos, "macro '" + macro.text + "' takes " + std::to_string(macro.targets.size()) +
                        " arguments, got " + std::to_string(args.positional.size()));
  }
  Scope scope;
  for (size_t i = 0; i < macro.targets.size(); ++i) {
    const Value* v = arg(args, i, macro.targets[i].c_str());
    if (v) {
      scope[macro.targets[i]] = *v;
    } else if (macro.defaults[i]) {
      scope[macro.targets[i]] = eval(*macro.defaults[i]);
    } else {
      scope[macro.targets[i]] = Value::undefined(macro.targets[i]);
    }
  }
  for (const auto& [k, v] : args.keyword) {
    if (std::find(macro.targets.begin(), macro.targets.end(), k) == macro.targets.end()) {
      fail(macro.pos, "macro '" + macro.text + "' takes no keyword argument '" + k + "'");
    }
  }
  floors_.push_back(scopes_.size());
  scopes_.push_back(std::move(scope));
  std::string out;
  struct Restore {
    Interpreter* in;
    ~Restore() {
      in->scopes_.pop_back();
      in->floors_.pop_back();
    }
  } restore{this};
  exec_body(macro.bodies[0], out);
  return Value::string(std::move(out));
}

void Interpreter::assign(const Stmt& s, Value value) {
  if (!s.text.empty() && s.kind == Stmt::Kind::kSet) {
    Value target = lookup(s.targets[0]);
    if (!target.is_namespace()) {
      fail(s.pos, "cannot assign attribute '" + s.text + "' on '" + s.targets[0] +
                      "': only namespace() objects take attribute assignment");
    }
    if (!s.text.empty() && s.text[0] == '_') {
      fail(s.pos, "Chat templates cannot store underscore-prefixed attributes on a namespace");
    }
    std::unordered_set<const void*> seen;
    if (reaches(value, &target.dict_items(), &seen)) {
      fail(s.pos, "cannot store namespace '" + s.targets[0] + "' inside itself (attribute '" +
                      s.text + "'): chat templates cannot build self-referencing values");
    }
    target.dict_items().set(s.text, std::move(value));
    return;
  }
  if (s.targets.size() == 1) {
    set_var(s.targets[0], std::move(value));
    return;
  }
  std::vector<Value> items = iterate(value, s.pos);
  if (items.size() != s.targets.size()) {
    fail(s.pos, "cannot unpack " + std::to_string(items.size()) + " values into " +
                    std::to_string(s.targets.size()) + " variables");
  }
  for (size_t i = 0; i < items.size(); ++i) set_var(s.targets[i], items[i]);
}

std::vector<Value> Interpreter::iterate(const Value& v, const SourcePos& pos) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      return {};  // jinja's Undefined iterates as empty
    case Value::Type::kList:
      return v.list_items();
    case Value::Type::kDict: {
      std::vector<Value> keys;
      for (const auto& [k, x] : v.dict_items().items()) keys.push_back(Value::string(k));
      return keys;
    }
    case Value::Type::kString: {
      std::vector<Value> out;
      for (auto& cp : code_points(v.as_string())) out.push_back(Value::string(std::move(cp)));
      return out;
    }
    default:
      fail(pos, std::string("'") + v.type_name() + "' object is not iterable");
  }
}

void Interpreter::exec_for(const Stmt& s, std::string& out) {
  std::vector<Value> items = iterate(eval(*s.expr), s.expr->pos);
  auto bind = [&](Scope& scope, const Value& item) {
    if (s.targets.size() == 1) {
      scope[s.targets[0]] = item;
      return;
    }
    if (!item.is_list() || item.list_items().size() != s.targets.size()) {
      fail(s.pos,
           "cannot unpack a loop item into " + std::to_string(s.targets.size()) + " variables");
    }
    for (size_t i = 0; i < s.targets.size(); ++i) scope[s.targets[i]] = item.list_items()[i];
  };
  if (s.condition) {
    std::vector<Value> kept;
    for (const auto& item : items) {
      if (++iterations_ > limits_.max_loop_iterations) break;
      scopes_.emplace_back();
      bind(scopes_.back(), item);
      bool keep = false;
      try {
        keep = eval(*s.condition).truthy();
      } catch (...) {
        scopes_.pop_back();
        throw;
      }
      scopes_.pop_back();
      if (keep) kept.push_back(item);
    }
    items = std::move(kept);
  }
  const size_t n = items.size();
  for (size_t i = 0; i < n; ++i) {
    if (++iterations_ > limits_.max_loop_iterations) {
      throw TemplateError(
          TemplateError::Kind::kLimit,
          at(s.pos, "loops ran more than the limit of " +
                        std::to_string(limits_.max_loop_iterations) + " iterations in one render"));
    }
    Value loop = Value::dict();
    Dict& d = loop.dict_items();
    int64_t len = static_cast<int64_t>(n), idx = static_cast<int64_t>(i);
    d.set("index", Value::integer(idx + 1));
    d.set("index0", Value::integer(idx));
    d.set("revindex", Value::integer(len - idx));
    d.set("revindex0", Value::integer(len - idx - 1));
    d.set("first", Value::boolean(i == 0));
    d.set("last", Value::boolean(i + 1 == n));
    d.set("length", Value::integer(len));
    d.set("depth", Value::integer(1));
    d.set("depth0", Value::integer(0));
    d.set("previtem", i > 0 ? items[i - 1] : Value::undefined("loop.previtem"));
    d.set("nextitem", i + 1 < n ? items[i + 1] : Value::undefined("loop.nextitem"));
    // Jinja gives each iteration a fresh scope: a `set` in one iteration is gone in the next.
    scopes_.emplace_back();
    bind(scopes_.back(), items[i]);
    scopes_.back()["loop"] = loop;
    Flow f;
    try {
      f = exec_body(s.bodies[0], out);
    } catch (...) {
      scopes_.pop_back();
      throw;
    }
    scopes_.pop_back();
    if (f == Flow::kBreak) break;
  }
  if (n == 0 && s.bodies.size() > 1) exec_body(s.bodies[1], out);
}

CallArgs Interpreter::eval_args(const Expr& e, size_t first_kid) {
  CallArgs args;
  size_t num_keyword = e.keyword_names.size();
  size_t num_positional = e.kids.size() - first_kid - num_keyword;
  for (size_t i = 0; i < num_positional; ++i)
    args.positional.push_back(eval(*e.kids[first_kid + i]));
  for (size_t i = 0; i < num_keyword; ++i) {
    args.keyword.emplace_back(e.keyword_names[i], eval(*e.kids[first_kid + num_positional + i]));
  }
  return args;
}

Value Interpreter::eval(const Expr& e) {
  DepthScope depth(*this, e.pos);
  switch (e.kind) {
    case Expr::Kind::kConst:
      return e.value;
    case Expr::Kind::kName:
      return lookup(e.name);
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      std::vector<Value> items;
      for (const auto& k : e.kids) items.push_back(eval(*k));
      return Value::list(std::move(items), e.kind == Expr::Kind::kTuple);
    }
    case Expr::Kind::kDict: {
      Value d = Value::dict();
      for (size_t i = 0; i + 1 < e.kids.size(); i += 2) {
        Value k = eval(*e.kids[i]);
        if (!k.is_string()) fail(e.kids[i]->pos, "dict keys must be strings in this engine");
        d.dict_items().set(k.as_string(), eval(*e.kids[i + 1]));
      }
      return d;
    }
    case Expr::Kind::kAttr:
      return eval_attr(eval(*e.kids[0]), e.name, e.pos);
    case Expr::Kind::kItem:
      return eval_item(eval(*e.kids[0]), eval(*e.kids[1]), e.pos);
    case Expr::Kind::kSlice:
      return eval_slice(e);
    case Expr::Kind::kCall:
      return eval_call(e);
    case Expr::Kind::kFilter: {
      Value input = eval(*e.kids[0]);
      CallArgs args = eval_args(e, 1);
      return apply_filter(e.name, input, args, e.pos);
    }
    case Expr::Kind::kTest: {
      Value input = eval(*e.kids[0]);
      CallArgs args = eval_args(e, 1);
      return Value::boolean(apply_test(e.name, input, args, e.pos) != e.negated);
    }
    case Expr::Kind::kNot:
      return Value::boolean(!eval(*e.kids[0]).truthy());
    case Expr::Kind::kNeg:
    case Expr::Kind::kPos: {
      Value v = eval(*e.kids[0]);
      require_defined(v, e.pos);
      if (!v.is_number())
        fail(e.pos, std::string("bad operand type for unary ") +
                        (e.kind == Expr::Kind::kNeg ? "-" : "+") + ": '" + v.type_name() + "'");
      if (e.kind == Expr::Kind::kPos) return v.is_bool() ? Value::integer(v.as_int()) : v;
      if (v.is_float()) return Value::floating(-v.as_double());
      if (v.as_int() == std::numeric_limits<int64_t>::min()) fail(e.pos, "integer overflow");
      return Value::integer(-v.as_int());
    }
    case Expr::Kind::kBinary:
      return eval_binary(e);
    case Expr::Kind::kCompare:
      return eval_compare(e);
    case Expr::Kind::kCondition:
      if (eval(*e.kids[1]).truthy()) return eval(*e.kids[0]);
      return e.kids[2] ? eval(*e.kids[2]) : Value::undefined("the else branch of an if expression");
  }
  return Value();
}

Value Interpreter::eval_attr(const Value& obj, const std::string& name, const SourcePos& pos) {
  require_defined(obj, pos);
  if (obj.is_dict()) {
    const Value* v = obj.dict_items().find(name);
    if (v) return *v;
    return Value::undefined(std::string(obj.is_namespace() ? "namespace" : "dict object") +
                            " has no attribute '" + name + "'");
  }
  return Value::undefined(std::string(obj.type_name()) + " object has no attribute '" + name + "'");
}

Value Interpreter::eval_item(const Value& obj, const Value& key, const SourcePos& pos) {
  require_defined(obj, pos);
  if (obj.is_dict() && key.is_string()) {
    const Value* v = obj.dict_items().find(key.as_string());
    if (v) return *v;
    return Value::undefined("dict object has no element '" + key.as_string() + "'");
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      int64_t n = static_cast<int64_t>(obj.list_items().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n)
        return Value::undefined(std::string(obj.type_name()) + " object has no element " +
                                std::to_string(key.as_int()));
      return obj.list_items()[static_cast<size_t>(i)];
    }
    auto offsets = utf8_code_point_offsets(obj.as_string());
    int64_t n = static_cast<int64_t>(offsets.size()) - 1;
    if (i < 0) i += n;
    if (i < 0 || i >= n)
      return Value::undefined("str object has no element " + std::to_string(key.as_int()));
    size_t b = offsets[static_cast<size_t>(i)], e = offsets[static_cast<size_t>(i) + 1];
    return Value::string(obj.as_string().substr(b, e - b));
  }
  if (key.is_string()) return eval_attr(obj, key.as_string(), pos);
  return Value::undefined(std::string(obj.type_name()) + " object has no element " + key.repr());
}

Value Interpreter::eval_slice(const Expr& e) {
  Value obj = eval(*e.kids[0]);
  require_defined(obj, e.pos);
  auto bound = [&](size_t k) -> std::optional<int64_t> {
    if (!e.kids[k]) return std::nullopt;
    Value v = eval(*e.kids[k]);
    if (v.is_none()) return std::nullopt;
    if (!v.is_int() && !v.is_bool()) fail(e.kids[k]->pos, "slice indices must be integers or None");
    return v.as_int();
  };
  std::optional<int64_t> start = bound(1), stop = bound(2), step_opt = bound(3);
  int64_t step = step_opt.value_or(1);
  if (step == 0) fail(e.pos, "slice step cannot be zero");
  std::vector<std::string> chars;
  const bool is_str = obj.is_string();
  if (is_str)
    chars = code_points(obj.as_string());
  else if (!obj.is_list())
    fail(e.pos, std::string("'") + obj.type_name() + "' object is not subscriptable");
  int64_t n = static_cast<int64_t>(is_str ? chars.size() : obj.list_items().size());
  // Python's slice.indices().
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) -> int64_t {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  int64_t b = clamp(start, step < 0 ? n - 1 : 0);
  int64_t en = clamp(stop, step < 0 ? -1 : n);
  std::vector<Value> items;
  std::string s;
  for (int64_t i = b; step > 0 ? i < en : i > en; i += step) {
    if (is_str)
      s += chars[static_cast<size_t>(i)];
    else
      items.push_back(obj.list_items()[static_cast<size_t>(i)]);
  }
  if (is_str) return Value::string(std::move(s));
  return Value::list(std::move(items), obj.is_tuple());
}

Value Interpreter::eval_call(const Expr& e) {
  const Expr& callee = *e.kids[0];
  if (callee.kind == Expr::Kind::kAttr) {
    Value obj = eval(*callee.kids[0]);
    require_defined(obj, callee.pos);
    if (obj.is_string() || (obj.is_dict() && !obj.is_namespace()) || obj.is_list()) {
      CallArgs args = eval_args(e, 1);
      return call_method(obj, callee.name, args, callee.pos);
    }
    Value fn = eval_attr(obj, callee.name, callee.pos);
    if (!fn.is_function()) fail(callee.pos, "'" + callee.name + "' is not callable");
    CallArgs args = eval_args(e, 1);
    return fn.call(*this, args);
  }
  Value fn = eval(callee);
  if (fn.is_undefined()) {
    fail(callee.pos,
         "'" + fn.name() + "' is undefined" +
             (callee.kind == Expr::Kind::kName ? " (not a function this engine provides)" : ""));
  }
  if (!fn.is_function())
    fail(callee.pos, std::string("'") + fn.type_name() + "' object is not callable");
  CallArgs args = eval_args(e, 1);
  try {
    return fn.call(*this, args);
  } catch (const TemplateError& err) {
    // Native errors carry no position; add the call's.
    if (err.kind == TemplateError::Kind::kRuntime &&
        std::string(err.what()).rfind("line ", 0) != 0) {
      fail(e.pos, err.what());
    }
    throw;
  }
}

Value Interpreter::call_method(const Value& obj, const std::string& name, CallArgs& args,
                               const SourcePos& pos) {
  if (obj.is_string()) {
    const std::string& s = obj.as_string();
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      return Value::string(strip(s, arg(args, 0, "chars"), name != "rstrip", name != "lstrip"));
    }
    if (name == "startswith" || name == "endswith") {
      const Value* a = arg(args, 0, "prefix");
      if (!a) fail(pos, name + "() takes at least 1 argument");
      std::vector<Value> options = a->is_tuple() ? a->list_items() : std::vector<Value>{*a};
      for (const auto& o : options) {
        if (!o.is_string()) fail(pos, name + " first arg must be str or a tuple of str");
        const std::string& p = o.as_string();
        bool hit = name == "startswith"
                       ? s.compare(0, p.size(), p) == 0 && s.size() >= p.size()
                       : s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
        if (hit) return Value::boolean(true);
      }
      return Value::boolean(false);
    }
    if (name == "split" || (name == "rsplit" && !arg(args, 1, "maxsplit"))) {
      const Value* m = arg(args, 1, "maxsplit");
      return Value::list(split(s, arg(args, 0, "sep"), m ? m->as_int() : -1));
    }
    if (name == "replace") {
      const Value* from = arg(args, 0, "old");
      const Value* to = arg(args, 1, "new");
      const Value* count = arg(args, 2, "count");
      if (!from || !to || !from->is_string() || !to->is_string())
        fail(pos, "replace() takes two strings");
      return Value::string(replace_all(s, from->as_string(), to->as_string(),
                                       count ? count->as_int() : -1, limits_.max_output_bytes));
    }
    if (name == "upper") return Value::string(ascii_upper(s));
    if (name == "lower") return Value::string(ascii_lower(s));
    if (name == "title") return Value::string(ascii_title(s));
    if (name == "capitalize") return Value::string(ascii_capitalize(s));
    if (name == "find" || name == "count") {
      const Value* sub = arg(args, 0, "sub");
      if (!sub || !sub->is_string()) fail(pos, name + "() needs a string argument");
      if (name == "find") {
        size_t hit = s.find(sub->as_string());
        if (hit == std::string::npos) return Value::integer(-1);
        return Value::integer(
            static_cast<int64_t>(utf8_code_point_offsets(s.substr(0, hit)).size() - 1));
      }
      if (sub->as_string().empty())
        return Value::integer(static_cast<int64_t>(utf8_code_point_offsets(s).size()));
      int64_t n = 0;
      for (size_t at_pos = s.find(sub->as_string()); at_pos != std::string::npos;
           at_pos = s.find(sub->as_string(), at_pos + sub->as_string().size())) {
        ++n;
      }
      return Value::integer(n);
    }
    if (name == "join") {
      const Value* items = arg(args, 0, "iterable");
      if (!items) fail(pos, "join() takes one argument");
      std::string out;
      bool first = true;
      for (const auto& v : iterate(*items, pos)) {
        if (!v.is_string())
          fail(pos,
               "sequence item: expected str instance, " + std::string(v.type_name()) + " found");
        if (!first) out += s;
        first = false;
        out += v.as_string();
        check_size(out.size(), pos);
      }
      return Value::string(std::move(out));
    }
    fail(pos, "unsupported string method '" + name + "'");
  }
  if (obj.is_dict()) {
    if (name == "items" || name == "keys" || name == "values") {
      std::vector<Value> out;
      for (const auto& [k, v] : obj.dict_items().items()) {
        if (name == "items")
          out.push_back(Value::list({Value::string(k), v}, true));
        else if (name == "keys")
          out.push_back(Value::string(k));
        else
          out.push_back(v);
      }
      return Value::list(std::move(out));
    }
    if (name == "get") {
      const Value* key = arg(args, 0, "key");
      const Value* dflt = arg(args, 1, "default");
      if (!key) fail(pos, "get() takes at least 1 argument");
      if (key->is_string()) {
        const Value* v = obj.dict_items().find(key->as_string());
        if (v) return *v;
      }
      return dflt ? *dflt : Value::none();
    }
    // A dict may hold a callable under that key (rare); otherwise the method is unknown.
    const Value* v = obj.dict_items().find(name);
    if (v && v->is_function()) return v->call(*this, args);
    fail(pos, "unsupported dict method '" + name + "'");
  }
  static const char* kMutators[] = {"append", "extend", "insert", "pop",
                                    "remove", "clear",  "sort",   "reverse"};
  for (const char* m : kMutators) {
    if (name == m) {
      fail(pos, "access to attribute '" + name +
                    "' of 'list' object is unsafe: transformers renders "
                    "chat templates in an immutable sandbox, which refuses to modify lists");
    }
  }
  fail(pos, "unsupported list method '" + name + "'");
}

Value Interpreter::eval_binary(const Expr& e) {
  const std::string& op = e.name;
  if (op == "and" || op == "or") {
    Value left = eval(*e.kids[0]);
    if (op == "and" ? !left.truthy() : left.truthy()) return left;
    return eval(*e.kids[1]);
  }
  Value a = eval(*e.kids[0]);
  Value b = eval(*e.kids[1]);
  if (op == "~") {
    std::string sa = a.str(), sb = b.str();
    check_size(sa.size() + sb.size(), e.pos);
    return Value::string(sa + sb);
  }
  require_defined(a, e.kids[0]->pos);
  require_defined(b, e.kids[1]->pos);
  auto type_error = [&]() {
    fail(e.pos, "unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" +
                    b.type_name() + "'");
  };
  if (a.is_number() && b.is_number()) {
    bool use_float = a.is_float() || b.is_float() || op == "/";
    if (op == "**" && !use_float && b.as_int() < 0) use_float = true;
    if (use_float) {
      double x = a.as_double(), y = b.as_double();
      if (op == "+") return Value::floating(x + y);
      if (op == "-") return Value::floating(x - y);
      if (op == "*") return Value::floating(x * y);
      if (op == "/" || op == "//" || op == "%") {
        if (y == 0) fail(e.pos, "float division by zero");
        if (op == "/") return Value::floating(x / y);
        double q = std::floor(x / y);
        if (op == "//") return Value::floating(q);
        double r = std::fmod(x, y);
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return Value::floating(r);
      }
      if (op == "**") return Value::floating(std::pow(x, y));
    } else {
      int64_t x = a.as_int(), y = b.as_int(), r = 0;
      if (op == "+") {
        bool overflow = __builtin_add_overflow(x, y, &r);
        return Value::integer(checked(overflow, r));
      }
      if (op == "-") {
        bool overflow = __builtin_sub_overflow(x, y, &r);
        return Value::integer(checked(overflow, r));
      }
      if (op == "*") {
        bool overflow = __builtin_mul_overflow(x, y, &r);
        return Value::integer(checked(overflow, r));
      }
      if (op == "//") return Value::integer(floor_div(x, y));
      if (op == "%") {
        int64_t q = floor_div(x, y);
        return Value::integer(x - q * y);
      }
      if (op == "**") {
        int64_t result = 1;
        for (int64_t i = 0; i < y; ++i) {
          if (__builtin_mul_overflow(result, x, &result)) fail(e.pos, "integer overflow in **");
          if (result == 0 || result == 1) break;
        }
        return Value::integer(result);
      }
    }
    type_error();
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      check_size(a.as_string().size() + b.as_string().size(), e.pos);
      return Value::string(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      check_size(a.list_items().size() + b.list_items().size(), e.pos);
      std::vector<Value> items = a.list_items();
      items.insert(items.end(), b.list_items().begin(), b.list_items().end());
      return Value::list(std::move(items), a.is_tuple());
    }
    type_error();
  }
  if (op == "*") {
    const Value& seq = a.is_number() ? b : a;
    const Value& count = a.is_number() ? a : b;
    if ((seq.is_string() || seq.is_list()) && (count.is_int() || count.is_bool())) {
      int64_t n = std::max<int64_t>(0, count.as_int());
      uint64_t unit = seq.is_string() ? seq.as_string().size() : seq.list_items().size();
      if (unit != 0 && static_cast<uint64_t>(n) > limits_.max_output_bytes / unit)
        check_size(limits_.max_output_bytes + 1, e.pos);
      if (seq.is_string()) {
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += seq.as_string();
        return Value::string(std::move(out));
      }
      std::vector<Value> items;
      for (int64_t i = 0; i < n; ++i)
        items.insert(items.end(), seq.list_items().begin(), seq.list_items().end());
      return Value::list(std::move(items), seq.is_tuple());
    }
  }
  if (op == "%" && a.is_string()) {
    throw TemplateError(TemplateError::Kind::kUnsupported,
                        at(e.pos, "unsupported: printf-style string formatting with '%'"));
  }
  type_error();
  return Value();
}

Value Interpreter::eval_compare(const Expr& e) {
  Value left = eval(*e.kids[0]);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.kids[i + 1]);
    const std::string& op = e.ops[i];
    bool result = false;
    if (op == "==") {
      result = values_equal(left, right);
    } else if (op == "!=") {
      result = !values_equal(left, right);
    } else if (op == "in" || op == "not in") {
      if (right.is_string()) {
        if (!left.is_string())
          fail(e.pos, "'in <string>' requires string as left operand, not " +
                          std::string(left.type_name()));
        result = right.as_string().find(left.as_string()) != std::string::npos;
      } else if (right.is_dict()) {
        result = left.is_string() && right.dict_items().find(left.as_string()) != nullptr;
      } else if (right.is_list()) {
        for (const auto& v : right.list_items()) {
          if (values_equal(left, v)) {
            result = true;
            break;
          }
        }
      } else if (!right.is_undefined()) {
        fail(e.pos, std::string("argument of type '") + right.type_name() + "' is not iterable");
      }
      if (op == "not in") result = !result;
    } else {
      require_defined(left, e.kids[i]->pos);
      require_defined(right, e.kids[i + 1]->pos);
      try {
        if (op == "<")
          result = values_less(left, right);
        else if (op == ">")
          result = values_less(right, left);
        else if (op == "<=")
          result = !values_less(right, left);
        else
          result = !values_less(left, right);
      } catch (const TemplateError& err) {
        fail(e.pos, err.what());
      }
    }
    if (!result) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

bool Interpreter::apply_test(const std::string& name, const Value& v, CallArgs& args,
                             const SourcePos& pos) {
  const Value* other = arg(args, 0, "other");
  auto need_other = [&]() -> const Value& {
    if (!other) fail(pos, "test '" + name + "' needs an argument");
    return *other;
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict() && !v.is_namespace();
  if (name == "iterable")
    return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace());
  if (name == "sequence") return v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace());
  if (name == "callable") return v.is_function();
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    return name == "lower" ? ascii_lower(v.as_string()) == v.as_string()
                           : ascii_upper(v.as_string()) == v.as_string();
  }
  if (name == "sameas") {
    const Value& o = need_other();
    if (v.type() != o.type()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.is_bool()) return v.as_bool() == o.as_bool();
    if (v.is_list()) return &v.list_items() == &o.list_items();
    if (v.is_dict()) return &v.dict_items() == &o.dict_items();
    return values_equal(v, o);
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    require_defined(v, pos);
    if (!v.is_int() && !v.is_bool()) fail(pos, "test '" + name + "' needs an integer");
    if (name == "divisibleby") {
      const Value& d = need_other();
      if (!d.is_int() || d.as_int() == 0) fail(pos, "divisibleby needs a non-zero integer");
      return v.as_int() % d.as_int() == 0;
    }
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "in") {
    const Value& c = need_other();
    if (c.is_string())
      return v.is_string() && c.as_string().find(v.as_string()) != std::string::npos;
    if (c.is_dict()) return v.is_string() && c.dict_items().find(v.as_string()) != nullptr;
    for (const auto& x : iterate(c, pos)) {
      if (values_equal(v, x)) return true;
    }
    return false;
  }
  if (name == "eq" || name == "equalto" || name == "==") return values_equal(v, need_other());
  if (name == "ne" || name == "!=") return !values_equal(v, need_other());
  const Value& o = need_other();
  require_defined(v, pos);
  require_defined(o, pos);
  try {
    if (name == "lt" || name == "<") return values_less(v, o);
    if (name == "gt" || name == ">") return values_less(o, v);
    if (name == "le" || name == "<=") return !values_less(o, v);
    if (name == "ge" || name == ">=") return !values_less(v, o);
  } catch (const TemplateError& err) {
    fail(pos, err.what());
  }
  throw TemplateError(TemplateError::Kind::kUnsupported, at(pos, "unknown test '" + name + "'"));
}

Value Interpreter::apply_filter(const std::string& name, const Value& v, CallArgs& args,
                                const SourcePos& pos) {
  if (name == "default" || name == "d") {
    const Value* dflt = arg(args, 0, "default_value");
    const Value* boolean = arg(args, 1, "boolean");
    bool use_default = v.is_undefined() || (boolean && boolean->truthy() && !v.truthy());
    if (use_default) return dflt ? *dflt : Value::string("");
    return v;
  }
  if (name == "safe") return v;
  if (name == "string") return v.is_string() ? v : Value::string(v.str());
  if (name == "length" || name == "count") {
    if (v.is_undefined()) return Value::integer(0);
    if (v.is_string())
      return Value::integer(
          static_cast<int64_t>(utf8_code_point_offsets(v.as_string()).size() - 1));
    if (v.is_list()) return Value::integer(static_cast<int64_t>(v.list_items().size()));
    if (v.is_dict()) return Value::integer(static_cast<int64_t>(v.dict_items().size()));
    fail(pos, std::string("object of type '") + v.type_name() + "' has no len()");
  }
  if (name == "tojson") {
    JsonOptions o;
    const Value* indent = arg(args, 1, "indent");
    if (const Value* ea = arg(args, 0, "ensure_ascii"); ea && ea->truthy()) {
      throw TemplateError(TemplateError::Kind::kUnsupported,
                          at(pos, "unsupported: tojson(ensure_ascii=True)"));
    }
    if (indent && !indent->is_none()) {
      if (!indent->is_int() || indent->as_int() < 0 || indent->as_int() > 64)
        fail(pos, "tojson indent must be an integer in [0, 64]");
      o.indent = static_cast<int>(indent->as_int());
    }
    if (const Value* sep = arg(args, 2, "separators"); sep && !sep->is_none()) {
      if (!sep->is_list() || sep->list_items().size() != 2 || !sep->list_items()[0].is_string() ||
          !sep->list_items()[1].is_string()) {
        fail(pos, "tojson separators must be a pair of strings");
      }
      o.item_separator = sep->list_items()[0].as_string();
      o.key_separator = sep->list_items()[1].as_string();
      if (o.item_separator.empty() || o.key_separator.empty()) {
        throw TemplateError(TemplateError::Kind::kUnsupported,
                            at(pos, "unsupported: empty tojson separators"));
      }
    }
    if (const Value* sk = arg(args, 3, "sort_keys")) o.sort_keys = sk->truthy();
    try {
      std::string json = to_json(v, o);
      check_size(json.size(), pos);
      return Value::string(std::move(json));
    } catch (const TemplateError& err) {
      if (err.kind == TemplateError::Kind::kRuntime) fail(pos, err.what());
      throw;
    }
  }
  require_defined(v, pos);  // the remaining filters need a value (jinja raises on Undefined)
  if (name == "trim") {
    if (!v.is_string()) return Value::string(strip(v.str(), arg(args, 0, "chars"), true, true));
    return Value::string(strip(v.as_string(), arg(args, 0, "chars"), true, true));
  }
  if (name == "upper") return Value::string(ascii_upper(v.str()));
  if (name == "lower") return Value::string(ascii_lower(v.str()));
  if (name == "capitalize") return Value::string(ascii_capitalize(v.str()));
  if (name == "title") return Value::string(ascii_title(v.str()));
  if (name == "wordcount")
    return Value::integer(static_cast<int64_t>(split(v.str(), nullptr, -1).size()));
  if (name == "replace") {
    const Value* from = arg(args, 0, "old");
    const Value* to = arg(args, 1, "new");
    const Value* count = arg(args, 2, "count");
    if (!from || !to) fail(pos, "replace needs old and new");
    return Value::string(replace_all(v.str(), from->str(), to->str(),
                                     count && !count->is_none() ? count->as_int() : -1,
                                     limits_.max_output_bytes));
  }
  if (name == "indent") {
    const Value* width = arg(args, 0, "width");
    const Value* first = arg(args, 1, "first");
    const Value* blank = arg(args, 2, "blank");
    std::string ind =
        width ? (width->is_string()
                     ? width->as_string()
                     : std::string(
                           static_cast<size_t>(std::clamp<int64_t>(width->as_int(), 0, 256)), ' '))
              : std::string(4, ' ');
    const Value newline = Value::string("\n");
    std::vector<Value> lines = split(v.str() + "\n", &newline, -1);
    lines.pop_back();  // splitlines() of s + "\n" has no trailing empty line
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string& line = lines[i].as_string();
      if (i > 0) out += "\n";
      if (i > 0 && (!line.empty() || (blank && blank->truthy()))) out += ind;
      out += line;
      check_size(out.size(), pos);
    }
    if (first && first->truthy()) out = ind + out;
    return Value::string(std::move(out));
  }
  if (name == "abs") {
    if (v.is_float()) return Value::floating(std::fabs(v.as_double()));
    if (v.is_number()) {
      if (v.as_int() == std::numeric_limits<int64_t>::min()) fail(pos, "integer overflow");
      return Value::integer(std::llabs(v.as_int()));
    }
    fail(pos, std::string("bad operand type for abs(): '") + v.type_name() + "'");
  }
  if (name == "int") {
    if (v.is_number())
      return Value::integer(v.is_float()
                                ? static_cast<int64_t>(std::clamp(v.as_double(), -9.2e18, 9.2e18))
                                : v.as_int());
    const Value* dflt = arg(args, 0, "default");
    if (v.is_string()) {
      std::string t = strip(v.as_string(), nullptr, true, true);
      char* end = nullptr;
      errno = 0;
      long long x = std::strtoll(t.c_str(), &end, 10);
      if (!t.empty() && end && *end == '\0' && errno == 0) return Value::integer(x);
    }
    return dflt ? *dflt : Value::integer(0);
  }
  if (name == "float") {
    if (v.is_number()) return Value::floating(v.as_double());
    const Value* dflt = arg(args, 0, "default");
    if (v.is_string()) {
      std::string t = strip(v.as_string(), nullptr, true, true);
      char* end = nullptr;
      double x = std::strtod(t.c_str(), &end);
      if (!t.empty() && end && *end == '\0') return Value::floating(x);
    }
    return dflt ? *dflt : Value::floating(0.0);
  }
  std::vector<Value> items = iterate(v, pos);
  if (name == "list") return Value::list(std::move(items));
  if (name == "first")
    return items.empty() ? Value::undefined("first of an empty sequence") : items.front();
  if (name == "last")
    return items.empty() ? Value::undefined("last of an empty sequence") : items.back();
  if (name == "reverse") {
    std::reverse(items.begin(), items.end());
    if (v.is_string()) {
      std::string s;
      for (const auto& c : items) s += c.as_string();
      return Value::string(std::move(s));
    }
    return Value::list(std::move(items));
  }
  if (name == "items") {
    if (!v.is_dict()) fail(pos, "items filter needs a mapping");
    std::vector<Value> out;
    for (const auto& [k, x] : v.dict_items().items())
      out.push_back(Value::list({Value::string(k), x}, true));
    return Value::list(std::move(out));
  }
  auto attribute_of = [&](const Value& item, const std::string& path) {
    Value cur = item;
    size_t start = 0;
    while (true) {
      size_t dot = path.find('.', start);
      std::string part =
          path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      bool numeric = !part.empty() && std::all_of(part.begin(), part.end(),
                                                  [](char c) { return c >= '0' && c <= '9'; });
      cur = cur.is_undefined() ? cur
            : numeric          ? eval_item(cur, Value::integer(std::atoll(part.c_str())), pos)
                               : eval_item(cur, Value::string(part), pos);
      if (dot == std::string::npos) return cur;
      start = dot + 1;
    }
  };
  if (name == "join") {
    const Value* sep = arg(args, 0, "d");
    const Value* attribute = arg(args, 1, "attribute");
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i && sep) out += sep->str();
      out += (attribute ? attribute_of(items[i], attribute->str()) : items[i]).str();
      check_size(out.size(), pos);
    }
    return Value::string(std::move(out));
  }
  if (name == "map") {
    std::vector<Value> out;
    const Value* attribute = find_kwarg(args, "attribute");
    if (attribute) {
      const Value* dflt = find_kwarg(args, "default");
      for (const auto& item : items) {
        Value x = attribute_of(item, attribute->str());
        out.push_back(x.is_undefined() && dflt ? *dflt : x);
      }
      return Value::list(std::move(out));
    }
    if (args.positional.empty() || !args.positional[0].is_string())
      fail(pos, "map needs a filter name or attribute=");
    std::string filter = args.positional[0].as_string();
    if (!is_known_filter(filter)) {
      throw TemplateError(TemplateError::Kind::kUnsupported,
                          at(pos, "unknown filter '" + filter + "' in map()"));
    }
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keyword = args.keyword;
    for (const auto& item : items) {
      CallArgs a = rest;
      out.push_back(apply_filter(filter, item, a, pos));
    }
    return Value::list(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const bool by_attr = name == "selectattr" || name == "rejectattr";
    const bool keep_if = name == "select" || name == "selectattr";
    size_t next_arg = 0;
    std::string attribute;
    if (by_attr) {
      if (args.positional.empty()) fail(pos, name + " needs an attribute name");
      attribute = args.positional[0].str();
      next_arg = 1;
    }
    std::string test;
    CallArgs test_args;
    if (args.positional.size() > next_arg) {
      test = args.positional[next_arg].str();
      if (!is_known_test(test)) {
        throw TemplateError(TemplateError::Kind::kUnsupported,
                            at(pos, "unknown test '" + test + "' in " + name + "()"));
      }
      test_args.positional.assign(args.positional.begin() + static_cast<long>(next_arg) + 1,
                                  args.positional.end());
    }
    std::vector<Value> out;
    for (const auto& item : items) {
      Value x = by_attr ? attribute_of(item, attribute) : item;
      bool pass = test.empty() ? x.truthy() : apply_test(test, x, test_args, pos);
      if (pass == keep_if) out.push_back(item);
    }
    return Value::list(std::move(out));
  }
  throw TemplateError(TemplateError::Kind::kUnsupported, at(pos, "unknown filter '" + name + "'"));
}

}  // namespace roofline::jinja
