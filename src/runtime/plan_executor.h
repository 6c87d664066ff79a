// run_plan_call: the one place where a plan call becomes an op's params struct. Both backends use
// it; they differ only in where the memory lives (host or device) and in the kernel table they pass
// (CpuKernels calls <op>_cpu, CudaKernels calls <op>_cuda on its stream).
//
// Stacked weights (q|k|v, gate|up) whose parts lie back to back in memory — always so on the GPU,
// where the backend uploads them merged — run as one GEMM over the summed N; otherwise each part
// writes its column range of the output through the row stride (with the RMSNorm prologue, the
// first part's call normalises x into the node's scratch output and the others read that).
// A matmul's inputs: x, w_0 .. w_{p-1}, then b_0 .. b_{p-1} (matmul_bias), the residual
// (matmul_residual), positions and slot_mapping (the RoPE epilogue), the norm's weight (the
// prologue); its outputs: y, then the prologue's scratch, then the SwiGLU or RoPE epilogue's (the
// [rows, 2I] or [rows, q|k|v] product).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/check.h"
#include "graph/plan.h"
#include "ops/add/add.h"
#include "ops/attention/attention.h"
#include "ops/embedding/embedding.h"
#include "ops/gather_rows/gather_rows.h"
#include "ops/matmul/matmul.h"
#include "ops/qkv_rope/qkv_rope.h"
#include "ops/rms_norm/rms_norm.h"
#include "ops/silu_mul/silu_mul.h"
#include "runtime/kv_cache.h"

namespace roofline {

constexpr int kNumStepInputs = 7;

struct ExecContext {
  uint8_t* workspace = nullptr;
  std::array<const void*, kNumStepInputs> step_inputs{};  // indexed by StepInput
  int64_t num_tokens = 0;
  int64_t num_seqs = 0;
  int64_t block_table_width = 0;
  int64_t max_q_len = 0;                // most queries of any sequence this step; 0: unknown
  int64_t max_seq_len = 0;              // longest seq_len this step; 0: unknown
  void* attention_workspace = nullptr;  // CUDA: paged_attention_cuda_workspace_bytes(), zeroed
  DType act_dtype = DType::kF32;
  DType kv_dtype = DType::kF32;
  KvCacheShape kv_shape;
  std::vector<void*> k_cache;            // per layer
  std::vector<void*> v_cache;            // per layer
  const float* rope_inv_freq = nullptr;  // [head_dim / 2]
  // The LM head's logit tile summaries (the CUDA backend's tile sampler): the plain matmul call
  // whose y is `summarized_output` (the plan's logits) also leaves the summaries of its rows
  // (MatmulParams::summaries). Off while logit_summaries.words is null.
  const void* summarized_output = nullptr;
  LogitTileSummaries logit_summaries;
};

// Whether `c` is the call that leaves ctx's logit tile summaries: a plain or bias matmul of one
// weight (no SwiGLU or RoPE epilogue) whose y is ctx.summarized_output.
inline bool writes_logit_summaries(const PlanCall& c, const ExecContext& ctx) {
  if (ctx.logit_summaries.words == nullptr || ctx.summarized_output == nullptr) return false;
  if (c.op != OpKind::kMatmul && c.op != OpKind::kMatmulBias) return false;
  if (c.attrs.num_weight_parts != 1 || c.attrs.swiglu_epilogue || c.attrs.qkv_rope_epilogue)
    return false;
  const BufferRef& y = c.outputs[0];
  return y.kind == BufferRef::Kind::kWorkspace &&
         ctx.workspace + y.offset_bytes == ctx.summarized_output;
}

// Whether exactly one of `calls` leaves ctx's logit tile summaries, as a sampler that reads them
// every step needs (a plan whose logits come from elsewhere cannot use them).
inline bool plan_writes_logit_summaries(const std::vector<PlanCall>& calls,
                                        const ExecContext& ctx) {
  int writers = 0;
  for (const PlanCall& c : calls) writers += writes_logit_summaries(c, ctx) ? 1 : 0;
  return writers == 1;
}

namespace detail {

inline void* buffer_ptr(const BufferRef& r, const ExecContext& ctx) {
  switch (r.kind) {
    case BufferRef::Kind::kWorkspace:
      return ctx.workspace + r.offset_bytes;
    case BufferRef::Kind::kWeight:
      return const_cast<void*>(r.weight);
    case BufferRef::Kind::kStepInput:
      return const_cast<void*>(ctx.step_inputs[static_cast<size_t>(r.step_input)]);
  }
  return nullptr;
}

inline void* act(const BufferRef& r, const ExecContext& ctx) {
  ROOFLINE_CHECK(r.kind == BufferRef::Kind::kWorkspace && r.dtype == ctx.act_dtype);
  return ctx.workspace + r.offset_bytes;
}

inline int64_t dim(const BufferRef& r, int i, const ExecContext& ctx) {
  return r.shape[static_cast<size_t>(i)].eval(ctx.num_tokens, ctx.num_seqs);
}

// qkv_rope's params for a call that rotates into its first output (a qkv_rope node, or a matmul
// with the RoPE epilogue) and writes the KV cache of its layer; qkv and the q/k norms are the
// caller's.
inline QkvRopeParams qkv_rope_params(const PlanCall& c, const BufferRef& positions,
                                     const BufferRef& slot_mapping, const ExecContext& ctx) {
  QkvRopeParams p;
  p.positions = static_cast<const int32_t*>(buffer_ptr(positions, ctx));
  p.slot_mapping = static_cast<const int64_t*>(buffer_ptr(slot_mapping, ctx));
  p.q_out = act(c.outputs[0], ctx);
  p.dtype = ctx.act_dtype;
  p.k_cache = ctx.k_cache[static_cast<size_t>(c.attrs.layer)];
  p.v_cache = ctx.v_cache[static_cast<size_t>(c.attrs.layer)];
  p.kv_dtype = ctx.kv_dtype;
  p.inv_freq = ctx.rope_inv_freq;
  p.num_tokens = dim(c.outputs[0], 0, ctx);
  p.num_heads = c.attrs.num_heads;
  p.num_kv_heads = c.attrs.num_kv_heads;
  p.head_dim = c.attrs.head_dim;
  p.block_size = ctx.kv_shape.block_size;
  p.num_blocks = ctx.kv_shape.num_blocks;
  return p;
}

template <typename Kernels>
void run_matmul(const PlanCall& c, const ExecContext& ctx, Kernels& k) {
  const auto& in = c.inputs;
  const int parts = static_cast<int>(c.attrs.num_weight_parts);
  const bool bias = c.op == OpKind::kMatmulBias;
  const bool residual = c.op == OpKind::kMatmulResidual;
  const bool norm = c.attrs.rms_norm_prologue;
  const bool swiglu = c.attrs.swiglu_epilogue;
  const bool rope = c.attrs.qkv_rope_epilogue;
  ROOFLINE_CHECK(static_cast<int>(in.size()) ==
                 1 + parts * (bias ? 2 : 1) + residual + 2 * rope + norm);
  ROOFLINE_CHECK(static_cast<int>(c.outputs.size()) == 1 + norm + (swiglu || rope));
  ROOFLINE_CHECK(!residual || parts == 1);
  ROOFLINE_CHECK(!swiglu || (!bias && !residual));
  ROOFLINE_CHECK(!rope || (!swiglu && !residual));
  // The product x · Wᵀ: y itself, or with the SwiGLU / RoPE epilogue the scratch (the last output)
  // that y = silu(gate) · up / y = qkv_rope(product) is computed from.
  const BufferRef& product = swiglu || rope ? c.outputs.back() : c.outputs[0];
  // The RoPE epilogue's qkv_rope, over the product.
  QkvRopeParams rope_params;
  if (rope) {
    const size_t at = in.size() - 2 - norm;
    rope_params = qkv_rope_params(c, in[at], in[at + 1], ctx);
    rope_params.qkv = act(product, ctx);
  }
  const int64_t ldy = dim(product, 1, ctx);
  const int64_t kdim = dim(in[1], 1, ctx);
  // Are the parts (and their biases) contiguous, so one GEMM covers them?
  bool contiguous = true;
  int64_t rows = 0;
  for (int i = 0; i < parts && contiguous; ++i) {
    const BufferRef& w = in[1 + i];
    const auto* base = static_cast<const uint8_t*>(in[1].weight);
    contiguous = w.dtype == in[1].dtype && static_cast<const uint8_t*>(w.weight) ==
                                               base + rows * kdim * dtype_size_bytes(w.dtype);
    if (bias && contiguous) {
      const BufferRef& b = in[1 + parts + i];
      const auto* bbase = static_cast<const uint8_t*>(in[1 + parts].weight);
      contiguous = b.dtype == in[1 + parts].dtype && static_cast<const uint8_t*>(b.weight) ==
                                                         bbase + rows * dtype_size_bytes(b.dtype);
    }
    rows += dim(w, 0, ctx);
  }
  const int groups = contiguous ? 1 : parts;
  // One call applies the SwiGLU / RoPE epilogue itself; separate parts write the product, then
  // silu_mul / qkv_rope run over it.
  const bool fused_swiglu = swiglu && groups == 1;
  const bool fused_rope = rope && groups == 1;
  int64_t col = 0;
  for (int i = 0; i < groups; ++i) {
    const BufferRef& w = in[1 + i];
    MatmulParams p;
    p.x = act(in[0], ctx);
    if (norm && i == 0) {
      const BufferRef& nw = in.back();
      p.norm_weight = nw.weight;
      p.norm_weight_dtype = nw.dtype;
      p.norm_eps = c.attrs.eps;
      p.normed = act(c.outputs[1], ctx);
    } else if (norm) {
      p.x = act(c.outputs[1], ctx);  // normalised by the first part's call
    }
    p.w = w.weight;
    p.w_dtype = w.dtype;
    p.dtype = ctx.act_dtype;
    p.y = static_cast<uint8_t*>(act(product, ctx)) + col * dtype_size_bytes(ctx.act_dtype);
    p.m = dim(c.outputs[0], 0, ctx);
    p.n = contiguous ? ldy : dim(w, 0, ctx);
    p.k = kdim;
    p.y_row_stride = ldy;
    if (fused_swiglu) {
      p.swiglu = true;
      p.gate_up = act(product, ctx);
      p.y = act(c.outputs[0], ctx);
      p.y_row_stride = ldy / 2;
    }
    if (fused_rope) {
      p.qkv_rope = true;
      p.rope = rope_params;
    }
    if (writes_logit_summaries(c, ctx)) p.summaries = ctx.logit_summaries;
    if (bias) {
      p.bias = in[1 + parts + i].weight;
      p.bias_dtype = in[1 + parts + i].dtype;
      k.matmul_bias(p);
    } else if (residual) {
      p.residual = act(in[1 + parts], ctx);
      k.matmul_residual(p);
    } else {
      k.matmul(p);
    }
    col += p.n;
  }
  ROOFLINE_CHECK(col == ldy);
  if (swiglu && !fused_swiglu) {
    SiluMulParams s;
    s.gate_up = act(product, ctx);
    s.out = act(c.outputs[0], ctx);
    s.dtype = ctx.act_dtype;
    s.num_tokens = dim(c.outputs[0], 0, ctx);
    s.intermediate = dim(c.outputs[0], 1, ctx);
    k.silu_mul(s);
  }
  if (rope && !fused_rope) k.qkv_rope(rope_params);
}

}  // namespace detail

template <typename Kernels>
void run_plan_call(const PlanCall& c, const ExecContext& ctx, Kernels& k) {
  using detail::act;
  using detail::buffer_ptr;
  using detail::dim;
  const auto& in = c.inputs;
  const auto& out = c.outputs;
  switch (c.op) {
    case OpKind::kEmbedding: {
      EmbeddingParams p;
      p.token_ids = static_cast<const int32_t*>(buffer_ptr(in[0], ctx));
      p.table = in[1].weight;
      p.table_dtype = in[1].dtype;
      p.out = act(out[0], ctx);
      p.dtype = ctx.act_dtype;
      p.num_tokens = dim(out[0], 0, ctx);
      p.hidden = dim(out[0], 1, ctx);
      p.vocab_size = dim(in[1], 0, ctx);
      k.embedding(p);
      return;
    }
    case OpKind::kRmsNorm: {
      RmsNormParams p;
      p.x = act(in[0], ctx);
      p.weight = in[1].weight;
      p.weight_dtype = in[1].dtype;
      p.out = act(out[0], ctx);
      p.dtype = ctx.act_dtype;
      p.num_rows = dim(out[0], 0, ctx);
      p.hidden = dim(out[0], 1, ctx);
      p.eps = c.attrs.eps;
      k.rms_norm(p);
      return;
    }
    case OpKind::kAdd: {
      AddParams p;
      p.a = act(in[0], ctx);
      p.b = act(in[1], ctx);
      p.out = act(out[0], ctx);
      p.dtype = ctx.act_dtype;
      p.n = dim(out[0], 0, ctx) * dim(out[0], 1, ctx);
      k.add(p);
      return;
    }
    case OpKind::kRmsNormResidual: {
      RmsNormResidualParams p;
      p.x = act(in[0], ctx);
      p.residual_in = act(in[1], ctx);
      p.weight = in[2].weight;
      p.weight_dtype = in[2].dtype;
      p.out = act(out[0], ctx);
      p.residual_out = act(out[1], ctx);
      p.dtype = ctx.act_dtype;
      p.num_rows = dim(out[0], 0, ctx);
      p.hidden = dim(out[0], 1, ctx);
      p.eps = c.attrs.eps;
      k.rms_norm_residual(p);
      return;
    }
    case OpKind::kMatmul:
    case OpKind::kMatmulBias:
    case OpKind::kMatmulResidual:
      detail::run_matmul(c, ctx, k);
      return;
    case OpKind::kQkvRope: {
      QkvRopeParams p = detail::qkv_rope_params(c, in[1], in[2], ctx);
      p.qkv = act(in[0], ctx);
      if (c.attrs.qk_norm) {
        p.q_norm_weight = in[3].weight;
        p.k_norm_weight = in[4].weight;
        p.norm_weight_dtype = in[3].dtype;
        p.norm_eps = c.attrs.eps;
      }
      k.qkv_rope(p);
      return;
    }
    case OpKind::kAttention: {
      PagedAttentionParams p;
      p.q = act(in[0], ctx);
      p.block_tables = static_cast<const int32_t*>(buffer_ptr(in[1], ctx));
      p.seq_lens = static_cast<const int32_t*>(buffer_ptr(in[2], ctx));
      p.query_start = static_cast<const int32_t*>(buffer_ptr(in[3], ctx));
      p.k_cache = ctx.k_cache[static_cast<size_t>(c.attrs.layer)];
      p.v_cache = ctx.v_cache[static_cast<size_t>(c.attrs.layer)];
      p.kv_dtype = ctx.kv_dtype;
      p.out = act(out[0], ctx);
      p.dtype = ctx.act_dtype;
      p.num_seqs = ctx.num_seqs;
      p.num_tokens = ctx.num_tokens;
      p.num_heads = c.attrs.num_heads;
      p.num_kv_heads = c.attrs.num_kv_heads;
      p.head_dim = c.attrs.head_dim;
      p.block_size = ctx.kv_shape.block_size;
      p.num_blocks = ctx.kv_shape.num_blocks;
      p.max_blocks_per_seq = ctx.block_table_width;
      p.scale = c.attrs.scale;
      p.sliding_window = c.attrs.sliding_window;
      p.max_q_len = ctx.max_q_len;
      p.max_seq_len = ctx.max_seq_len;
      p.workspace = ctx.attention_workspace;
      k.attention(p);
      return;
    }
    case OpKind::kSiluMul: {
      SiluMulParams p;
      p.gate_up = act(in[0], ctx);
      p.out = act(out[0], ctx);
      p.dtype = ctx.act_dtype;
      p.num_tokens = dim(out[0], 0, ctx);
      p.intermediate = dim(out[0], 1, ctx);
      k.silu_mul(p);
      return;
    }
    case OpKind::kGatherLastTokens: {
      GatherRowsParams p;
      p.x = act(in[0], ctx);
      p.index = static_cast<const int32_t*>(buffer_ptr(in[1], ctx));
      p.out = act(out[0], ctx);
      p.dtype = ctx.act_dtype;
      p.num_in_rows = ctx.num_tokens;
      p.num_out_rows = dim(out[0], 0, ctx);
      p.hidden = dim(out[0], 1, ctx);
      k.gather_rows(p);
      return;
    }
  }
  ROOFLINE_CHECK_MSG(false, "plan call with an op the executor does not know");
}

}  // namespace roofline
