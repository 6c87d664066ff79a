// Lowering a Graph to a Plan, and the analytic cost model of each call.
#include "graph/plan.h"

#include <algorithm>
#include <sstream>

#include "core/check.h"
#include "graph/memory_planner.h"

namespace roofline {

namespace {

// Workspace buffers start on 256-byte boundaries: the widest vector access any kernel makes and
// the alignment cudaMalloc itself guarantees.
constexpr int64_t kWorkspaceAlignment = 256;

int64_t numel(const SymShape& s, int64_t tokens, int64_t seqs) {
  int64_t n = 1;
  for (const SymDim& d : s) n *= d.eval(tokens, seqs);
  return n;
}

}  // namespace

StatusOr<Plan> build_plan(const Graph& graph, int64_t max_tokens, int64_t max_seqs,
                          const WeightResolver& resolve_weight) {
  if (max_tokens <= 0 || max_seqs <= 0 || max_seqs > max_tokens)
    return invalid_argument("a plan bucket needs 0 < max_seqs <= max_tokens (got " +
                            std::to_string(max_seqs) + ", " + std::to_string(max_tokens) + ")");
  const std::string problem = graph.validate();
  ROOFLINE_CHECK_MSG(problem.empty(), problem.c_str());

  const auto& values = graph.values();
  const auto& nodes = graph.nodes();
  // Lifetimes of activations; graph outputs live to the end.
  std::vector<int> first(values.size(), -1), last(values.size(), -1);
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (int id : nodes[n].outputs) first[id] = static_cast<int>(n);
    for (int id : nodes[n].inputs) last[id] = static_cast<int>(n);
  }
  for (int id : graph.outputs()) last[id] = static_cast<int>(nodes.size());
  std::vector<BufferRequest> requests;
  std::vector<int> request_of(values.size(), -1);
  for (const Value& v : values) {
    if (v.kind != ValueKind::kActivation || first[v.id] < 0) continue;
    request_of[v.id] = static_cast<int>(requests.size());
    requests.push_back({numel(v.shape, max_tokens, max_seqs) * dtype_size_bytes(v.dtype),
                        first[v.id], std::max(first[v.id], last[v.id])});
  }
  MemoryPlan mem = plan_memory(requests, kWorkspaceAlignment);
  ROOFLINE_CHECK(memory_plan_is_valid(requests, mem));

  Plan plan;
  plan.max_tokens = max_tokens;
  plan.max_seqs = max_seqs;
  plan.workspace_bytes = mem.total_bytes;
  plan.peak_live_bytes = peak_live_bytes(requests);

  std::vector<BufferRef> refs(values.size());
  for (const Value& v : values) {
    BufferRef& r = refs[v.id];
    r.dtype = v.dtype;
    r.shape = v.shape;
    r.name = v.name;
    switch (v.kind) {
      case ValueKind::kActivation:
        r.kind = BufferRef::Kind::kWorkspace;
        if (request_of[v.id] >= 0) r.offset_bytes = mem.offsets[request_of[v.id]];
        break;
      case ValueKind::kStepInput:
        r.kind = BufferRef::Kind::kStepInput;
        r.step_input = v.step_input;
        break;
      case ValueKind::kWeight: {
        r.kind = BufferRef::Kind::kWeight;
        auto view = resolve_weight(v.weight_name);
        if (!view.ok()) return view.status();
        Shape expected;
        for (const SymDim& d : v.shape) {
          ROOFLINE_CHECK(d.t == 0 && d.b == 0);
          expected.dims[expected.rank++] = d.c;
        }
        if (!(view->shape == expected))
          return invalid_argument("weight '" + v.weight_name + "' has shape " +
                                  view->shape.to_string() + " but the model needs " +
                                  expected.to_string());
        r.weight = view->data;
        r.dtype = view->dtype;
        break;
      }
    }
  }
  for (const Node& n : nodes) {
    PlanCall call{n.op, n.name, n.attrs, {}, {}};
    for (int id : n.inputs) call.inputs.push_back(refs[id]);
    for (int id : n.outputs) call.outputs.push_back(refs[id]);
    plan.calls.push_back(std::move(call));
  }
  for (int id : graph.outputs()) plan.outputs.push_back(refs[id]);
  return plan;
}

CallCost call_cost(const PlanCall& c, const StepShape& s, DType kv_dtype) {
  auto bytes_of = [&](const BufferRef& r) {
    return static_cast<double>(numel(r.shape, s.num_tokens, s.num_seqs) *
                               dtype_size_bytes(r.dtype));
  };
  CallCost cost;
  const double kv_elem = static_cast<double>(dtype_size_bytes(kv_dtype));
  switch (c.op) {
    case OpKind::kEmbedding: {
      // Reads one table row per token, not the table.
      const double row = bytes_of(c.outputs[0]);
      cost.bytes = 2 * row + bytes_of(c.inputs[0]);
      break;
    }
    case OpKind::kMatmul:
    case OpKind::kMatmulBias:
    case OpKind::kMatmulResidual: {
      // y only: the prologue's and the SwiGLU and RoPE epilogues' scratch outputs are not part of
      // the fused op's ideal; the RoPE epilogue's K and V written into the cache are.
      for (const auto& r : c.inputs) cost.bytes += bytes_of(r);
      cost.bytes += bytes_of(c.outputs[0]);
      if (c.attrs.qkv_rope_epilogue)
        cost.bytes += 2.0 * s.num_tokens * c.attrs.num_kv_heads * c.attrs.head_dim * kv_elem;
      const double rows = static_cast<double>(c.inputs[0].shape[0].eval(s.num_tokens, s.num_seqs));
      const double k = static_cast<double>(c.inputs[0].shape[1].eval(s.num_tokens, s.num_seqs));
      // The product's width: y's, or with the SwiGLU or RoPE epilogue its scratch's.
      const bool scratch = c.attrs.swiglu_epilogue || c.attrs.qkv_rope_epilogue;
      const BufferRef& product = scratch ? c.outputs.back() : c.outputs[0];
      const double n = static_cast<double>(product.shape[1].eval(s.num_tokens, s.num_seqs));
      cost.flops = 2 * rows * n * k;
      break;
    }
    case OpKind::kQkvRope: {
      for (const auto& r : c.inputs) cost.bytes += bytes_of(r);
      for (const auto& r : c.outputs) cost.bytes += bytes_of(r);
      // K and V written into the cache.
      cost.bytes += 2.0 * s.num_tokens * c.attrs.num_kv_heads * c.attrs.head_dim * kv_elem;
      break;
    }
    case OpKind::kAttention: {
      cost.bytes = bytes_of(c.inputs[0]) + bytes_of(c.outputs[0]) + bytes_of(c.inputs[1]) +
                   2.0 * s.kv_tokens * c.attrs.num_kv_heads * c.attrs.head_dim * kv_elem;
      // QK^T and PV: 2 FLOPs per multiply-add, two products per (query, key, head) pair.
      cost.flops = 4.0 * s.attended_pairs * c.attrs.num_heads * c.attrs.head_dim;
      break;
    }
    default:
      for (const auto& r : c.inputs) cost.bytes += bytes_of(r);
      for (const auto& r : c.outputs) cost.bytes += bytes_of(r);
      cost.flops = static_cast<double>(numel(c.outputs[0].shape, s.num_tokens, s.num_seqs)) * 4;
      break;
  }
  return cost;
}

std::string Plan::to_string() const {
  std::ostringstream out;
  out << "plan: max_tokens=" << max_tokens << " max_seqs=" << max_seqs
      << " workspace=" << workspace_bytes << " B (peak live " << peak_live_bytes << " B), "
      << calls.size() << " calls\n";
  for (const PlanCall& c : calls) {
    out << "  " << call_kind_name(c.op, c.attrs) << " " << c.name << ":";
    for (const auto& o : c.outputs)
      if (o.kind == BufferRef::Kind::kWorkspace) out << " " << o.name << "@" << o.offset_bytes;
    out << "\n";
  }
  return out.str();
}

}  // namespace roofline
