// Graph construction, validation and printing.
#include "graph/graph.h"

#include <sstream>

#include "core/check.h"

namespace roofline {

std::string SymDim::to_string() const {
  std::string s;
  auto term = [&](int64_t k, const char* sym) {
    if (!k) return;
    if (!s.empty()) s += "+";
    s += (k == 1 ? std::string() : std::to_string(k) + "*") + sym;
  };
  term(t, "T");
  term(b, "B");
  if (c || s.empty()) {
    if (!s.empty()) s += "+";
    s += std::to_string(c);
  }
  return s;
}

const char* op_kind_name(OpKind op) {
  switch (op) {
    case OpKind::kEmbedding:
      return "embedding";
    case OpKind::kRmsNorm:
      return "rms_norm";
    case OpKind::kAdd:
      return "add";
    case OpKind::kRmsNormResidual:
      return "rms_norm_residual";
    case OpKind::kMatmul:
      return "matmul";
    case OpKind::kMatmulBias:
      return "matmul_bias";
    case OpKind::kMatmulResidual:
      return "matmul_residual";
    case OpKind::kQkvRope:
      return "qkv_rope";
    case OpKind::kAttention:
      return "attention";
    case OpKind::kSiluMul:
      return "silu_mul";
    case OpKind::kGatherLastTokens:
      return "gather_last_tokens";
  }
  return "?";
}

std::string call_kind_name(OpKind op, const NodeAttrs& attrs) {
  const bool matmul =
      op == OpKind::kMatmul || op == OpKind::kMatmulBias || op == OpKind::kMatmulResidual;
  std::string name = op_kind_name(op);
  if (!matmul) return name;
  if (attrs.rms_norm_prologue) name = "rms_norm+" + name;
  if (attrs.swiglu_epilogue) name += "+silu_mul";
  if (attrs.qkv_rope_epilogue) name += "+qkv_rope";
  return name;
}

const char* step_input_name(StepInput s) {
  switch (s) {
    case StepInput::kTokenIds:
      return "token_ids";
    case StepInput::kPositions:
      return "positions";
    case StepInput::kSlotMapping:
      return "slot_mapping";
    case StepInput::kBlockTables:
      return "block_tables";
    case StepInput::kSeqLens:
      return "seq_lens";
    case StepInput::kQueryStart:
      return "query_start";
    case StepInput::kLastTokenIndex:
      return "last_token_index";
  }
  return "?";
}

Value& Graph::push_value(ValueKind kind, std::string name, DType dtype, SymShape shape) {
  Value v;
  v.id = static_cast<int>(values_.size());
  v.name = std::move(name);
  v.kind = kind;
  v.dtype = dtype;
  v.shape = std::move(shape);
  values_.push_back(std::move(v));
  return values_.back();
}

int Graph::add_step_input(StepInput which, DType dtype, SymShape shape) {
  Value& v = push_value(ValueKind::kStepInput, step_input_name(which), dtype, std::move(shape));
  v.step_input = which;
  return v.id;
}

int Graph::add_weight(const std::string& weight_name, DType dtype, SymShape shape) {
  Value& v = push_value(ValueKind::kWeight, weight_name, dtype, std::move(shape));
  v.weight_name = weight_name;
  return v.id;
}

int Graph::add_activation(const std::string& name, SymShape shape, DType dtype) {
  return push_value(ValueKind::kActivation, name, dtype, std::move(shape)).id;
}

int Graph::add_node(OpKind op, const std::string& name, NodeAttrs attrs, std::vector<int> inputs,
                    std::vector<int> outputs) {
  for (int id : inputs) ROOFLINE_CHECK(id >= 0 && id < static_cast<int>(values_.size()));
  for (int id : outputs) ROOFLINE_CHECK(id >= 0 && id < static_cast<int>(values_.size()));
  nodes_.push_back(Node{op, name, attrs, std::move(inputs), std::move(outputs)});
  return static_cast<int>(nodes_.size()) - 1;
}

std::string Graph::validate() const {
  std::vector<int> defined(values_.size(), -1);
  const int nv = static_cast<int>(values_.size());
  for (size_t n = 0; n < nodes_.size(); ++n) {
    const Node& node = nodes_[n];
    for (int id : node.inputs) {
      if (id < 0 || id >= nv) return "node '" + node.name + "' reads a value id out of range";
      if (values_[id].kind == ValueKind::kActivation && defined[id] < 0)
        return "node '" + node.name + "' reads '" + values_[id].name + "' before it is written";
    }
    for (int id : node.outputs) {
      if (id < 0 || id >= nv) return "node '" + node.name + "' writes a value id out of range";
      if (values_[id].kind != ValueKind::kActivation)
        return "node '" + node.name + "' writes non-activation '" + values_[id].name + "'";
      if (defined[id] >= 0) return "value '" + values_[id].name + "' is written twice";
      defined[id] = static_cast<int>(n);
    }
  }
  for (int id : outputs_)
    if (id < 0 || id >= nv || defined[id] < 0) return "a graph output is never written";
  return "";
}

std::string Graph::to_string() const {
  std::ostringstream out;
  auto shape_str = [](const SymShape& s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + s[i].to_string();
    return r + "]";
  };
  for (const Node& n : nodes_) {
    out << call_kind_name(n.op, n.attrs) << " " << n.name << " (";
    for (size_t i = 0; i < n.inputs.size(); ++i)
      out << (i ? ", " : "") << values_[n.inputs[i]].name << shape_str(values_[n.inputs[i]].shape);
    out << ") -> (";
    for (size_t i = 0; i < n.outputs.size(); ++i)
      out << (i ? ", " : "") << values_[n.outputs[i]].name
          << shape_str(values_[n.outputs[i]].shape);
    out << ")\n";
  }
  return out.str();
}

}  // namespace roofline
