// Graph passes on a real model's graph: fusion removes every standalone add, and plans built from
// the fused graph place activations validly and reuse memory.
#include "graph/passes.h"

#include <gtest/gtest.h>

#include "graph/plan.h"
#include "io/model_config.h"
#include "io/weight_store.h"
#include "models/dense_decoder.h"

namespace roofline {
namespace {

int count(const Graph& g, OpKind op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op == op;
  return n;
}

struct Loaded {
  ModelConfig config;
  std::unique_ptr<WeightStore> weights;
};

Loaded load(const std::string& name) {
  const std::string dir = std::string(ROOFLINE_SOURCE_DIR) + "/tests/fixtures/models/" + name;
  auto c = load_model_config(dir);
  auto w = WeightStore::open(dir);
  EXPECT_TRUE(c.ok() && w.ok());
  return {*c, std::move(w).value()};
}

TEST(Passes, FuseResidualRmsNormRemovesEveryAddANormReads) {
  Loaded m = load("llama_mha");
  auto g = build_model_graph(m.config, *m.weights, GraphOptions{});
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const int layers = static_cast<int>(m.config.num_layers);
  EXPECT_EQ(count(*g, OpKind::kAdd), 2 * layers);
  EXPECT_EQ(count(*g, OpKind::kRmsNorm), 2 * layers + 1);
  const size_t before = g->nodes().size();
  // The last layer's MLP residual feeds the last-token gather, not a norm: that add stays (in the
  // full passes the down projection absorbs it first).
  EXPECT_EQ(fuse_residual_rms_norm(*g), 2 * layers - 1);
  EXPECT_EQ(count(*g, OpKind::kAdd), 1);
  EXPECT_EQ(count(*g, OpKind::kRmsNormResidual), 2 * layers - 1);
  // The first layer's input norm has no add before it; the final norm reads the gathered rows.
  EXPECT_EQ(count(*g, OpKind::kRmsNorm), 2);
  EXPECT_EQ(g->nodes().size(), before - (2 * layers - 1));
  EXPECT_EQ(g->validate(), "");
  EXPECT_EQ(remove_dead_nodes(*g), 0);
}

TEST(Passes, MatmulsAbsorbTheResidualAddsTheNormsBeforeThemAndTheActivation) {
  // Every layer: o_proj + attn_residual and down_proj + mlp_residual become matmul_residual nodes;
  // input_layernorm and post_attention_layernorm become the qkv and gate_up matmuls' prologue;
  // silu_mul becomes gate_up's epilogue. The final norm, over the rows the last-token gather
  // took, becomes the LM head's prologue. A layer is 6 nodes: qkv, qkv_rope, attention, o,
  // gate_up, down (qkv_rope goes into qkv in the next test).
  for (const char* fixture : {"llama_mha", "qwen2_bias_gqa2_hd64_tied"}) {
    SCOPED_TRACE(fixture);
    Loaded m = load(fixture);
    auto g = build_model_graph(m.config, *m.weights, GraphOptions{});
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const int layers = static_cast<int>(m.config.num_layers);
    const size_t before = g->nodes().size();
    EXPECT_EQ(fuse_matmul_residual(*g), 2 * layers);
    EXPECT_EQ(count(*g, OpKind::kAdd), 0);
    EXPECT_EQ(count(*g, OpKind::kMatmulResidual), 2 * layers);
    EXPECT_EQ(g->validate(), "");
    EXPECT_EQ(fuse_rms_norm_matmul(*g), 2 * layers + 1);
    EXPECT_EQ(count(*g, OpKind::kRmsNorm), 0);
    EXPECT_EQ(fuse_matmul_silu_mul(*g), layers);
    EXPECT_EQ(count(*g, OpKind::kSiluMul), 0);
    EXPECT_EQ(fuse_residual_rms_norm(*g), 0);
    EXPECT_EQ(g->nodes().size(), before - 5 * layers - 1);
    EXPECT_EQ(g->validate(), "");
    int prologues = 0;
    for (const Node& n : g->nodes()) {
      if (!n.attrs.rms_norm_prologue) continue;
      ++prologues;
      // x is now the residual stream (the LM head's: the gathered rows), the norm's weight the
      // last input, its output a scratch.
      EXPECT_EQ(g->value(n.inputs.back()).kind, ValueKind::kWeight) << n.name;
      const std::string& norm_weight = g->value(n.inputs.back()).weight_name;
      if (n.name == "lm_head") {
        EXPECT_EQ(norm_weight, "model.norm.weight");
        EXPECT_EQ(g->value(n.inputs[0]).name, "last_hidden");
      } else {
        EXPECT_NE(norm_weight.find("layernorm"), std::string::npos) << n.name;
      }
      // y, the norm's scratch [T, H], and for gate_up the product's scratch [T, 2I] after it.
      EXPECT_EQ(n.outputs.size(), n.attrs.swiglu_epilogue ? 3u : 2u) << n.name;
      EXPECT_EQ(g->value(n.outputs[1]).shape, g->value(n.inputs[0]).shape) << n.name;
      EXPECT_EQ(n.attrs.eps, m.config.rms_norm_eps);
      EXPECT_NE(call_kind_name(n.op, n.attrs).find("rms_norm+matmul"), std::string::npos);
      if (!n.attrs.swiglu_epilogue) continue;
      EXPECT_EQ(g->value(n.outputs[2]).shape[1].c, 2 * g->value(n.outputs[0]).shape[1].c);
      EXPECT_EQ(call_kind_name(n.op, n.attrs), "rms_norm+matmul+silu_mul");
    }
    EXPECT_EQ(prologues, 2 * layers + 1);
    EXPECT_NE(g->to_string().find("rms_norm+matmul+silu_mul layers.0.gate_up_proj"),
              std::string::npos);
    EXPECT_NE(g->to_string().find("rms_norm+matmul lm_head"), std::string::npos);
  }
}

TEST(Passes, TheQkvProjectionAbsorbsQkvRopeUnlessItNormsQAndK) {
  // After the other fusions, each layer's qkv_rope becomes the q|k|v projection's RoPE epilogue:
  // the matmul now outputs the rotated q (which attention reads), writes the layer's KV cache,
  // takes positions and slot_mapping before the norm's weight, and keeps the product as its last,
  // scratch output. A layer is 5 nodes. Qwen3's q/k norms need whole heads: its qkv_rope stays.
  for (const char* fixture : {"llama_mha", "qwen2_bias_gqa2_hd64_tied"}) {
    SCOPED_TRACE(fixture);
    Loaded m = load(fixture);
    auto g = build_model_graph(m.config, *m.weights, GraphOptions{});
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const int layers = static_cast<int>(m.config.num_layers);
    const size_t before = g->nodes().size();
    fuse_matmul_residual(*g);
    fuse_rms_norm_matmul(*g);
    fuse_matmul_silu_mul(*g);
    EXPECT_EQ(fuse_matmul_qkv_rope(*g), layers);
    EXPECT_EQ(count(*g, OpKind::kQkvRope), 0);
    EXPECT_EQ(g->nodes().size(), before - 6 * layers - 1);
    EXPECT_EQ(g->validate(), "");
    EXPECT_EQ(remove_dead_nodes(*g), 0);
    const bool bias = std::string(fixture).find("bias") != std::string::npos;
    int fused = 0;
    for (const Node& n : g->nodes()) {
      if (!n.attrs.qkv_rope_epilogue) continue;
      EXPECT_EQ(n.attrs.layer, fused) << n.name;
      ++fused;
      EXPECT_EQ(call_kind_name(n.op, n.attrs),
                bias ? "rms_norm+matmul_bias+qkv_rope" : "rms_norm+matmul+qkv_rope");
      const size_t in = n.inputs.size();
      EXPECT_EQ(g->value(n.inputs[in - 3]).step_input, StepInput::kPositions) << n.name;
      EXPECT_EQ(g->value(n.inputs[in - 2]).step_input, StepInput::kSlotMapping) << n.name;
      EXPECT_NE(g->value(n.inputs.back()).weight_name.find("input_layernorm"), std::string::npos);
      ASSERT_EQ(n.outputs.size(), 3u) << n.name;  // q, the norm's scratch, the product
      const int64_t q_width = n.attrs.num_heads * n.attrs.head_dim;
      EXPECT_EQ(g->value(n.outputs[0]).shape[1].c, q_width);
      EXPECT_EQ(g->value(n.outputs[2]).shape[1].c,
                q_width + 2 * n.attrs.num_kv_heads * n.attrs.head_dim);
      // The layer's attention reads the rotated q.
      int readers = 0;
      for (const Node& r : g->nodes())
        readers += r.op == OpKind::kAttention && r.attrs.layer == n.attrs.layer &&
                   r.inputs[0] == n.outputs[0];
      EXPECT_EQ(readers, 1) << n.name;
    }
    EXPECT_EQ(fused, layers);
    EXPECT_NE(g->to_string().find("+qkv_rope layers.0.qkv_proj"), std::string::npos);
  }
  Loaded qwen3 = load("qwen3_qknorm_hd32_sharded");
  auto g = build_model_graph(qwen3.config, *qwen3.weights, GraphOptions{});
  ASSERT_TRUE(g.ok());
  run_passes(*g, PassOptions{});
  EXPECT_EQ(count(*g, OpKind::kQkvRope), static_cast<int>(qwen3.config.num_layers));
}

TEST(Passes, AMatmulWhoseOutputIsReadTwiceKeepsItsAdd) {
  Loaded m = load("llama_mha");
  auto g = build_model_graph(m.config, *m.weights, GraphOptions{});
  ASSERT_TRUE(g.ok());
  // A second reader of layer 0's o projection: the add may not swallow it, nor may its norm move.
  int o = -1;
  for (const Node& n : g->nodes())
    if (n.name == "layers.0.o_proj") o = n.outputs[0];
  ASSERT_GE(o, 0);
  const int extra = g->add_activation("extra", g->value(o).shape);
  g->add_node(OpKind::kAdd, "extra_add", {}, {o, o}, {extra});
  g->mark_output(extra);
  const int layers = static_cast<int>(m.config.num_layers);
  EXPECT_EQ(fuse_matmul_residual(*g), 2 * layers - 1);
  EXPECT_EQ(g->validate(), "");
  run_passes(*g, PassOptions{});
  EXPECT_EQ(g->validate(), "");
  // Layer 0's attn_residual stays an add (and extra_add); its norm still becomes gate_up's
  // prologue, as every norm becomes its GEMM's.
  EXPECT_EQ(count(*g, OpKind::kAdd), 2);
  EXPECT_EQ(count(*g, OpKind::kRmsNorm), 0);
}

TEST(Passes, DeadNodesAreRemovedButKvWritesStay) {
  Loaded m = load("llama_mha");
  auto g = build_model_graph(m.config, *m.weights, GraphOptions{});
  ASSERT_TRUE(g.ok());
  // An extra node whose output nobody reads.
  int x = g->nodes().front().outputs[0];
  int dead = g->add_activation("dead", g->value(x).shape);
  g->add_node(OpKind::kAdd, "dead_add", {}, {x, x}, {dead});
  EXPECT_EQ(remove_dead_nodes(*g), 1);
  EXPECT_EQ(count(*g, OpKind::kQkvRope), static_cast<int>(m.config.num_layers));
}

TEST(Plan, WorkspaceIsPlannedAndCostsAreCounted) {
  Loaded m = load("qwen3_qknorm_hd32_sharded");
  auto g = build_model_graph(m.config, *m.weights, GraphOptions{});
  ASSERT_TRUE(g.ok());
  run_passes(*g, PassOptions{});
  WeightStore& w = *m.weights;
  auto plan = build_plan(*g, 64, 4, [&](const std::string& n) { return w.get(n); });
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_GE(plan->workspace_bytes, plan->peak_live_bytes);
  int64_t sum = 0;
  for (const Value& v : g->values()) {
    if (v.kind != ValueKind::kActivation) continue;
    int64_t n = 4;
    for (const SymDim& d : v.shape) n *= d.eval(64, 4);
    sum += n;
  }
  EXPECT_LT(plan->workspace_bytes, sum / 2) << "liveness-based planning should reuse most memory";
  // Costs: a decode step of one sequence moves at least every matmul weight once.
  StepShape step{1, 1, 12, 12};
  double bytes = 0, flops = 0, weight_bytes = 0;
  int matmul_weights = 0;
  for (const PlanCall& c : plan->calls) {
    CallCost cc = call_cost(c, step, DType::kF32);
    EXPECT_GT(cc.bytes, 0) << c.name;
    bytes += cc.bytes;
    flops += cc.flops;
    if (c.op != OpKind::kMatmul && c.op != OpKind::kMatmulBias && c.op != OpKind::kMatmulResidual)
      continue;
    // The stacked weights are inputs 1 .. parts (biases, a residual, a norm weight follow).
    for (int64_t i = 1; i <= c.attrs.num_weight_parts; ++i) {
      const BufferRef& r = c.inputs[static_cast<size_t>(i)];
      ASSERT_EQ(r.kind, BufferRef::Kind::kWeight) << c.name;
      ++matmul_weights;
      weight_bytes += static_cast<double>(r.shape[0].c * r.shape[1].c * dtype_size_bytes(r.dtype));
    }
  }
  // q, k, v, o, gate, up, down per layer, and the LM head.
  EXPECT_EQ(matmul_weights, 7 * m.config.num_layers + 1);
  EXPECT_GT(bytes, weight_bytes);
  EXPECT_GT(flops, 2 * weight_bytes / dtype_size_bytes(DType::kBF16));
}

TEST(Plan, RejectsImpossibleBuckets) {
  Loaded m = load("llama_mha");
  auto g = build_model_graph(m.config, *m.weights, GraphOptions{});
  ASSERT_TRUE(g.ok());
  WeightStore& w = *m.weights;
  auto resolve = [&](const std::string& n) { return w.get(n); };
  EXPECT_FALSE(build_plan(*g, 0, 1, resolve).ok());
  EXPECT_FALSE(build_plan(*g, 4, 8, resolve).ok());
}

}  // namespace
}  // namespace roofline
