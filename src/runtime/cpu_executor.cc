// execute_plan_cpu: resolves each call's buffers (workspace offset, bound weight or step input) to
// pointers and calls the op's CPU function. Shapes are evaluated for the step's actual T and B;
// the plan's workspace was sized for its bucket's maximum.
#include "runtime/cpu_executor.h"

#include <algorithm>
#include <chrono>

#include "core/check.h"
#include "ops/attention/attention.h"
#include "ops/embedding/embedding.h"
#include "ops/add/add.h"
#include "ops/matmul/matmul.h"
#include "ops/qkv_rope/qkv_rope.h"
#include "ops/rms_norm/rms_norm.h"
#include "ops/silu_mul/silu_mul.h"

namespace roofline {

const void* StepBuffers::data(int step_input) const {
  switch (static_cast<StepInput>(step_input)) {
    case StepInput::kTokenIds: return token_ids.data();
    case StepInput::kPositions: return positions.data();
    case StepInput::kSlotMapping: return slot_mapping.data();
    case StepInput::kBlockTables: return block_tables.data();
    case StepInput::kSeqLens: return seq_lens.data();
    case StepInput::kQueryStart: return query_start.data();
    case StepInput::kLastTokenIndex: return last_token_index.data();
  }
  return nullptr;
}

namespace {

class CallRunner {
 public:
  explicit CallRunner(const CpuExecContext& ctx) : ctx_(ctx) {}

  const void* ptr(const BufferRef& r) const {
    switch (r.kind) {
      case BufferRef::Kind::kWorkspace: return ctx_.workspace + r.offset_bytes;
      case BufferRef::Kind::kWeight: return r.weight;
      case BufferRef::Kind::kStepInput: return ctx_.step->data(static_cast<int>(r.step_input));
    }
    return nullptr;
  }
  float* f32(const BufferRef& r) const {
    ROOFLINE_CHECK(r.kind == BufferRef::Kind::kWorkspace && r.dtype == DType::kF32);
    return reinterpret_cast<float*>(ctx_.workspace + r.offset_bytes);
  }
  int64_t dim(const BufferRef& r, int i) const {
    return r.shape[static_cast<size_t>(i)].eval(ctx_.step->num_tokens, ctx_.step->num_seqs);
  }

  void run(const PlanCall& c) const {
    const auto& in = c.inputs;
    const auto& out = c.outputs;
    switch (c.op) {
      case OpKind::kEmbedding: {
        EmbeddingParams p;
        p.token_ids = static_cast<const int32_t*>(ptr(in[0]));
        p.table = ptr(in[1]);
        p.table_dtype = in[1].dtype;
        p.out = f32(out[0]);
        p.num_tokens = dim(out[0], 0);
        p.hidden = dim(out[0], 1);
        p.vocab_size = dim(in[1], 0);
        embedding_cpu(p);
        return;
      }
      case OpKind::kRmsNorm: {
        RmsNormParams p;
        p.x = f32(in[0]);
        p.weight = ptr(in[1]);
        p.weight_dtype = in[1].dtype;
        p.out = f32(out[0]);
        p.num_rows = dim(out[0], 0);
        p.hidden = dim(out[0], 1);
        p.eps = c.attrs.eps;
        rms_norm_cpu(p);
        return;
      }
      case OpKind::kAdd: {
        AddParams p;
        p.a = f32(in[0]);
        p.b = f32(in[1]);
        p.out = f32(out[0]);
        p.n = dim(out[0], 0) * dim(out[0], 1);
        add_cpu(p);
        return;
      }
      case OpKind::kRmsNormResidual: {
        RmsNormResidualParams p;
        p.x = f32(in[0]);
        p.residual_in = f32(in[1]);
        p.weight = ptr(in[2]);
        p.weight_dtype = in[2].dtype;
        p.out = f32(out[0]);
        p.residual_out = f32(out[1]);
        p.num_rows = dim(out[0], 0);
        p.hidden = dim(out[0], 1);
        p.eps = c.attrs.eps;
        rms_norm_residual_cpu(p);
        return;
      }
      case OpKind::kMatmul:
      case OpKind::kMatmulBias: {
        // Stacked weights write adjacent column ranges of the output.
        const int parts = static_cast<int>(c.attrs.num_weight_parts);
        const bool bias = c.op == OpKind::kMatmulBias;
        ROOFLINE_CHECK(static_cast<int>(in.size()) == 1 + parts * (bias ? 2 : 1));
        float* y = f32(out[0]);
        const int64_t ldy = dim(out[0], 1);
        int64_t col = 0;
        for (int i = 0; i < parts; ++i) {
          const BufferRef& w = in[1 + i];
          MatmulParams p;
          p.x = f32(in[0]);
          p.w = ptr(w);
          p.w_dtype = w.dtype;
          p.y = y + col;
          p.m = dim(out[0], 0);
          p.n = dim(w, 0);
          p.k = dim(w, 1);
          p.y_row_stride = ldy;
          if (bias) {
            p.bias = ptr(in[1 + parts + i]);
            p.bias_dtype = in[1 + parts + i].dtype;
            matmul_bias_cpu(p);
          } else {
            matmul_cpu(p);
          }
          col += p.n;
        }
        ROOFLINE_CHECK(col == ldy);
        return;
      }
      case OpKind::kQkvRope: {
        const KvCacheShape& kv = ctx_.kv->shape();
        QkvRopeParams p;
        p.qkv = f32(in[0]);
        p.positions = static_cast<const int32_t*>(ptr(in[1]));
        p.slot_mapping = static_cast<const int64_t*>(ptr(in[2]));
        if (c.attrs.qk_norm) {
          p.q_norm_weight = ptr(in[3]);
          p.k_norm_weight = ptr(in[4]);
          p.norm_weight_dtype = in[3].dtype;
          p.norm_eps = c.attrs.eps;
        }
        p.q_out = f32(out[0]);
        p.k_cache = ctx_.kv->k(c.attrs.layer);
        p.v_cache = ctx_.kv->v(c.attrs.layer);
        p.inv_freq = ctx_.rope_inv_freq;
        p.num_tokens = dim(out[0], 0);
        p.num_heads = c.attrs.num_heads;
        p.num_kv_heads = c.attrs.num_kv_heads;
        p.head_dim = c.attrs.head_dim;
        p.block_size = kv.block_size;
        p.num_blocks = kv.num_blocks;
        qkv_rope_cpu(p);
        return;
      }
      case OpKind::kAttention: {
        const KvCacheShape& kv = ctx_.kv->shape();
        PagedAttentionParams p;
        p.q = f32(in[0]);
        p.block_tables = static_cast<const int32_t*>(ptr(in[1]));
        p.seq_lens = static_cast<const int32_t*>(ptr(in[2]));
        p.query_start = static_cast<const int32_t*>(ptr(in[3]));
        p.k_cache = ctx_.kv->k(c.attrs.layer);
        p.v_cache = ctx_.kv->v(c.attrs.layer);
        p.out = f32(out[0]);
        p.num_seqs = ctx_.step->num_seqs;
        p.num_tokens = ctx_.step->num_tokens;
        p.num_heads = c.attrs.num_heads;
        p.num_kv_heads = c.attrs.num_kv_heads;
        p.head_dim = c.attrs.head_dim;
        p.block_size = kv.block_size;
        p.max_blocks_per_seq = ctx_.step->block_table_width;
        p.scale = c.attrs.scale;
        p.sliding_window = c.attrs.sliding_window;
        paged_attention_cpu(p);
        return;
      }
      case OpKind::kSiluMul: {
        SiluMulParams p;
        p.gate_up = f32(in[0]);
        p.out = f32(out[0]);
        p.num_tokens = dim(out[0], 0);
        p.intermediate = dim(out[0], 1);
        silu_mul_cpu(p);
        return;
      }
      case OpKind::kGatherLastTokens: {
        const float* x = f32(in[0]);
        const auto* idx = static_cast<const int32_t*>(ptr(in[1]));
        float* y = f32(out[0]);
        const int64_t rows = dim(out[0], 0), hidden = dim(out[0], 1);
        for (int64_t r = 0; r < rows; ++r) {
          ROOFLINE_CHECK(idx[r] >= 0 && idx[r] < ctx_.step->num_tokens);
          std::copy(x + idx[r] * hidden, x + (idx[r] + 1) * hidden, y + r * hidden);
        }
        return;
      }
    }
    ROOFLINE_CHECK_MSG(false, "plan call with an op the CPU executor does not know");
  }

 private:
  const CpuExecContext& ctx_;
};

}  // namespace

void execute_plan_cpu(const Plan& plan, const CpuExecContext& ctx, std::vector<double>* call_ms) {
  ROOFLINE_CHECK(ctx.step->num_tokens <= plan.max_tokens && ctx.step->num_seqs <= plan.max_seqs);
  CallRunner runner(ctx);
  if (call_ms) call_ms->assign(plan.calls.size(), 0.0);
  for (size_t i = 0; i < plan.calls.size(); ++i) {
    if (!call_ms) {
      runner.run(plan.calls[i]);
      continue;
    }
    auto t0 = std::chrono::steady_clock::now();
    runner.run(plan.calls[i]);
    (*call_ms)[i] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
}

}  // namespace roofline
