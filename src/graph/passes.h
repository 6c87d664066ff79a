// Graph passes. Each rewrites a Graph in place and returns how many rewrites it made, so tests
// and `--dump-graph` can see what it did.
#pragma once

#include "graph/graph.h"

namespace roofline {

// add(residual, x) followed by rms_norm of its sum -> one rms_norm_residual node that writes both
// the normed rows and the new residual: one pass over the activations instead of three.
int fuse_residual_rms_norm(Graph& graph);

// Removes nodes none of whose outputs reach a graph output (and that have no KV-cache side
// effect).
int remove_dead_nodes(Graph& graph);

struct PassOptions {
  bool fuse = true;
};

// The pass pipeline every plan is built from.
void run_passes(Graph& graph, const PassOptions& options);

}  // namespace roofline
