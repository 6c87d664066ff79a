// Graph passes. Each rewrites a Graph in place and returns how many rewrites it made, so tests
// and `--dump-graph` can see what it did.
#pragma once

#include "graph/graph.h"

namespace roofline {

// add(residual, matmul(x, w)) where the matmul (one weight, no bias) feeds only the add -> one
// matmul_residual node: the o and down projections write the new residual stream from their GEMM's
// epilogue, with no kernel and no pass over the activations for the add.
int fuse_matmul_residual(Graph& graph);

// rms_norm(x) read only by one matmul (as its x) -> that matmul with the RMSNorm prologue
// (NodeAttrs::rms_norm_prologue): the norm before the qkv and gate_up projections costs no kernel
// where the GEMM can fold it in (the skinny decode kernel), and runs as before where it cannot.
int fuse_rms_norm_matmul(Graph& graph);

// matmul(x, gate, up) read only by silu_mul -> that matmul with the SwiGLU epilogue
// (NodeAttrs::swiglu_epilogue): the activation costs no kernel where the GEMM can fold it in.
int fuse_matmul_silu_mul(Graph& graph);

// qkv_rope(matmul(x, q, k, v)) without q/k norms, where qkv_rope is the product's only reader ->
// that matmul with the RoPE epilogue (NodeAttrs::qkv_rope_epilogue): rotating q and k and writing
// the KV cache cost no kernel where the GEMM can fold them in (the skinny decode kernel), and run
// as before where it cannot.
int fuse_matmul_qkv_rope(Graph& graph);

// add(residual, x) followed by rms_norm of its sum -> one rms_norm_residual node that writes both
// the normed rows and the new residual: one pass over the activations instead of three (for the
// adds fuse_matmul_residual left, e.g. after a projection with a bias).
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
