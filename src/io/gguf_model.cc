// GGUF metadata -> ModelConfig, GGUF tensors -> f32 WeightStore under Hugging Face names (see
// gguf_model.h for the decisions).
//
// The metadata keys are the ones llama.cpp's convert_hf_to_gguf.py writes ({arch}.block_count,
// {arch}.attention.head_count, ...). Every tensor is checked against the shape the config
// implies before any dequantisation, so a file whose metadata and tensors disagree fails with
// both named instead of building a graph over the wrong sizes.
#include "io/gguf_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"

namespace roofline {
namespace {

struct ArchEntry {
  const char* gguf_name;
  Architecture arch;
  const char* hf_name;
};
constexpr ArchEntry kArchs[] = {
    {"llama", Architecture::kLlama, "LlamaForCausalLM"},
    {"qwen2", Architecture::kQwen2, "Qwen2ForCausalLM"},
    {"qwen3", Architecture::kQwen3, "Qwen3ForCausalLM"},
};

// Reads integer metadata, range-checked so the narrowing and later size arithmetic are safe.
class MetaReader {
 public:
  MetaReader(const GgufFile& f, std::string arch) : f_(f), arch_(std::move(arch)) {}

  std::string key(const std::string& suffix) const { return arch_ + "." + suffix; }

  Status error(const std::string& key, const std::string& what) const {
    return invalid_argument("GGUF '" + f_.source() + "': metadata '" + key + "' " + what);
  }

  // A required or defaulted integer in [lo, hi].
  Status get_int(const std::string& key, int64_t lo, int64_t hi, std::optional<int64_t> fallback,
                 int64_t* out) const {
    if (!f_.has(key)) {
      if (!fallback)
        return invalid_argument("GGUF '" + f_.source() + "' has no metadata '" + key +
                                "', which a " + arch_ +
                                " model needs; the file is incomplete or was not written by "
                                "llama.cpp's converter");
      *out = *fallback;
      return ok_status();
    }
    ROOFLINE_ASSIGN_OR_RETURN(int64_t v, f_.get_int(key));
    if (v < lo || v > hi)
      return error(key, "is " + std::to_string(v) + "; it must be between " + std::to_string(lo) +
                            " and " + std::to_string(hi));
    *out = v;
    return ok_status();
  }

  Status get_float(const std::string& key, std::optional<double> fallback, double* out) const {
    if (!f_.has(key)) {
      if (!fallback)
        return invalid_argument("GGUF '" + f_.source() + "' has no metadata '" + key +
                                "', which a " + arch_ + " model needs");
      *out = *fallback;
      return ok_status();
    }
    ROOFLINE_ASSIGN_OR_RETURN(*out, f_.get_float(key));
    if (!std::isfinite(*out)) return error(key, "is not a finite number");
    return ok_status();
  }

 private:
  const GgufFile& f_;
  std::string arch_;
};

// Loose bounds for reading; validate_model_config applies roofline's real caps afterwards.
constexpr int64_t kIntMax = int64_t{1} << 31;

Status read_rope(const GgufFile& f, const MetaReader& r, ModelConfig* c) {
  ROOFLINE_RETURN_IF_ERROR(r.get_float(r.key("rope.freq_base"), 10000.0, &c->rope_theta));
  c->rope_scaling = RopeScaling();
  std::string type = "none";
  if (f.has(r.key("rope.scaling.type"))) {
    ROOFLINE_ASSIGN_OR_RETURN(type, f.get_string(r.key("rope.scaling.type")));
  }
  if (type == "linear") {
    double factor = 0;
    ROOFLINE_RETURN_IF_ERROR(r.get_float(r.key("rope.scaling.factor"), std::nullopt, &factor));
    c->rope_scaling.type = RopeScaling::Type::kLinear;
    c->rope_scaling.factor = static_cast<float>(factor);
  } else if (type != "none") {
    return unimplemented("GGUF '" + f.source() + "': rope scaling type '" + type + "' (" +
                         r.key("rope.scaling.type") +
                         ") is not supported; roofline reads none and linear from GGUF");
  }
  // llama.cpp's converter turns Llama 3.1-style rope scaling into a rope_freqs tensor of f32
  // per-frequency divisors and writes no rope_scaling keys. transformers computes the same
  // factors from the config in a different order of operations, so mapping the tensor back to
  // RopeScaling::kLlama3 would not reproduce the reference bit for bit; refuse rather than guess.
  if (f.find_tensor("rope_freqs.weight") != nullptr)
    return unimplemented(
        "GGUF '" + f.source() +
        "' stores llama3 rope scaling as a 'rope_freqs.weight' tensor, which "
        "roofline does not read yet; load the Hugging Face model directory instead");
  return ok_status();
}

Status read_token_ids(const GgufFile& f, ModelConfig* c) {
  // Bounds here only guard the narrowing to int32; validate_model_config checks them against the
  // vocabulary.
  if (f.has("tokenizer.ggml.bos_token_id")) {
    ROOFLINE_ASSIGN_OR_RETURN(int64_t bos, f.get_int("tokenizer.ggml.bos_token_id"));
    if (bos < 0 || bos >= c->vocab_size)
      return invalid_argument("GGUF '" + f.source() + "': tokenizer.ggml.bos_token_id is " +
                              std::to_string(bos) + ", outside the vocabulary of " +
                              std::to_string(c->vocab_size));
    c->bos_token_id = static_cast<int32_t>(bos);
  }
  c->eos_token_ids.clear();
  if (f.has("tokenizer.ggml.eos_token_id")) {
    ROOFLINE_ASSIGN_OR_RETURN(int64_t eos, f.get_int("tokenizer.ggml.eos_token_id"));
    if (eos < 0 || eos >= c->vocab_size)
      return invalid_argument("GGUF '" + f.source() + "': tokenizer.ggml.eos_token_id is " +
                              std::to_string(eos) + ", outside the vocabulary of " +
                              std::to_string(c->vocab_size));
    c->eos_token_ids.push_back(static_cast<int32_t>(eos));
  }
  return ok_status();
}

// Where each ModelConfig field came from, for validate_model_config's messages.
std::string gguf_field_name(const std::string& arch, const std::string& field) {
  static const std::map<std::string, std::string> kKeys = {
      {"hidden_size", "embedding_length"},
      {"intermediate_size", "feed_forward_length"},
      {"num_hidden_layers", "block_count"},
      {"num_attention_heads", "attention.head_count"},
      {"num_key_value_heads", "attention.head_count_kv"},
      {"head_dim", "attention.key_length"},
      {"max_position_embeddings", "context_length"},
      {"rms_norm_eps", "attention.layer_norm_rms_epsilon"},
      {"rope_theta", "rope.freq_base"},
      {"rope_scaling.factor", "rope.scaling.factor"},
  };
  if (field == "vocab_size") return "tokenizer.ggml.tokens (length)";
  if (field == "bos_token_id") return "tokenizer.ggml.bos_token_id";
  if (field == "eos_token_id") return "tokenizer.ggml.eos_token_id";
  auto it = kKeys.find(field);
  return it == kKeys.end() ? field : arch + "." + it->second;
}

// ---- tensors ----

struct Expected {
  Shape shape;
  bool qk_permuted = false;  // a llama q/k projection whose rows need llama_qk_hf_row
};

// Every HF tensor `c` implies, with its shape: what dense_decoder builds the graph from.
std::map<std::string, Expected> expected_tensors(const ModelConfig& c) {
  const int64_t H = c.hidden_size, D = c.head_dim, Hq = c.num_heads, Hkv = c.num_kv_heads;
  const int64_t I = c.intermediate_size, V = c.vocab_size;
  const bool permute = c.architecture == Architecture::kLlama;
  std::map<std::string, Expected> e;
  e["model.embed_tokens.weight"] = {{V, H}};
  e["model.norm.weight"] = {{H}};
  if (!c.tie_word_embeddings) e["lm_head.weight"] = {{V, H}};
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    e[p + "input_layernorm.weight"] = {{H}};
    e[p + "post_attention_layernorm.weight"] = {{H}};
    e[p + "self_attn.q_proj.weight"] = {{Hq * D, H}, permute};
    e[p + "self_attn.k_proj.weight"] = {{Hkv * D, H}, permute};
    e[p + "self_attn.v_proj.weight"] = {{Hkv * D, H}};
    e[p + "self_attn.o_proj.weight"] = {{H, Hq * D}};
    if (c.qkv_bias) {
      e[p + "self_attn.q_proj.bias"] = {{Hq * D}, permute};
      e[p + "self_attn.k_proj.bias"] = {{Hkv * D}, permute};
      e[p + "self_attn.v_proj.bias"] = {{Hkv * D}};
    }
    if (c.o_bias) e[p + "self_attn.o_proj.bias"] = {{H}};
    if (c.qk_norm) {
      e[p + "self_attn.q_norm.weight"] = {{D}};
      e[p + "self_attn.k_norm.weight"] = {{D}};
    }
    e[p + "mlp.gate_proj.weight"] = {{I, H}};
    e[p + "mlp.up_proj.weight"] = {{I, H}};
    e[p + "mlp.down_proj.weight"] = {{H, I}};
  }
  return e;
}

Shape hf_shape(const GgufTensorInfo& t) {
  Shape s;
  s.rank = static_cast<int>(t.dims.size());
  for (int i = 0; i < s.rank; ++i) s.dims[i] = t.dims[s.rank - 1 - i];
  return s;
}

struct LoadJob {
  const GgufTensorInfo* info;
  TensorView dst;
  bool permute;
};

// Dequantises one tensor into its destination; rows are ggml rows (dims[0] elements), so a
// permuted 2-D projection is un-permuted by writing each row to its HF position, and a 1-D bias
// (one row of n elements) element by element through a scratch copy.
void run_job(const GgufFile& f, const LoadJob& job, int64_t head_dim) {
  const GgufTensorInfo& t = *job.info;
  int64_t be = 0, bb = 0;
  ROOFLINE_CHECK(ggml_block_layout(t.type, &be, &bb));
  const int64_t row_elems = t.dims[0];
  const int64_t rows = t.numel() / row_elems;
  const int64_t row_bytes = row_elems / be * bb;
  const uint8_t* src = f.tensor_data(t);
  float* dst = job.dst.as<float>();
  if (job.permute && t.dims.size() == 1) {
    std::vector<float> tmp(static_cast<size_t>(row_elems));
    ROOFLINE_CHECK(dequantize_to_f32(t.type, src, row_elems, tmp.data()).ok());
    for (int64_t i = 0; i < row_elems; ++i) dst[llama_qk_hf_row(i, head_dim)] = tmp[i];
    return;
  }
  // About 64 KiB of output per chunk: large enough to amortise scheduling, small enough that a
  // single big tensor (the embedding) spreads over every worker.
  const int64_t min_rows = std::max<int64_t>(1, 16384 / row_elems);
  ThreadPool::global().parallel_for(rows, min_rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t out_row = job.permute ? llama_qk_hf_row(r, head_dim) : r;
      // Cannot fail: the type was checked supported and rows are whole blocks (parser).
      Status s =
          dequantize_to_f32(t.type, src + r * row_bytes, row_elems, dst + out_row * row_elems);
      ROOFLINE_CHECK(s.ok());
    }
  });
}

}  // namespace

std::optional<std::string> hf_tensor_name(const std::string& g) {
  if (g == "token_embd.weight") return "model.embed_tokens.weight";
  if (g == "output_norm.weight") return "model.norm.weight";
  if (g == "output.weight") return "lm_head.weight";
  if (g.rfind("blk.", 0) != 0) return std::nullopt;
  const size_t dot = g.find('.', 4);
  if (dot == std::string::npos || dot == 4 || dot - 4 > 6) return std::nullopt;
  for (size_t i = 4; i < dot; ++i)
    if (g[i] < '0' || g[i] > '9') return std::nullopt;
  if (g[4] == '0' && dot > 5) return std::nullopt;  // "blk.01." is not llama.cpp's spelling
  const std::string layer = g.substr(4, dot - 4);
  const std::string rest = g.substr(dot + 1);
  const size_t last = rest.rfind('.');
  if (last == std::string::npos) return std::nullopt;
  const std::string base = rest.substr(0, last), suffix = rest.substr(last + 1);
  if (suffix != "weight" && suffix != "bias") return std::nullopt;
  static const std::map<std::string, std::string> kMap = {
      {"attn_norm", "input_layernorm"},    {"ffn_norm", "post_attention_layernorm"},
      {"attn_q", "self_attn.q_proj"},      {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},      {"attn_output", "self_attn.o_proj"},
      {"attn_q_norm", "self_attn.q_norm"}, {"attn_k_norm", "self_attn.k_norm"},
      {"ffn_gate", "mlp.gate_proj"},       {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
  };
  auto it = kMap.find(base);
  if (it == kMap.end()) return std::nullopt;
  return "model.layers." + layer + "." + it->second + "." + suffix;
}

int64_t llama_qk_hf_row(int64_t row, int64_t head_dim) {
  const int64_t head = row / head_dim, i = row % head_dim;
  return head * head_dim + (i % 2) * (head_dim / 2) + i / 2;
}

StatusOr<ModelConfig> model_config_from_gguf(const GgufFile& f) {
  if (!f.has("general.architecture"))
    return invalid_argument("GGUF '" + f.source() +
                            "' has no 'general.architecture': it is not a model file "
                            "(a LoRA adapter or vocabulary-only GGUF?)");
  ROOFLINE_ASSIGN_OR_RETURN(std::string arch, f.get_string("general.architecture"));
  ModelConfig c;
  const ArchEntry* entry = nullptr;
  for (const ArchEntry& e : kArchs)
    if (arch == e.gguf_name) entry = &e;
  if (entry == nullptr)
    return unimplemented("GGUF '" + f.source() + "' holds a '" + arch +
                         "' model; roofline loads GGUF architectures llama (also Mistral), "
                         "qwen2 and qwen3");
  c.architecture = entry->arch;
  c.architecture_name = entry->hf_name;
  MetaReader r(f, arch);

  int64_t experts = 0;
  ROOFLINE_RETURN_IF_ERROR(r.get_int(r.key("expert_count"), 0, kIntMax, int64_t{0}, &experts));
  if (experts > 0)
    return unimplemented("GGUF '" + f.source() + "' is a mixture-of-experts model (" +
                         r.key("expert_count") + " = " + std::to_string(experts) +
                         "); roofline loads dense GGUF models only");

  ROOFLINE_RETURN_IF_ERROR(
      r.get_int(r.key("block_count"), 1, kIntMax, std::nullopt, &c.num_layers));
  ROOFLINE_RETURN_IF_ERROR(
      r.get_int(r.key("embedding_length"), 1, kIntMax, std::nullopt, &c.hidden_size));
  ROOFLINE_RETURN_IF_ERROR(
      r.get_int(r.key("feed_forward_length"), 1, kIntMax, std::nullopt, &c.intermediate_size));
  ROOFLINE_RETURN_IF_ERROR(
      r.get_int(r.key("attention.head_count"), 1, kIntMax, std::nullopt, &c.num_heads));
  ROOFLINE_RETURN_IF_ERROR(
      r.get_int(r.key("attention.head_count_kv"), 1, kIntMax, c.num_heads, &c.num_kv_heads));
  ROOFLINE_RETURN_IF_ERROR(
      r.get_int(r.key("context_length"), 1, kIntMax, std::nullopt, &c.max_position_embeddings));
  double eps = 0;
  ROOFLINE_RETURN_IF_ERROR(
      r.get_float(r.key("attention.layer_norm_rms_epsilon"), std::nullopt, &eps));
  c.rms_norm_eps = static_cast<float>(eps);

  // head_dim as llama.cpp reads it: attention.key_length (the converter writes it when the HF
  // config has an explicit head_dim, e.g. Qwen3), else hidden / heads. rope.dimension_count is
  // the number of rotated channels, which roofline needs to be the whole head.
  if (!f.has(r.key("attention.key_length")) && c.hidden_size % c.num_heads != 0)
    return invalid_argument("GGUF '" + f.source() + "': " + r.key("embedding_length") + " (" +
                            std::to_string(c.hidden_size) + ") is not a multiple of " +
                            r.key("attention.head_count") + " (" + std::to_string(c.num_heads) +
                            ") and there is no " + r.key("attention.key_length") +
                            " to give the head size");
  ROOFLINE_RETURN_IF_ERROR(r.get_int(r.key("attention.key_length"), 1, kIntMax,
                                     c.hidden_size / c.num_heads, &c.head_dim));
  int64_t rope_dims = 0;
  ROOFLINE_RETURN_IF_ERROR(
      r.get_int(r.key("rope.dimension_count"), 1, kIntMax, c.head_dim, &rope_dims));
  int64_t value_dim = 0;
  ROOFLINE_RETURN_IF_ERROR(
      r.get_int(r.key("attention.value_length"), 1, kIntMax, c.head_dim, &value_dim));
  if (value_dim != c.head_dim)
    return unimplemented("GGUF '" + f.source() + "': " + r.key("attention.value_length") + " (" +
                         std::to_string(value_dim) + ") differs from the key length (" +
                         std::to_string(c.head_dim) + "); roofline needs equal head sizes");
  if (rope_dims != c.head_dim)
    return unimplemented("GGUF '" + f.source() + "': " + r.key("rope.dimension_count") + " is " +
                         std::to_string(rope_dims) + " but heads have " +
                         std::to_string(c.head_dim) +
                         " channels; partial rotary embeddings are not supported");

  // Vocabulary: the tokenizer's token list, cross-checked with {arch}.vocab_size when both exist.
  const int64_t tokens = f.array_length("tokenizer.ggml.tokens");
  int64_t meta_vocab = 0;
  ROOFLINE_RETURN_IF_ERROR(r.get_int(r.key("vocab_size"), 1, kIntMax, int64_t{0}, &meta_vocab));
  if (tokens < 0 && meta_vocab == 0)
    return invalid_argument("GGUF '" + f.source() +
                            "' has neither a 'tokenizer.ggml.tokens' array nor '" +
                            r.key("vocab_size") + "', so its vocabulary size is unknown");
  if (tokens >= 0 && meta_vocab != 0 && tokens != meta_vocab)
    return invalid_argument("GGUF '" + f.source() + "': tokenizer.ggml.tokens has " +
                            std::to_string(tokens) + " entries but " + r.key("vocab_size") +
                            " is " + std::to_string(meta_vocab) + "; the file contradicts itself");
  c.vocab_size = tokens >= 0 ? tokens : meta_vocab;

  ROOFLINE_RETURN_IF_ERROR(read_rope(f, r, &c));

  // What the Hugging Face config would say, read off the tensors the converter wrote.
  c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;
  const bool q_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  const bool o_bias = f.find_tensor("blk.0.attn_output.bias") != nullptr;
  switch (c.architecture) {
    case Architecture::kQwen2:  // Qwen2Attention: bias on q, k, v always, never on o
      c.qkv_bias = true;
      c.o_bias = false;
      break;
    case Architecture::kQwen3:
      c.qk_norm = true;
      [[fallthrough]];
    default:  // LlamaAttention / Qwen3Attention: attention_bias applies to q, k, v and o
      c.qkv_bias = q_bias;
      c.o_bias = o_bias;
      break;
  }
  c.sliding_window = 0;
  c.dtype = DType::kF32;  // what load_gguf_weights produces
  ROOFLINE_RETURN_IF_ERROR(read_token_ids(f, &c));
  ROOFLINE_RETURN_IF_ERROR(validate_model_config(
      c, f.source(), [&arch](const std::string& field) { return gguf_field_name(arch, field); }));
  return c;
}

StatusOr<std::unique_ptr<WeightStore>> load_gguf_weights(const GgufFile& f,
                                                         const ModelConfig& config) {
  const std::map<std::string, Expected> expected = expected_tensors(config);
  std::map<std::string, const GgufTensorInfo*> found;  // HF name -> tensor
  for (const GgufTensorInfo& t : f.tensors()) {
    std::optional<std::string> hf = hf_tensor_name(t.name);
    auto it = hf ? expected.find(*hf) : expected.end();
    if (it == expected.end())
      return unimplemented("GGUF '" + f.source() + "' has tensor '" + t.name +
                           "', which roofline's " + config.architecture_name +
                           " with this configuration has no use for (an unsupported feature "
                           "or a different architecture); refusing to ignore it");
    const Shape shape = hf_shape(t);
    if (!(shape == it->second.shape))
      return data_loss("GGUF '" + f.source() + "': tensor '" + t.name + "' has shape " +
                       shape.to_string() + " (Hugging Face order) but the metadata implies " +
                       it->second.shape.to_string() + " for '" + *hf +
                       "'; the metadata and the tensors disagree");
    int64_t be = 0, bb = 0;
    if (!ggml_block_layout(t.type, &be, &bb))
      return unimplemented("GGUF '" + f.source() + "': tensor '" + t.name + "' has type " +
                           ggml_type_name(t.type) +
                           ", which roofline cannot dequantise; supported: F32, F16, BF16, Q8_0, "
                           "Q4_0, Q4_1, Q4_K, Q6_K (re-quantise the model to one of these)");
    found.emplace(*hf, &t);
  }
  for (const auto& [name, e] : expected)
    if (found.count(name) == 0)
      return not_found("GGUF '" + f.source() + "' lacks the tensor for '" + name +
                       "', which its metadata implies; the file is incomplete or not a " +
                       config.architecture_name + " model");

  std::unique_ptr<WeightStore> store = WeightStore::create_owning(f.source());
  std::vector<LoadJob> jobs;
  jobs.reserve(found.size());
  for (const auto& [name, info] : found) {
    const Expected& e = expected.at(name);
    ROOFLINE_ASSIGN_OR_RETURN(TensorView view, store->add_owned(name, DType::kF32, e.shape));
    jobs.push_back({info, view, e.qk_permuted});
  }
  for (const LoadJob& job : jobs) run_job(f, job, config.head_dim);
  return store;
}

}  // namespace roofline
