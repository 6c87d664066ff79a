// Jinja runtime values: construction, Python truthiness/str/repr, equality and ordering,
// json.dumps.
#include "tokenizer/chat_template/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace roofline::jinja {

void throw_runtime(const std::string& message) {
  throw TemplateError(TemplateError::Kind::kRuntime, message);
}

const Value* Dict::find(const std::string& key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

void Dict::set(const std::string& key, Value value) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    items_[it->second].second = std::move(value);
    return;
  }
  index_.emplace(key, items_.size());
  items_.emplace_back(key, std::move(value));
}

Value Value::undefined(std::string name_hint) {
  Value v;
  v.s_ = std::move(name_hint);
  return v;
}
Value Value::none() {
  Value v;
  v.type_ = Type::kNone;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.type_ = Type::kBool;
  v.b_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.type_ = Type::kInt;
  v.i_ = i;
  return v;
}
Value Value::floating(double f) {
  Value v;
  v.type_ = Type::kFloat;
  v.f_ = f;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.type_ = Type::kString;
  v.s_ = std::move(s);
  return v;
}
Value Value::list(std::vector<Value> items, bool is_tuple) {
  Value v;
  v.type_ = Type::kList;
  v.is_tuple_ = is_tuple;
  v.list_ = std::make_shared<std::vector<Value>>(std::move(items));
  return v;
}
Value Value::dict() {
  Value v;
  v.type_ = Type::kDict;
  v.dict_ = std::make_shared<Dict>();
  return v;
}
Value Value::namespace_object() {
  Value v = dict();
  v.is_namespace_ = true;
  return v;
}
Value Value::function(std::string name, NativeFunction fn) {
  Value v;
  v.type_ = Type::kFunction;
  v.s_ = std::move(name);
  v.fn_ = std::make_shared<NativeFunction>(std::move(fn));
  return v;
}

bool Value::truthy() const {
  switch (type_) {
    case Type::kUndefined:
    case Type::kNone:
      return false;
    case Type::kBool:
      return b_;
    case Type::kInt:
      return i_ != 0;
    case Type::kFloat:
      return f_ != 0.0;
    case Type::kString:
      return !s_.empty();
    case Type::kList:
      return !list_->empty();
    case Type::kDict:
      return is_namespace_ || dict_->size() != 0;  // a Namespace object is truthy
    case Type::kFunction:
      return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (type_) {
    case Type::kUndefined:
      return "Undefined";
    case Type::kNone:
      return "NoneType";
    case Type::kBool:
      return "bool";
    case Type::kInt:
      return "int";
    case Type::kFloat:
      return "float";
    case Type::kString:
      return "str";
    case Type::kList:
      return is_tuple_ ? "tuple" : "list";
    case Type::kDict:
      return is_namespace_ ? "Namespace" : "dict";
    case Type::kFunction:
      return "function";
  }
  return "?";
}

std::string python_float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  if (f == 0.0) return std::signbit(f) ? "-0.0" : "0.0";
  // Shortest round-tripping digits, then Python's layout: positional for 1e-4 <= |f| < 1e16,
  // scientific with a signed two-digit exponent otherwise, and always a '.0' on integral values.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e_pos = sci.find('e');
  int exponent = std::atoi(sci.c_str() + e_pos + 1);
  std::string digits;
  for (size_t i = 0; i < e_pos; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  std::string out;
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exponent) + 1) + "." +
            digits.substr(static_cast<size_t>(exponent) + 1);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+',
                  std::abs(exponent));
    out += exp_buf;
  }
  return negative ? "-" + out : out;
}

namespace {

// Decodes one UTF-8 sequence at s[i]; invalid bytes decode as themselves (one byte each), so
// arbitrary input never throws and lengths stay consistent.
uint32_t decode_utf8(const std::string& s, size_t i, size_t* length) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + static_cast<size_t>(n) > s.size()) {
    *length = 1;
    return c;
  }
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < n; ++k) {
    unsigned char cc = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
    if ((cc & 0xC0) != 0x80) {
      *length = 1;
      return c;
    }
    cp = (cp << 6) | (cc & 0x3F);
  }
  *length = static_cast<size_t>(n);
  return cp;
}

std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size();) {
    size_t len = 1;
    uint32_t cp = decode_utf8(s, i, &len);
    char buf[16];
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0)) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", cp);
      out += buf;
    } else {
      out.append(s, i, len);
    }
    i += len;
  }
  out += quote;
  return out;
}

}  // namespace

std::vector<size_t> utf8_code_point_offsets(const std::string& s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    offsets.push_back(i);
    size_t len = 1;
    decode_utf8(s, i, &len);
    i += len;
  }
  offsets.push_back(s.size());
  return offsets;
}

bool is_python_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string Value::str() const {
  switch (type_) {
    case Type::kUndefined:
      return "";
    case Type::kNone:
      return "None";
    case Type::kBool:
      return b_ ? "True" : "False";
    case Type::kInt:
      return std::to_string(i_);
    case Type::kFloat:
      return python_float_repr(f_);
    case Type::kString:
      return s_;
    case Type::kList:
    case Type::kDict:
      return repr();
    case Type::kFunction:
      return "<function " + s_ + ">";
  }
  return "";
}

std::string Value::repr() const {
  switch (type_) {
    case Type::kString:
      return repr_string(s_);
    case Type::kUndefined:
      return "Undefined";
    case Type::kList: {
      std::string out = is_tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        out += (*list_)[i].repr();
      }
      if (is_tuple_ && list_->size() == 1) out += ",";
      return out + (is_tuple_ ? ")" : "]");
    }
    case Type::kDict: {
      std::string out = is_namespace_ ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : dict_->items()) {
        if (!first) out += ", ";
        first = false;
        out += repr_string(k) + ": " + v.repr();
      }
      return out + (is_namespace_ ? "}>" : "}");
    }
    default:
      return str();
  }
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kNone:
      return true;
    case Value::Type::kString:
      return a.as_string() == b.as_string();
    case Value::Type::kList: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const auto& x = a.list_items();
      const auto& y = b.list_items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!values_equal(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Type::kDict: {
      if (a.is_namespace() || b.is_namespace()) return &a.dict_items() == &b.dict_items();
      const Dict& x = a.dict_items();
      const Dict& y = b.dict_items();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.items()) {
        const Value* other = y.find(k);
        if (!other || !values_equal(v, *other)) return false;
      }
      return true;
    }
    case Value::Type::kFunction:
      return a.name() == b.name();
    default:
      return false;
  }
}

bool values_less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string())
    return a.as_string() < b.as_string();  // UTF-8 byte order is
                                           // code point order
  if (a.is_list() && b.is_list()) {
    const auto& x = a.list_items();
    const auto& y = b.list_items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!values_equal(x[i], y[i])) return values_less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw_runtime(std::string("'<' not supported between instances of '") + a.type_name() +
                "' and '" + b.type_name() + "'");
}

namespace {

void json_string(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void json_value(const Value& v, const JsonOptions& o, int level, std::string& out) {
  if (level > 512) throw_runtime("tojson: value nested deeper than 512 levels");
  const std::string item_sep = !o.item_separator.empty() ? o.item_separator
                               : o.indent >= 0           ? ","
                                                         : ", ";
  const std::string key_sep = !o.key_separator.empty() ? o.key_separator : ": ";
  auto newline = [&](int lvl) {
    if (o.indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(o.indent) * static_cast<size_t>(lvl), ' ');
  };
  switch (v.type()) {
    case Value::Type::kNone:
      out += "null";
      return;
    case Value::Type::kBool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Type::kInt:
      out += std::to_string(v.as_int());
      return;
    case Value::Type::kFloat: {
      double f = v.as_double();
      out += std::isnan(f)   ? "NaN"
             : std::isinf(f) ? (f > 0 ? "Infinity" : "-Infinity")
                             : python_float_repr(f);
      return;
    }
    case Value::Type::kString:
      json_string(v.as_string(), out);
      return;
    case Value::Type::kList: {
      const auto& items = v.list_items();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(level + 1);
        json_value(items[i], o, level + 1, out);
      }
      newline(level);
      out += ']';
      return;
    }
    case Value::Type::kDict: {
      if (v.is_namespace())
        throw_runtime("tojson: Object of type Namespace is not JSON serializable");
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.dict_items().items()) items.push_back(&kv);
      if (o.sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      }
      if (items.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(level + 1);
        json_string(items[i]->first, out);
        out += key_sep;
        json_value(items[i]->second, o, level + 1, out);
      }
      newline(level);
      out += '}';
      return;
    }
    default:
      throw_runtime(
          std::string("tojson: Object of type ") + v.type_name() + " is not JSON serializable" +
          (v.is_undefined() && !v.name().empty() ? " ('" + v.name() + "' is undefined)" : ""));
  }
}

}  // namespace

std::string to_json(const Value& value, const JsonOptions& options) {
  std::string out;
  json_value(value, options, 0, out);
  return out;
}

}  // namespace roofline::jinja
