// Fusion and clean-up passes over the Graph.
#include "graph/passes.h"

#include <vector>

namespace roofline {

namespace {

// For every value: indices of the nodes that read it.
std::vector<std::vector<int>> readers_of(const Graph& g) {
  std::vector<std::vector<int>> readers(g.values().size());
  for (size_t n = 0; n < g.nodes().size(); ++n)
    for (int id : g.nodes()[n].inputs) readers[id].push_back(static_cast<int>(n));
  return readers;
}

// Nodes that write the KV cache.
bool has_side_effect(const Node& n) {
  return n.op == OpKind::kQkvRope || n.attrs.qkv_rope_epilogue;
}

bool is_graph_output(const Graph& g, int value) {
  for (int id : g.outputs())
    if (id == value) return true;
  return false;
}

// For every value: the index of the node that writes it, -1 for inputs and weights.
std::vector<int> writers_of(const Graph& g) {
  std::vector<int> writer(g.values().size(), -1);
  for (size_t n = 0; n < g.nodes().size(); ++n)
    for (int id : g.nodes()[n].outputs) writer[id] = static_cast<int>(n);
  return writer;
}

// Drops the nodes marked in `erase`.
void erase_nodes(std::vector<Node>& nodes, const std::vector<bool>& erase) {
  std::vector<Node> kept;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!erase[i]) kept.push_back(std::move(nodes[i]));
  nodes = std::move(kept);
}

// One pass's working state: who reads and writes each value, and the nodes it erases.
struct Rewrite {
  explicit Rewrite(Graph& g)
      : readers(readers_of(g)),
        writer(writers_of(g)),
        nodes(g.mutable_nodes()),
        erase(nodes.size(), false) {}
  // Drops the erased nodes; returns how many rewrites the pass made.
  int finish() {
    erase_nodes(nodes, erase);
    return fused;
  }
  const std::vector<std::vector<int>> readers;
  const std::vector<int> writer;
  std::vector<Node>& nodes;
  std::vector<bool> erase;
  int fused = 0;
};

}  // namespace

int fuse_matmul_residual(Graph& g) {
  Rewrite rw(g);
  for (size_t i = 0; i < rw.nodes.size(); ++i) {
    if (rw.nodes[i].op != OpKind::kAdd) continue;
    for (int side = 1; side >= 0; --side) {
      const int product = rw.nodes[i].inputs[static_cast<size_t>(side)];
      const int residual = rw.nodes[i].inputs[static_cast<size_t>(1 - side)];
      const int mm = rw.writer[product];
      if (mm < 0 || rw.erase[mm] || rw.nodes[mm].op != OpKind::kMatmul ||
          rw.nodes[mm].attrs.num_weight_parts != 1 || rw.nodes[mm].attrs.rms_norm_prologue)
        continue;
      if (rw.readers[product].size() != 1 || is_graph_output(g, product)) continue;
      // The sum is now written where the matmul ran: the residual must exist by then.
      if (rw.writer[residual] >= mm || residual == product) continue;
      Node& m = rw.nodes[mm];
      m.op = OpKind::kMatmulResidual;
      m.inputs.push_back(residual);
      m.outputs = {rw.nodes[i].outputs[0]};
      rw.erase[i] = true;
      ++rw.fused;
      break;
    }
  }
  return rw.finish();
}

int fuse_matmul_silu_mul(Graph& g) {
  Rewrite rw(g);
  for (size_t i = 0; i < rw.nodes.size(); ++i) {
    if (rw.nodes[i].op != OpKind::kSiluMul) continue;
    const int product = rw.nodes[i].inputs[0];
    const int mm = rw.writer[product];
    if (mm < 0 || rw.nodes[mm].op != OpKind::kMatmul || rw.nodes[mm].attrs.swiglu_epilogue ||
        rw.nodes[mm].attrs.qkv_rope_epilogue || rw.nodes[mm].outputs[0] != product)
      continue;
    if (rw.readers[product].size() != 1 || is_graph_output(g, product)) continue;
    Node& m = rw.nodes[mm];
    m.outputs[0] = rw.nodes[i].outputs[0];
    m.outputs.push_back(product);  // scratch now, after the prologue's if any
    m.attrs.swiglu_epilogue = true;
    rw.erase[i] = true;
    ++rw.fused;
  }
  return rw.finish();
}

int fuse_matmul_qkv_rope(Graph& g) {
  Rewrite rw(g);
  for (size_t i = 0; i < rw.nodes.size(); ++i) {
    const Node& rope = rw.nodes[i];
    if (rope.op != OpKind::kQkvRope || rope.attrs.qk_norm) continue;
    const int product = rope.inputs[0];
    const int mm = rw.writer[product];
    if (mm < 0) continue;
    const Node& m0 = rw.nodes[mm];
    if ((m0.op != OpKind::kMatmul && m0.op != OpKind::kMatmulBias) || m0.attrs.swiglu_epilogue ||
        m0.attrs.qkv_rope_epilogue || m0.outputs[0] != product)
      continue;
    if (rw.readers[product].size() != 1 || is_graph_output(g, product)) continue;
    // The KV cache is written where the matmul ran: nothing between may read this layer's cache
    // (an attention node of the same layer), and the step inputs exist from the start.
    bool cache_read_between = false;
    for (size_t k = static_cast<size_t>(mm) + 1; k < i; ++k)
      cache_read_between = cache_read_between || (rw.nodes[k].op == OpKind::kAttention &&
                                                  rw.nodes[k].attrs.layer == rope.attrs.layer);
    if (cache_read_between) continue;
    Node& m = rw.nodes[mm];
    // positions and slot_mapping go before the norm's weight, which stays the last input.
    const auto at = m.attrs.rms_norm_prologue ? m.inputs.end() - 1 : m.inputs.end();
    m.inputs.insert(at, {rope.inputs[1], rope.inputs[2]});
    m.outputs[0] = rope.outputs[0];
    m.outputs.push_back(product);  // scratch now, after the prologue's if any
    m.attrs.qkv_rope_epilogue = true;
    m.attrs.layer = rope.attrs.layer;
    m.attrs.num_heads = rope.attrs.num_heads;
    m.attrs.num_kv_heads = rope.attrs.num_kv_heads;
    m.attrs.head_dim = rope.attrs.head_dim;
    rw.erase[i] = true;
    ++rw.fused;
  }
  return rw.finish();
}

int fuse_rms_norm_matmul(Graph& g) {
  Rewrite rw(g);
  for (size_t i = 0; i < rw.nodes.size(); ++i) {
    if (rw.nodes[i].op != OpKind::kRmsNorm) continue;
    const int normed = rw.nodes[i].outputs[0];
    if (rw.readers[normed].size() != 1 || is_graph_output(g, normed)) continue;
    Node& m = rw.nodes[static_cast<size_t>(rw.readers[normed][0])];
    const bool matmul =
        m.op == OpKind::kMatmul || m.op == OpKind::kMatmulBias || m.op == OpKind::kMatmulResidual;
    if (!matmul || m.attrs.rms_norm_prologue || m.inputs[0] != normed) continue;
    bool read_twice = false;
    for (size_t k = 1; k < m.inputs.size(); ++k) read_twice = read_twice || m.inputs[k] == normed;
    if (read_twice) continue;
    m.inputs[0] = rw.nodes[i].inputs[0];
    m.inputs.push_back(rw.nodes[i].inputs[1]);
    // Scratch now, written (if at all) inside the matmul's call; before the SwiGLU or RoPE
    // epilogue's scratch, if any.
    const bool epilogue_scratch = m.attrs.swiglu_epilogue || m.attrs.qkv_rope_epilogue;
    m.outputs.insert(epilogue_scratch ? m.outputs.end() - 1 : m.outputs.end(), normed);
    m.attrs.rms_norm_prologue = true;
    m.attrs.eps = rw.nodes[i].attrs.eps;
    rw.erase[i] = true;
    ++rw.fused;
  }
  return rw.finish();
}

int fuse_residual_rms_norm(Graph& g) {
  auto readers = readers_of(g);
  std::vector<Node>& nodes = g.mutable_nodes();
  std::vector<bool> erase(nodes.size(), false);
  int fused = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].op != OpKind::kAdd || erase[i]) continue;
    const int sum = nodes[i].outputs[0];
    // The norm must read the sum; the sum may also feed later adds (the residual stream).
    int norm = -1;
    for (int r : readers[sum]) {
      if (nodes[r].op == OpKind::kRmsNorm && nodes[r].inputs[0] == sum && !erase[r]) {
        norm = r;
        break;
      }
    }
    if (norm < 0) continue;
    Node& add = nodes[i];
    const Node& rn = nodes[norm];
    Node fusedn;
    fusedn.op = OpKind::kRmsNormResidual;
    fusedn.name = rn.name;
    fusedn.attrs = rn.attrs;
    // residual = add's first input, x = second; both are summed so the order is only a convention.
    fusedn.inputs = {add.inputs[1], add.inputs[0], rn.inputs[1]};
    fusedn.outputs = {rn.outputs[0], sum};
    // The fused node runs where the norm ran: everything between the add and the norm that read
    // the sum still sees it written (the add is erased, its output now comes from the norm's
    // slot), so only fuse when nothing in between reads the sum.
    bool reader_between = false;
    for (int r : readers[sum])
      if (r > static_cast<int>(i) && r < norm) reader_between = true;
    if (reader_between) continue;
    nodes[norm] = fusedn;
    erase[i] = true;
    ++fused;
  }
  erase_nodes(nodes, erase);
  return fused;
}

int remove_dead_nodes(Graph& g) {
  std::vector<bool> live(g.values().size(), false);
  for (int id : g.outputs()) live[id] = true;
  std::vector<Node>& nodes = g.mutable_nodes();
  std::vector<bool> keep(nodes.size(), false);
  for (int n = static_cast<int>(nodes.size()) - 1; n >= 0; --n) {
    bool needed = has_side_effect(nodes[n]);
    for (int o : nodes[n].outputs) needed = needed || live[o];
    if (!needed) continue;
    keep[n] = true;
    for (int in : nodes[n].inputs) live[in] = true;
  }
  std::vector<Node> kept;
  int removed = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (keep[i])
      kept.push_back(std::move(nodes[i]));
    else
      ++removed;
  }
  nodes = std::move(kept);
  return removed;
}

void run_passes(Graph& graph, const PassOptions& options) {
  if (options.fuse) {
    fuse_matmul_residual(graph);
    fuse_rms_norm_matmul(graph);
    fuse_matmul_silu_mul(graph);
    fuse_matmul_qkv_rope(graph);
    fuse_residual_rms_norm(graph);
  }
  remove_dead_nodes(graph);
}

}  // namespace roofline
