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

bool has_side_effect(const Node& n) { return n.op == OpKind::kQkvRope; }

}  // namespace

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
  std::vector<Node> kept;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!erase[i]) kept.push_back(std::move(nodes[i]));
  nodes = std::move(kept);
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
    if (keep[i]) kept.push_back(std::move(nodes[i]));
    else ++removed;
  }
  nodes = std::move(kept);
  return removed;
}

void run_passes(Graph& graph, const PassOptions& options) {
  if (options.fuse) fuse_residual_rms_norm(graph);
  remove_dead_nodes(graph);
}

}  // namespace roofline
