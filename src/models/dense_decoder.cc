// build_dense_decoder: the block structure, written once, as the graph the passes then fuse.
//
//   h = embed(tokens)
//   per layer:  x = rms_norm(h);  qkv = x·[Wq|Wk|Wv] (+b);  q = qkv_rope(qkv) (+ KV write);
//               h = h + attention(q)·Wo (+b);  x = rms_norm(h);
//               h = h + silu_mul(x·[Wgate|Wup])·Wdown
//   logits = rms_norm(h's last token per sequence, or every token with all_logits) · Wlm_head
//
// Adds and norms are emitted separately; fuse_residual_rms_norm merges them.
#include "models/dense_decoder.h"

#include <charconv>
#include <cmath>
#include <set>
#include <string>

namespace roofline {

namespace {

class Builder {
 public:
  Builder(const WeightStore& w, Graph& g) : w_(w), g_(g) {}

  // Adds a weight value after checking it against the file.
  StatusOr<int> weight(const std::string& name, Shape shape) {
    auto view = w_.get_float(name, shape);
    if (!view.ok()) return view.status();
    SymShape s;
    for (int i = 0; i < shape.rank; ++i) s.push_back(SymDim::fixed(shape[i]));
    return g_.add_weight(name, view->dtype, s);
  }

 private:
  const WeightStore& w_;
  Graph& g_;
};

}  // namespace

StatusOr<Graph> build_dense_decoder(const ModelConfig& c, const DenseDecoderSpec& spec,
                                    const WeightStore& weights, const GraphOptions& options) {
  Graph g;
  Builder b(weights, g);
  const int64_t H = c.hidden_size, D = c.head_dim, Hq = c.num_heads, Hkv = c.num_kv_heads;
  const int64_t I = c.intermediate_size, V = c.vocab_size;
  const int64_t qkv_width = (Hq + 2 * Hkv) * D;
  const SymDim T = SymDim::tokens(), B = SymDim::seqs();
  auto fixed = SymDim::fixed;
  auto activation = [&](const std::string& name, SymShape shape) {
    return g.add_activation(name, std::move(shape), options.activation_dtype);
  };

  const int token_ids = g.add_step_input(StepInput::kTokenIds, DType::kI32, {T});
  const int positions = g.add_step_input(StepInput::kPositions, DType::kI32, {T});
  const int slots = g.add_step_input(StepInput::kSlotMapping, DType::kI64, {T});
  // The block table's width is a property of the runtime's bucket, not of the graph; its
  // symbolic shape records one row per sequence.
  const int block_tables = g.add_step_input(StepInput::kBlockTables, DType::kI32, {B});
  const int seq_lens = g.add_step_input(StepInput::kSeqLens, DType::kI32, {B});
  const int query_start = g.add_step_input(StepInput::kQueryStart, DType::kI32, {SymDim{0, 1, 1}});

  ROOFLINE_ASSIGN_OR_RETURN(int embed, b.weight("model.embed_tokens.weight", {V, H}));
  int h = activation("embed", {T, fixed(H)});
  g.add_node(OpKind::kEmbedding, "embed_tokens", {}, {token_ids, embed}, {h});

  NodeAttrs norm_attrs;
  norm_attrs.eps = c.rms_norm_eps;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::string n = "layers." + std::to_string(l) + ".";
    ROOFLINE_ASSIGN_OR_RETURN(int ln1, b.weight(p + "input_layernorm.weight", {H}));
    ROOFLINE_ASSIGN_OR_RETURN(int wq, b.weight(p + "self_attn.q_proj.weight", {Hq * D, H}));
    ROOFLINE_ASSIGN_OR_RETURN(int wk, b.weight(p + "self_attn.k_proj.weight", {Hkv * D, H}));
    ROOFLINE_ASSIGN_OR_RETURN(int wv, b.weight(p + "self_attn.v_proj.weight", {Hkv * D, H}));
    ROOFLINE_ASSIGN_OR_RETURN(int wo, b.weight(p + "self_attn.o_proj.weight", {H, Hq * D}));
    ROOFLINE_ASSIGN_OR_RETURN(int ln2, b.weight(p + "post_attention_layernorm.weight", {H}));
    ROOFLINE_ASSIGN_OR_RETURN(int wg, b.weight(p + "mlp.gate_proj.weight", {I, H}));
    ROOFLINE_ASSIGN_OR_RETURN(int wu, b.weight(p + "mlp.up_proj.weight", {I, H}));
    ROOFLINE_ASSIGN_OR_RETURN(int wd, b.weight(p + "mlp.down_proj.weight", {H, I}));

    int x = activation(n + "attn_norm", {T, fixed(H)});
    g.add_node(OpKind::kRmsNorm, n + "input_layernorm", norm_attrs, {h, ln1}, {x});

    int qkv = activation(n + "qkv", {T, fixed(qkv_width)});
    NodeAttrs mm;
    mm.num_weight_parts = 3;
    if (spec.qkv_bias) {
      ROOFLINE_ASSIGN_OR_RETURN(int bq, b.weight(p + "self_attn.q_proj.bias", {Hq * D}));
      ROOFLINE_ASSIGN_OR_RETURN(int bk, b.weight(p + "self_attn.k_proj.bias", {Hkv * D}));
      ROOFLINE_ASSIGN_OR_RETURN(int bv, b.weight(p + "self_attn.v_proj.bias", {Hkv * D}));
      g.add_node(OpKind::kMatmulBias, n + "qkv_proj", mm, {x, wq, wk, wv, bq, bk, bv}, {qkv});
    } else {
      g.add_node(OpKind::kMatmul, n + "qkv_proj", mm, {x, wq, wk, wv}, {qkv});
    }

    NodeAttrs attn;
    attn.layer = l;
    attn.num_heads = Hq;
    attn.num_kv_heads = Hkv;
    attn.head_dim = D;
    attn.eps = c.rms_norm_eps;
    attn.qk_norm = spec.qk_norm;
    int q = activation(n + "q_rot", {T, fixed(Hq * D)});
    std::vector<int> rope_in = {qkv, positions, slots};
    if (spec.qk_norm) {
      ROOFLINE_ASSIGN_OR_RETURN(int qn, b.weight(p + "self_attn.q_norm.weight", {D}));
      ROOFLINE_ASSIGN_OR_RETURN(int kn, b.weight(p + "self_attn.k_norm.weight", {D}));
      rope_in.push_back(qn);
      rope_in.push_back(kn);
    }
    g.add_node(OpKind::kQkvRope, n + "qkv_rope", attn, rope_in, {q});

    attn.scale = 1.0f / std::sqrt(static_cast<float>(D));
    attn.sliding_window = c.sliding_window;
    int ctx = activation(n + "attn_out", {T, fixed(Hq * D)});
    g.add_node(OpKind::kAttention, n + "attention", attn, {q, block_tables, seq_lens, query_start},
               {ctx});

    int o = activation(n + "o", {T, fixed(H)});
    NodeAttrs one;
    one.num_weight_parts = 1;
    if (spec.o_bias) {
      ROOFLINE_ASSIGN_OR_RETURN(int bo, b.weight(p + "self_attn.o_proj.bias", {H}));
      g.add_node(OpKind::kMatmulBias, n + "o_proj", one, {ctx, wo, bo}, {o});
    } else {
      g.add_node(OpKind::kMatmul, n + "o_proj", one, {ctx, wo}, {o});
    }
    int h2 = activation(n + "resid_attn", {T, fixed(H)});
    g.add_node(OpKind::kAdd, n + "attn_residual", {}, {h, o}, {h2});

    int x2 = activation(n + "mlp_norm", {T, fixed(H)});
    g.add_node(OpKind::kRmsNorm, n + "post_attention_layernorm", norm_attrs, {h2, ln2}, {x2});
    int gu = activation(n + "gate_up", {T, fixed(2 * I)});
    NodeAttrs two;
    two.num_weight_parts = 2;
    g.add_node(OpKind::kMatmul, n + "gate_up_proj", two, {x2, wg, wu}, {gu});
    int act = activation(n + "act", {T, fixed(I)});
    g.add_node(OpKind::kSiluMul, n + "silu_mul", {}, {gu}, {act});
    int down = activation(n + "down", {T, fixed(H)});
    g.add_node(OpKind::kMatmul, n + "down_proj", one, {act, wd}, {down});
    int h3 = activation(n + "resid_mlp", {T, fixed(H)});
    g.add_node(OpKind::kAdd, n + "mlp_residual", {}, {h2, down}, {h3});
    h = h3;
  }

  // The last token per sequence is gathered before the final norm (row-wise: the same bits), so the
  // norm runs on those rows only and fuse_rms_norm_matmul folds it into the LM head's GEMM.
  SymDim rows = T;
  if (!options.all_logits) {
    const int last_index = g.add_step_input(StepInput::kLastTokenIndex, DType::kI32, {B});
    int last = activation("last_hidden", {B, fixed(H)});
    g.add_node(OpKind::kGatherLastTokens, "gather_last_tokens", {}, {h, last_index}, {last});
    h = last;
    rows = B;
  }
  ROOFLINE_ASSIGN_OR_RETURN(int final_norm, b.weight("model.norm.weight", {H}));
  int normed = activation("final_norm", {rows, fixed(H)});
  g.add_node(OpKind::kRmsNorm, "norm", norm_attrs, {h, final_norm}, {normed});
  const bool tied = c.tie_word_embeddings && !weights.contains("lm_head.weight");
  int lm_head = embed;
  if (!tied) {
    ROOFLINE_ASSIGN_OR_RETURN(lm_head, b.weight("lm_head.weight", {V, H}));
  }
  int logits = activation("logits", {rows, fixed(V)});
  NodeAttrs one;
  one.num_weight_parts = 1;
  g.add_node(OpKind::kMatmul, "lm_head", one, {normed, lm_head}, {logits});
  g.mark_output(logits);
  return g;
}

std::vector<std::pair<std::string, Shape>> dense_decoder_weight_shapes(const ModelConfig& c) {
  const int64_t H = c.hidden_size, D = c.head_dim, Hq = c.num_heads, Hkv = c.num_kv_heads;
  const int64_t I = c.intermediate_size, V = c.vocab_size;
  std::vector<std::pair<std::string, Shape>> w = {{"model.embed_tokens.weight", {V, H}},
                                                  {"model.norm.weight", {H}}};
  if (!c.tie_word_embeddings) w.push_back({"lm_head.weight", {V, H}});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    w.push_back({p + "input_layernorm.weight", {H}});
    w.push_back({p + "post_attention_layernorm.weight", {H}});
    w.push_back({p + "self_attn.q_proj.weight", {Hq * D, H}});
    w.push_back({p + "self_attn.k_proj.weight", {Hkv * D, H}});
    w.push_back({p + "self_attn.v_proj.weight", {Hkv * D, H}});
    w.push_back({p + "self_attn.o_proj.weight", {H, Hq * D}});
    if (c.qkv_bias) {
      w.push_back({p + "self_attn.q_proj.bias", {Hq * D}});
      w.push_back({p + "self_attn.k_proj.bias", {Hkv * D}});
      w.push_back({p + "self_attn.v_proj.bias", {Hkv * D}});
    }
    if (c.o_bias) w.push_back({p + "self_attn.o_proj.bias", {H}});
    if (c.qk_norm) {
      w.push_back({p + "self_attn.q_norm.weight", {D}});
      w.push_back({p + "self_attn.k_norm.weight", {D}});
    }
    w.push_back({p + "mlp.gate_proj.weight", {I, H}});
    w.push_back({p + "mlp.up_proj.weight", {I, H}});
    w.push_back({p + "mlp.down_proj.weight", {H, I}});
  }
  return w;
}

StatusOr<std::vector<std::string>> unused_checkpoint_tensors(const ModelConfig& c,
                                                             const WeightStore& weights) {
  std::set<std::string> read;
  for (const auto& [name, shape] : dense_decoder_weight_shapes(c)) read.insert(name);
  read.insert("lm_head.weight");  // a tied model's graph reads it too when the file has it
  const std::string layers = "model.layers.";
  std::vector<std::string> unused;
  for (const std::string& name : weights.names()) {
    if (read.count(name) != 0) continue;
    if (name.rfind(layers, 0) == 0) {
      const size_t dot = name.find('.', layers.size());
      const std::string index = name.substr(layers.size(), dot - layers.size());
      int64_t layer = -1;
      const auto [end, ec] = std::from_chars(index.data(), index.data() + index.size(), layer);
      if (ec == std::errc() && end == index.data() + index.size() && layer >= c.num_layers)
        return invalid_argument(
            "the weights in '" + weights.dir() + "' hold layer " + std::to_string(layer) + " ('" +
            name + "') but config.json's num_hidden_layers is " + std::to_string(c.num_layers) +
            ": the config does not describe this checkpoint");
      const std::string inv_freq = ".rotary_emb.inv_freq";  // a buffer older exports saved
      if (name.size() > inv_freq.size() &&
          name.compare(name.size() - inv_freq.size(), inv_freq.size(), inv_freq) == 0)
        continue;
    }
    unused.push_back(name);
  }
  return unused;
}

StatusOr<Graph> build_model_graph(const ModelConfig& config, const WeightStore& weights,
                                  const GraphOptions& options) {
  switch (config.architecture) {
    case Architecture::kLlama:
    case Architecture::kMistral:
      return build_llama_graph(config, weights, options);
    case Architecture::kQwen2:
    case Architecture::kQwen3:
      return build_qwen_graph(config, weights, options);
  }
  return unimplemented("no graph builder for this architecture");
}

}  // namespace roofline
