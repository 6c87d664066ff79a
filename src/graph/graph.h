// Graph: the intermediate representation every architecture builder emits and everything
// downstream (fusion passes, the memory planner, plans, cost model, profiler attribution) reads.
//
// A Graph is a list of nodes in execution order over values. Activation shapes are symbolic in
// T (tokens in the step) and B (sequences in the step), so one graph serves every step; a Plan
// fixes them to a bucket's maximum. The paged KV cache is not a value: qkv_rope and attention
// nodes name their layer, and node order carries the write-before-read dependency.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace roofline {

// size = t * T + b * B + c
struct SymDim {
  int64_t t = 0;
  int64_t b = 0;
  int64_t c = 0;

  static SymDim tokens(int64_t k = 1) { return {k, 0, 0}; }
  static SymDim seqs(int64_t k = 1) { return {0, k, 0}; }
  static SymDim fixed(int64_t c) { return {0, 0, c}; }
  int64_t eval(int64_t num_tokens, int64_t num_seqs) const {
    return t * num_tokens + b * num_seqs + c;
  }
  bool operator==(const SymDim& o) const { return t == o.t && b == o.b && c == o.c; }
  std::string to_string() const;  // "T", "B", "4096", "2*T"
};

using SymShape = std::vector<SymDim>;

enum class OpKind : uint8_t {
  kEmbedding,        // (token_ids, table) -> [T, H]
  kRmsNorm,          // (x, weight) -> [rows, H]
  kAdd,              // (a, b) -> same shape
  kRmsNormResidual,  // (x, residual, weight) -> (normed, residual + x)      [fused add + norm]
  kMatmul,           // (x, w_0 .. w_{p-1}) -> [rows, sum N_i]: weights stacked along N
  kMatmulBias,       // (x, w_0 .. w_{p-1}, b_0 .. b_{p-1}) -> [rows, sum N_i]
  kMatmulResidual,   // (x, w, residual) -> [rows, N] = x · wᵀ + residual    [fused matmul + add]
  // Any of the three matmuls with NodeAttrs::rms_norm_prologue [fused rms_norm + matmul]: x is
  // the un-normalised rows, the norm's weight is the last input, and an extra output [rows, K] is
  // scratch for implementations that normalise x in a kernel of their own.
  // A kMatmul with NodeAttrs::swiglu_epilogue [fused matmul + silu_mul]: the weights are gate and
  // up (2I rows in all), y is [rows, I] = silu(gate) · up, and the last output [rows, 2I] is
  // scratch for implementations that apply the activation in a kernel of their own.
  // A kMatmul or kMatmulBias with NodeAttrs::qkv_rope_epilogue [fused matmul + qkv_rope]: the
  // weights are q|k|v, positions and slot_mapping follow the weights and biases (before the
  // norm's weight), y is qkv_rope's rotated q, the node writes the KV cache of attrs.layer as
  // qkv_rope does (attrs: its heads and head_dim), and the last output [rows, (heads + 2 kv_heads)
  // · head_dim] is scratch for implementations that run qkv_rope in a kernel of their own.
  kQkvRope,           // (qkv, positions, slot_mapping[, q_norm, k_norm]) -> q; writes the KV cache
  kAttention,         // (q, block_tables, seq_lens, query_start) -> [T, heads * head_dim]
  kSiluMul,           // (gate_up) -> [T, I]
  kGatherLastTokens,  // (x, last_token_index) -> [B, H]: each sequence's last row
};

const char* op_kind_name(OpKind op);

enum class ValueKind : uint8_t { kStepInput, kWeight, kActivation };

// Per-step metadata the runtime fills before every step (fixed device buffers on the GPU).
enum class StepInput : uint8_t {
  kTokenIds,        // [T] i32
  kPositions,       // [T] i32
  kSlotMapping,     // [T] i64
  kBlockTables,     // [B, max_blocks_per_seq] i32
  kSeqLens,         // [B] i32
  kQueryStart,      // [B + 1] i32
  kLastTokenIndex,  // [B] i32
};

const char* step_input_name(StepInput s);

struct Value {
  int id = -1;
  std::string name;
  ValueKind kind = ValueKind::kActivation;
  DType dtype = DType::kF32;
  SymShape shape;
  StepInput step_input = StepInput::kTokenIds;  // kStepInput only
  std::string weight_name;                      // kWeight only: name in the WeightStore
};

// Attributes of a node; each op reads the fields its comment in OpKind implies.
struct NodeAttrs {
  float eps = 0.0f;    // norms
  int64_t layer = -1;  // KV cache layer (qkv_rope, attention)
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  float scale = 0.0f;              // attention
  int64_t sliding_window = 0;      // attention; 0 = none
  int64_t num_weight_parts = 0;    // matmul: how many stacked weights
  bool qk_norm = false;            // qkv_rope: has q_norm / k_norm inputs
  bool rms_norm_prologue = false;  // matmuls: normalise x first (eps: the norm's)
  bool swiglu_epilogue = false;    // kMatmul: y = silu(gate) · up of the product
  bool qkv_rope_epilogue = false;  // kMatmul, kMatmulBias: y = qkv_rope(product) (+ KV write)
};

// What profiles and plan dumps call a node: its op kind, "rms_norm+" before a matmul with the
// RMSNorm prologue, "+silu_mul" / "+qkv_rope" after one with the SwiGLU / RoPE epilogue.
std::string call_kind_name(OpKind op, const NodeAttrs& attrs);

struct Node {
  OpKind op = OpKind::kAdd;
  std::string name;  // e.g. "layers.3.attn.qkv_proj": what profiles and errors print
  NodeAttrs attrs;
  std::vector<int> inputs;   // value ids
  std::vector<int> outputs;  // value ids
};

class Graph {
 public:
  int add_step_input(StepInput which, DType dtype, SymShape shape);
  int add_weight(const std::string& weight_name, DType dtype, SymShape shape);
  int add_activation(const std::string& name, SymShape shape, DType dtype = DType::kF32);
  // Appends a node; returns its index.
  int add_node(OpKind op, const std::string& name, NodeAttrs attrs, std::vector<int> inputs,
               std::vector<int> outputs);
  void mark_output(int value_id) { outputs_.push_back(value_id); }

  const std::vector<Value>& values() const { return values_; }
  const Value& value(int id) const { return values_[static_cast<size_t>(id)]; }
  Value& mutable_value(int id) { return values_[static_cast<size_t>(id)]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& mutable_nodes() { return nodes_; }
  const std::vector<int>& outputs() const { return outputs_; }

  // Checks structural invariants (ids in range, every activation defined once before use);
  // returns a description of the first violation, or "".
  std::string validate() const;
  std::string to_string() const;  // one line per node, for --dump-graph and tests

 private:
  // Appends a value with the next id; the add_* functions fill in what is particular to its kind.
  Value& push_value(ValueKind kind, std::string name, DType dtype, SymShape shape);

  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<int> outputs_;
};

}  // namespace roofline
