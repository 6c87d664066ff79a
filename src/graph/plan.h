// Plan: a Graph lowered for one shape bucket (at most max_tokens tokens and max_seqs sequences in
// a step): an ordered list of kernel calls whose activations live at fixed offsets of one
// workspace (assigned by the memory planner), whose weights are bound to memory, and whose
// per-step metadata comes from the step inputs. Each call can report its analytic cost (bytes it
// must move, FLOPs it must do) for the step at hand: the roofline the profiler measures against.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"
#include "roofline/status.h"

namespace roofline {

struct BufferRef {
  enum class Kind : uint8_t { kWorkspace, kWeight, kStepInput };
  Kind kind = Kind::kWorkspace;
  int64_t offset_bytes = 0;                     // kWorkspace
  const void* weight = nullptr;                 // kWeight
  StepInput step_input = StepInput::kTokenIds;  // kStepInput
  DType dtype = DType::kF32;
  SymShape shape;
  std::string name;
};

struct PlanCall {
  OpKind op = OpKind::kAdd;
  std::string name;
  NodeAttrs attrs;
  std::vector<BufferRef> inputs;
  std::vector<BufferRef> outputs;
};

// What a step looks like, for costs: T tokens over B sequences, reading kv_tokens cached tokens
// in total and scoring attended_pairs (query, key) pairs.
struct StepShape {
  int64_t num_tokens = 0;
  int64_t num_seqs = 0;
  int64_t kv_tokens = 0;
  int64_t attended_pairs = 0;
};

struct CallCost {
  double bytes = 0;  // fewest bytes the call must read + write in device memory
  double flops = 0;
};

// kv_dtype: element type of the KV cache (its bytes dominate attention's cost).
CallCost call_cost(const PlanCall& call, const StepShape& step, DType kv_dtype);

struct Plan {
  int64_t max_tokens = 0;
  int64_t max_seqs = 0;
  int64_t workspace_bytes = 0;
  int64_t peak_live_bytes = 0;  // lower bound the planner is measured against
  std::vector<PlanCall> calls;
  std::vector<BufferRef> outputs;

  std::string to_string() const;  // one line per call with its buffers, for --dump-plan
};

// Resolves a weight name to memory of the backend the plan will run on.
using WeightResolver = std::function<StatusOr<TensorView>(const std::string& name)>;

// Lowers `graph` for the bucket; errors if a weight cannot be resolved or disagrees with the
// shape and dtype the graph expects.
StatusOr<Plan> build_plan(const Graph& graph, int64_t max_tokens, int64_t max_seqs,
                          const WeightResolver& resolve_weight);

}  // namespace roofline
