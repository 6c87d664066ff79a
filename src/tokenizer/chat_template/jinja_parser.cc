// Jinja2 recursive-descent parser, mirroring jinja2/parser.py's grammar and precedence:
//   condexpr > or > and > not > compare (==, in, not in, ...) > + - > ~ > * / // % > ** > unary -
//   > postfix (.attr, [item], [a:b:c], call) then filters `|f` and tests `is t`.
#include "tokenizer/chat_template/jinja_parser.h"

#include <set>

#include "tokenizer/chat_template/jinja_lexer.h"

namespace roofline::jinja {

namespace {

using Kind = Expr::Kind;
using T = Token::Type;

std::unique_ptr<Expr> make(Kind kind, const SourcePos& pos) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->pos = pos;
  return e;
}

// Records a finished node's height; left-nested chains (a.b.c..., 1+1+1..., x|f|f...) are built
// iteratively, so height, not parser recursion, is what bounds the interpreter's recursion.
std::unique_ptr<Expr> seal(std::unique_ptr<Expr> e, uint32_t max_depth) {
  uint32_t h = 0;
  for (const auto& k : e->kids) {
    if (k && k->depth > h) h = k->depth;
  }
  e->depth = h + 1;
  if (e->depth > max_depth) {
    throw TemplateError(TemplateError::Kind::kLimit,
                        at(e->pos, "expression nests deeper than the limit of " +
                                       std::to_string(max_depth) + " levels"));
  }
  return e;
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, uint32_t max_depth)
      : tokens_(std::move(tokens)), max_depth_(max_depth) {}

  std::unique_ptr<Template> run() {
    auto tmpl = std::make_unique<Template>();
    tmpl->body = subparse({});
    if (cur().type != T::kEnd) {
      // subparse stopped on an end tag nobody opened.
      fail_syntax(cur().pos, "unexpected '" + cur().text + "': no open block to close");
    }
    return tmpl;
  }

 private:
  // Counts nesting on the way down; the parser and the interpreter both recurse per level.
  struct DepthGuard {
    DepthGuard(Parser& p, const SourcePos& pos) : parser(p) {
      if (++parser.depth_ > parser.max_depth_) {
        throw TemplateError(TemplateError::Kind::kLimit,
                            at(pos, "template nests deeper than the limit of " +
                                        std::to_string(parser.max_depth_) + " levels"));
      }
    }
    ~DepthGuard() { --parser.depth_; }
    Parser& parser;
  };

  [[noreturn]] void fail_syntax(const SourcePos& pos, const std::string& message) const {
    throw TemplateError(TemplateError::Kind::kSyntax, at(pos, message));
  }
  [[noreturn]] void fail_unsupported(const SourcePos& pos, const std::string& message) const {
    throw TemplateError(TemplateError::Kind::kUnsupported, at(pos, message));
  }

  const Token& cur() const { return tokens_[i_]; }
  const Token& peek(size_t ahead = 1) const {
    return tokens_[std::min(i_ + ahead, tokens_.size() - 1)];
  }
  const Token& next() {
    const Token& t = tokens_[i_];
    if (i_ + 1 < tokens_.size()) ++i_;
    return t;
  }
  bool is_op(const char* op) const { return cur().type == T::kOperator && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == T::kName && cur().text == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case T::kEnd:
        return "end of template";
      case T::kBlockEnd:
        return "end of statement block '%}'";
      case T::kVarEnd:
        return "end of print statement '}}'";
      case T::kText:
        return "template text";
      case T::kString:
        return "string literal";
      default:
        return "'" + t.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!skip_op(op))
      fail_syntax(cur().pos, std::string("expected '") + op + "', got " + describe(cur()));
  }
  void expect_block_end(const std::string& statement) {
    if (cur().type != T::kBlockEnd) {
      fail_syntax(cur().pos,
                  "expected '%}' to end the '" + statement + "' statement, got " + describe(cur()));
    }
    next();
  }
  std::string expect_name(const std::string& what) {
    if (cur().type != T::kName)
      fail_syntax(cur().pos, "expected " + what + ", got " + describe(cur()));
    return next().text;
  }

  // Parses statements until a block tag whose first word is in `end_names`; leaves the cursor on
  // that word. With no end names it runs to the end of input.
  Body subparse(const std::set<std::string>& end_names) {
    DepthGuard guard(*this, cur().pos);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == T::kEnd) {
        if (!end_names.empty()) {
          std::string expected;
          for (const auto& n : end_names) expected += (expected.empty() ? "'" : " or '") + n + "'";
          fail_syntax(open_blocks_.empty() ? t.pos : open_blocks_.back().pos,
                      "unterminated '" +
                          (open_blocks_.empty() ? std::string("block") : open_blocks_.back().name) +
                          "' block: reached the end of the template looking for " + expected);
        }
        return body;
      }
      if (t.type == T::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->pos = t.pos;
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == T::kVarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->pos = t.pos;
        next();
        s->expr = parse_tuple(true, false, {});
        if (cur().type != T::kVarEnd) {
          fail_syntax(cur().pos,
                      "expected '}}' to end the print statement, got " + describe(cur()));
        }
        next();
        body.push_back(std::move(s));
      } else if (t.type == T::kBlockBegin) {
        const Token& word = peek();
        if (word.type == T::kName && end_names.count(word.text)) {
          next();
          return body;
        }
        if (word.type == T::kName && end_names.empty() &&
            (word.text.rfind("end", 0) == 0 || word.text == "else" || word.text == "elif")) {
          next();
          return body;  // run() reports the stray end tag
        }
        next();
        body.push_back(parse_statement());
      } else {
        fail_syntax(t.pos, "unexpected " + describe(t));
      }
    }
  }

  std::unique_ptr<Stmt> new_stmt(Stmt::Kind kind, const SourcePos& pos) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->pos = pos;
    return s;
  }

  std::unique_ptr<Stmt> parse_statement() {
    const Token& t = cur();
    if (t.type != T::kName)
      fail_syntax(t.pos, "expected a statement name after '{%', got " + describe(t));
    const std::string word = t.text;
    const SourcePos pos = t.pos;
    if (word == "for") return parse_for();
    if (word == "if") return parse_if();
    if (word == "set") return parse_set();
    if (word == "macro") return parse_macro();
    if (word == "break" || word == "continue") {
      next();
      expect_block_end(word);
      if (loop_depth_ == 0) fail_syntax(pos, "'" + word + "' outside of a for loop");
      return new_stmt(word == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, pos);
    }
    if (word == "generation") {
      next();
      expect_block_end(word);
      auto s = new_stmt(Stmt::Kind::kGeneration, pos);
      open_blocks_.push_back({word, pos});
      s->bodies.push_back(subparse({"endgeneration"}));
      open_blocks_.pop_back();
      next();
      expect_block_end("endgeneration");
      return s;
    }
    static const std::set<std::string> kUnsupported = {
        "call", "filter",     "block", "extends", "include",   "import",  "from",
        "with", "autoescape", "do",    "trans",   "pluralize", "endcall", "endfilter"};
    if (kUnsupported.count(word)) {
      fail_unsupported(pos, "unsupported statement '" + word +
                                "': this chat-template engine implements for, if, set, macro, "
                                "break, continue and generation");
    }
    if (word.rfind("end", 0) == 0 || word == "else" || word == "elif") {
      fail_syntax(pos,
                  "unexpected '" + word + "'" +
                      (open_blocks_.empty()
                           ? std::string(": no block is open")
                           : ": the innermost open block is '" + open_blocks_.back().name +
                                 "' from line " + std::to_string(open_blocks_.back().pos.line)));
    }
    fail_syntax(pos, "unknown statement '" + word + "'");
  }

  // A loop or set target: a name, a tuple of names, or (set only) name.attribute.
  std::vector<std::string> parse_targets(const std::string& statement, std::string* attribute) {
    std::vector<std::string> names;
    bool parens = skip_op("(");
    while (true) {
      names.push_back(expect_name("a variable name in '" + statement + "'"));
      if (attribute && names.size() == 1 && is_op(".")) {
        next();
        *attribute = expect_name("an attribute name");
        return names;
      }
      if (!skip_op(",")) break;
      if (parens && is_op(")")) break;
    }
    if (parens) expect_op(")");
    return names;
  }

  std::unique_ptr<Stmt> parse_for() {
    auto s = new_stmt(Stmt::Kind::kFor, cur().pos);
    next();
    s->targets = parse_targets("for", nullptr);
    if (!skip_name("in"))
      fail_syntax(cur().pos, "expected 'in' in the for statement, got " + describe(cur()));
    s->expr = parse_tuple(false, false, {"recursive"});
    if (skip_name("if")) s->condition = parse_expression(true);
    if (is_name("recursive")) fail_unsupported(cur().pos, "unsupported: recursive for loops");
    expect_block_end("for");
    open_blocks_.push_back({"for", s->pos});
    ++loop_depth_;
    s->bodies.push_back(subparse({"endfor", "else"}));
    --loop_depth_;
    if (next().text == "else") {
      expect_block_end("else");
      s->bodies.push_back(subparse({"endfor"}));
      next();
    }
    open_blocks_.pop_back();
    expect_block_end("endfor");
    return s;
  }

  std::unique_ptr<Stmt> parse_if() {
    auto s = new_stmt(Stmt::Kind::kIf, cur().pos);
    next();
    open_blocks_.push_back({"if", s->pos});
    s->conditions.push_back(parse_tuple(false, false, {}));
    expect_block_end("if");
    while (true) {
      s->bodies.push_back(subparse({"elif", "else", "endif"}));
      const std::string word = next().text;
      if (word == "elif") {
        s->conditions.push_back(parse_tuple(false, false, {}));
        expect_block_end("elif");
      } else if (word == "else") {
        expect_block_end("else");
        s->bodies.push_back(subparse({"endif"}));
        next();
        break;
      } else {
        break;
      }
    }
    open_blocks_.pop_back();
    expect_block_end("endif");
    return s;
  }

  std::unique_ptr<Stmt> parse_set() {
    const SourcePos pos = cur().pos;
    next();
    std::string attribute;
    auto targets = parse_targets("set", &attribute);
    if (skip_op("=")) {
      auto s = new_stmt(Stmt::Kind::kSet, pos);
      s->targets = std::move(targets);
      s->text = attribute;
      s->expr = parse_tuple(true, false, {});
      expect_block_end("set");
      return s;
    }
    if (!attribute.empty() || targets.size() != 1) {
      fail_syntax(cur().pos, "expected '=' in the set statement, got " + describe(cur()));
    }
    auto s = new_stmt(Stmt::Kind::kSetBlock, pos);
    s->targets = std::move(targets);
    expect_block_end("set");
    open_blocks_.push_back({"set", pos});
    s->bodies.push_back(subparse({"endset"}));
    open_blocks_.pop_back();
    next();
    expect_block_end("endset");
    return s;
  }

  std::unique_ptr<Stmt> parse_macro() {
    auto s = new_stmt(Stmt::Kind::kMacro, cur().pos);
    next();
    s->text = expect_name("a macro name");
    expect_op("(");
    while (!is_op(")")) {
      if (!s->targets.empty()) expect_op(",");
      if (is_op(")")) break;
      s->targets.push_back(expect_name("a macro parameter name"));
      s->defaults.push_back(skip_op("=") ? parse_expression(true) : nullptr);
    }
    next();
    expect_block_end("macro");
    open_blocks_.push_back({"macro", s->pos});
    int saved_loops = loop_depth_;
    loop_depth_ = 0;
    s->bodies.push_back(subparse({"endmacro"}));
    loop_depth_ = saved_loops;
    open_blocks_.pop_back();
    next();
    if (cur().type == T::kName) next();  // {% endmacro name %}
    expect_block_end("endmacro");
    return s;
  }

  // ---- expressions ----

  bool is_tuple_end(const std::set<std::string>& extra_end) const {
    const Token& t = cur();
    if (t.type == T::kVarEnd || t.type == T::kBlockEnd || t.type == T::kEnd) return true;
    if (t.type == T::kOperator && t.text == ")") return true;
    return t.type == T::kName && extra_end.count(t.text);
  }

  std::unique_ptr<Expr> parse_tuple(bool with_condexpr, bool explicit_parentheses,
                                    const std::set<std::string>& extra_end) {
    const SourcePos pos = cur().pos;
    std::vector<std::unique_ptr<Expr>> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      args.push_back(parse_expression(with_condexpr));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parentheses)
        fail_syntax(cur().pos, "expected an expression, got " + describe(cur()));
    }
    auto e = make(Kind::kTuple, pos);
    e->kids = std::move(args);
    return seal(std::move(e), max_depth_);
  }

  std::unique_ptr<Expr> parse_expression(bool with_condexpr) {
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  std::unique_ptr<Expr> parse_condexpr() {
    DepthGuard guard(*this, cur().pos);
    auto expr = parse_or();
    while (is_name("if")) {
      const SourcePos pos = next().pos;
      auto cond = parse_or();
      std::unique_ptr<Expr> otherwise;
      if (skip_name("else")) otherwise = parse_condexpr();
      auto e = make(Kind::kCondition, pos);
      e->kids.push_back(std::move(expr));
      e->kids.push_back(std::move(cond));
      e->kids.push_back(std::move(otherwise));
      expr = seal(std::move(e), max_depth_);
    }
    return expr;
  }

  std::unique_ptr<Expr> binary(const std::string& op, std::unique_ptr<Expr> left,
                               std::unique_ptr<Expr> right, const SourcePos& pos) {
    auto e = make(Kind::kBinary, pos);
    e->name = op;
    e->kids.push_back(std::move(left));
    e->kids.push_back(std::move(right));
    return seal(std::move(e), max_depth_);
  }

  std::unique_ptr<Expr> parse_or() {
    auto left = parse_and();
    while (is_name("or")) {
      const SourcePos pos = next().pos;
      left = binary("or", std::move(left), parse_and(), pos);
    }
    return left;
  }

  std::unique_ptr<Expr> parse_and() {
    auto left = parse_not();
    while (is_name("and")) {
      const SourcePos pos = next().pos;
      left = binary("and", std::move(left), parse_not(), pos);
    }
    return left;
  }

  std::unique_ptr<Expr> parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this, cur().pos);
      auto e = make(Kind::kNot, next().pos);
      e->kids.push_back(parse_not());
      return seal(std::move(e), max_depth_);
    }
    return parse_compare();
  }

  std::unique_ptr<Expr> parse_compare() {
    const SourcePos pos = cur().pos;
    auto first = parse_math1();
    std::unique_ptr<Expr> cmp;
    while (true) {
      std::string op;
      if (cur().type == T::kOperator &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
           cur().text == ">" || cur().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && peek().type == T::kName && peek().text == "in") {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(Kind::kCompare, pos);
        cmp->kids.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->kids.push_back(parse_math1());
    }
    return cmp ? seal(std::move(cmp), max_depth_) : std::move(first);
  }

  std::unique_ptr<Expr> parse_math1() {
    auto left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      left = binary(t.text, std::move(left), parse_concat(), t.pos);
    }
    return left;
  }

  std::unique_ptr<Expr> parse_concat() {
    auto left = parse_math2();
    while (is_op("~")) {
      const SourcePos pos = next().pos;
      left = binary("~", std::move(left), parse_math2(), pos);
    }
    return left;
  }

  std::unique_ptr<Expr> parse_math2() {
    auto left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      left = binary(t.text, std::move(left), parse_pow(), t.pos);
    }
    return left;
  }

  std::unique_ptr<Expr> parse_pow() {
    auto left = parse_unary(true);
    while (is_op("**")) {
      const SourcePos pos = next().pos;
      left = binary("**", std::move(left), parse_unary(true), pos);
    }
    return left;
  }

  std::unique_ptr<Expr> parse_unary(bool with_filter) {
    DepthGuard guard(*this, cur().pos);
    std::unique_ptr<Expr> node;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      node = make(t.text == "-" ? Kind::kNeg : Kind::kPos, t.pos);
      node->kids.push_back(parse_unary(false));
      node = seal(std::move(node), max_depth_);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  std::unique_ptr<Expr> constant(Value v, const SourcePos& pos) {
    auto e = make(Kind::kConst, pos);
    e->value = std::move(v);
    return e;
  }

  std::unique_ptr<Expr> parse_primary() {
    const Token& t = cur();
    const SourcePos pos = t.pos;
    switch (t.type) {
      case T::kName: {
        next();
        if (t.text == "true" || t.text == "True") return constant(Value::boolean(true), pos);
        if (t.text == "false" || t.text == "False") return constant(Value::boolean(false), pos);
        if (t.text == "none" || t.text == "None") return constant(Value::none(), pos);
        auto e = make(Kind::kName, pos);
        e->name = t.text;
        return e;
      }
      case T::kString: {
        std::string s;
        while (cur().type == T::kString) s += next().text;  // adjacent literals concatenate
        return constant(Value::string(std::move(s)), pos);
      }
      case T::kInt:
        next();
        return constant(Value::integer(t.int_value), pos);
      case T::kFloat:
        next();
        return constant(Value::floating(t.float_value), pos);
      case T::kOperator:
        if (t.text == "(") {
          next();
          auto e = parse_tuple(true, true, {});
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          next();
          auto e = make(Kind::kList, pos);
          while (!is_op("]")) {
            if (!e->kids.empty()) expect_op(",");
            if (is_op("]")) break;
            e->kids.push_back(parse_expression(true));
          }
          next();
          return seal(std::move(e), max_depth_);
        }
        if (t.text == "{") {
          next();
          auto e = make(Kind::kDict, pos);
          while (!is_op("}")) {
            if (!e->kids.empty()) expect_op(",");
            if (is_op("}")) break;
            e->kids.push_back(parse_expression(true));
            expect_op(":");
            e->kids.push_back(parse_expression(true));
          }
          next();
          return seal(std::move(e), max_depth_);
        }
        break;
      default:
        break;
    }
    fail_syntax(pos, "unexpected " + describe(t) + " where an expression should start");
  }

  std::unique_ptr<Expr> parse_postfix(std::unique_ptr<Expr> node) {
    while (true) {
      if (is_op(".")) {
        const SourcePos pos = next().pos;
        if (cur().type == T::kName) {
          auto e = make(Kind::kAttr, pos);
          e->name = next().text;
          e->kids.push_back(std::move(node));
          node = seal(std::move(e), max_depth_);
        } else if (cur().type == T::kInt) {
          auto e = make(Kind::kItem, pos);
          e->kids.push_back(std::move(node));
          e->kids.push_back(constant(Value::integer(next().int_value), pos));
          node = seal(std::move(e), max_depth_);
        } else {
          fail_syntax(cur().pos, "expected an attribute name after '.', got " + describe(cur()));
        }
      } else if (is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  std::unique_ptr<Expr> parse_subscript(std::unique_ptr<Expr> node) {
    const SourcePos pos = next().pos;  // '['
    std::unique_ptr<Expr> parts[3];
    bool is_slice = false;
    int part = 0;
    while (!is_op("]")) {
      if (is_op(":")) {
        next();
        is_slice = true;
        if (++part > 2) fail_syntax(cur().pos, "a slice takes at most start:stop:step");
        continue;
      }
      if (parts[part])
        fail_syntax(cur().pos, "expected ':' or ']' in a subscript, got " + describe(cur()));
      if (is_op(",")) fail_unsupported(cur().pos, "unsupported: tuple subscripts");
      parts[part] = parse_expression(true);
      if (is_op(",")) fail_unsupported(cur().pos, "unsupported: tuple subscripts");
    }
    next();
    if (!is_slice) {
      if (!parts[0]) fail_syntax(pos, "empty subscript '[]'");
      auto e = make(Kind::kItem, pos);
      e->kids.push_back(std::move(node));
      e->kids.push_back(std::move(parts[0]));
      return seal(std::move(e), max_depth_);
    }
    auto e = make(Kind::kSlice, pos);
    e->kids.push_back(std::move(node));
    for (auto& p : parts) e->kids.push_back(std::move(p));
    return seal(std::move(e), max_depth_);
  }

  // Parses "(a, b, k=v)" into e->kids (positional first, then keyword values) and keyword_names.
  void parse_call_args(Expr* e) {
    expect_op("(");
    std::vector<std::unique_ptr<Expr>> keyword_values;
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**"))
        fail_unsupported(cur().pos, "unsupported: *args/**kwargs in calls");
      if (cur().type == T::kName && peek().type == T::kOperator && peek().text == "=") {
        e->keyword_names.push_back(next().text);
        next();
        keyword_values.push_back(parse_expression(true));
      } else {
        if (!keyword_values.empty()) {
          fail_syntax(cur().pos, "positional argument after a keyword argument");
        }
        e->kids.push_back(parse_expression(true));
      }
    }
    next();
    for (auto& v : keyword_values) e->kids.push_back(std::move(v));
  }

  std::unique_ptr<Expr> parse_call(std::unique_ptr<Expr> callee) {
    auto e = make(Kind::kCall, cur().pos);
    e->kids.push_back(std::move(callee));
    parse_call_args(e.get());
    return seal(std::move(e), max_depth_);
  }

  std::unique_ptr<Expr> parse_filter_expr(std::unique_ptr<Expr> node) {
    while (true) {
      if (is_op("|")) {
        next();
        const SourcePos pos = cur().pos;
        std::string name = expect_name("a filter name after '|'");
        while (is_op(".")) {
          next();
          name += "." + expect_name("a filter name");
        }
        if (!is_known_filter(name)) {
          fail_unsupported(pos, "unknown filter '" + name + "'");
        }
        auto e = make(Kind::kFilter, pos);
        e->name = name;
        e->kids.push_back(std::move(node));
        if (is_op("(")) parse_call_args(e.get());
        node = seal(std::move(e), max_depth_);
      } else if (is_name("is")) {
        next();
        auto e = make(Kind::kTest, cur().pos);
        e->negated = skip_name("not");
        const SourcePos pos = cur().pos;
        e->name = expect_name("a test name after 'is'");
        if (!is_known_test(e->name)) fail_unsupported(pos, "unknown test '" + e->name + "'");
        e->kids.push_back(std::move(node));
        const Token& t = cur();
        if (is_op("(")) {
          parse_call_args(e.get());
        } else if ((t.type == T::kName || t.type == T::kString || t.type == T::kInt ||
                    t.type == T::kFloat || is_op("[") || is_op("{")) &&
                   !(t.type == T::kName &&
                     (t.text == "else" || t.text == "or" || t.text == "and"))) {
          if (is_name("is")) fail_syntax(t.pos, "you cannot chain multiple tests with 'is'");
          DepthGuard guard(*this, t.pos);
          e->kids.push_back(parse_postfix(parse_primary()));
        }
        node = seal(std::move(e), max_depth_);
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  struct OpenBlock {
    std::string name;
    SourcePos pos;
  };

  std::vector<Token> tokens_;
  size_t i_ = 0;
  uint32_t max_depth_;
  uint32_t depth_ = 0;
  int loop_depth_ = 0;
  std::vector<OpenBlock> open_blocks_;
};

}  // namespace

bool is_known_filter(const std::string& name) {
  static const std::set<std::string> kFilters = {
      "abs",    "capitalize", "count",   "d",       "default",  "first",  "float",      "indent",
      "int",    "items",      "join",    "last",    "length",   "list",   "lower",      "map",
      "reject", "rejectattr", "replace", "reverse", "safe",     "select", "selectattr", "string",
      "title",  "tojson",     "trim",    "upper",   "wordcount"};
  return kFilters.count(name) > 0;
}

bool is_known_test(const std::string& name) {
  static const std::set<std::string> kTests = {
      "boolean", "callable", "defined",  "divisibleby", "eq",   "equalto",   "even",
      "false",   "float",    "ge",       "gt",          "in",   "integer",   "iterable",
      "le",      "lower",    "lt",       "mapping",     "ne",   "none",      "number",
      "odd",     "sameas",   "sequence", "string",      "true", "undefined", "upper",
      "==",      "!=",       "<",        "<=",          ">",    ">="};
  return kTests.count(name) > 0;
}

std::unique_ptr<Template> parse_template(const std::string& source, uint32_t max_depth) {
  return Parser(tokenize(source), max_depth).run();
}

}  // namespace roofline::jinja
