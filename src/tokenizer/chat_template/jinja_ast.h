// The parsed form of a chat template: expression and statement trees the interpreter walks.
//
// One generic node type per tree (a kind, a name, children) rather than a class per construct:
// the subset is small, and a flat node keeps the parser and interpreter as two readable switches.
// Every node keeps its line:column so runtime errors point into the template.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/chat_template/jinja_value.h"

namespace roofline::jinja {

struct SourcePos {
  int line = 1;
  int column = 1;
};

struct Expr {
  enum class Kind {
    kConst,      // value
    kName,       // name
    kList,       // kids
    kTuple,      // kids
    kDict,       // kids = k0, v0, k1, v1, ...
    kAttr,       // kids[0].name
    kItem,       // kids[0][kids[1]]
    kSlice,      // kids[0][kids[1]:kids[2]:kids[3]], absent parts are null
    kCall,       // kids[0](kids[1..]), the last keyword_names.size() of them by keyword
    kFilter,     // kids[0] | name(kids[1..])
    kTest,       // kids[0] is [not] name(kids[1..]); negated
    kNot,        // not kids[0]
    kNeg,        // -kids[0]
    kPos,        // +kids[0]
    kBinary,     // kids[0] op kids[1]; op is "and", "or", "+", "-", "*", "/", "//", "%", "**", "~"
    kCompare,    // kids[0] ops[0] kids[1] ops[1] kids[2] ... (Python chaining)
    kCondition,  // kids[0] if kids[1] else kids[2] (kids[2] may be null)
  };
  Kind kind;
  SourcePos pos;
  std::string name;  // variable, attribute, filter, test or operator
  Value value;       // kConst
  std::vector<std::unique_ptr<Expr>> kids;
  std::vector<std::string> keyword_names;  // kCall/kFilter/kTest keyword arguments
  std::vector<std::string> ops;            // kCompare
  bool negated = false;                    // kTest
  uint32_t depth = 1;                      // height of this subtree (bounded at parse time)
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // conditions[i] -> bodies[i]; bodies.size() == conditions.size() + 1 with else
    kFor,       // for targets in expr [if condition]: bodies[0] else bodies[1]
    kSet,       // set targets = expr, or set target.attribute = expr
    kSetBlock,  // set targets[0] %}bodies[0]{% endset
    kMacro,     // macro name(targets = defaults): bodies[0]
    kBreak,
    kContinue,
    kGeneration,  // transformers' {% generation %}: bodies[0] renders in place
  };
  Kind kind;
  SourcePos pos;
  std::string text;                               // kText; kMacro name; kSet attribute
  std::unique_ptr<Expr> expr;                     // kOutput, kFor iterable, kSet value
  std::unique_ptr<Expr> condition;                // kFor filter
  std::vector<std::unique_ptr<Expr>> conditions;  // kIf
  std::vector<Body> bodies;
  std::vector<std::string> targets;             // loop/set variables, macro parameters
  std::vector<std::unique_ptr<Expr>> defaults;  // kMacro: one per parameter, null if none
};

struct Template {
  Body body;
};

// "line L, column C: message"
std::string at(const SourcePos& pos, const std::string& message);

}  // namespace roofline::jinja
