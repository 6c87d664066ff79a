// Hugging Face config.json -> ModelConfig, validated field by field.
//
// Every value's JSON type is checked before it is read, so nlohmann never throws out of here and
// every error names the field and the file. Integers are range-checked against caps far above any
// released model so that later size arithmetic (weights, KV cache, workspaces) cannot overflow.
// Per-architecture behaviour (biases, qk-norm, sliding windows) follows transformers' modeling
// code, because the Hugging Face outputs are what roofline is tested against.
#include "io/model_config.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "core/mapped_file.h"
#include "io/json_kind.h"

namespace roofline {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxConfigBytes = 16ull << 20;

// Caps: well above every released model, low enough that products of them fit int64.
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxHidden = 65536;
constexpr int64_t kMaxIntermediate = int64_t{1} << 20;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxHeads = 1024;
constexpr int64_t kMaxHeadDim = 1024;
constexpr int64_t kMaxPositions = int64_t{1} << 24;  // Llama 4 Scout: 10M
// RoPE runs in float32 (models/rope.cc): theta and the scaling factors must stay finite and
// nonzero there. Released models use theta 1e4-1e8 and factors up to a few hundred; a theta at or
// below 1 has no meaning (the frequencies would rise with the channel index).
constexpr double kMinRopeTheta = 1.0;  // exclusive
constexpr double kMaxRopeTheta = 1e12;
constexpr double kMaxRopeFactor = 1e6;

struct ArchitectureEntry {
  const char* name;
  Architecture arch;
};
constexpr ArchitectureEntry kArchitectures[] = {
    {"LlamaForCausalLM", Architecture::kLlama},
    {"MistralForCausalLM", Architecture::kMistral},
    {"Qwen2ForCausalLM", Architecture::kQwen2},
    {"Qwen3ForCausalLM", Architecture::kQwen3},
};

std::string supported_architectures() {
  std::string s;
  for (const ArchitectureEntry& e : kArchitectures) {
    if (!s.empty()) s += ", ";
    s += e.name;
  }
  return s;
}

// Reads typed fields of one JSON object; `scope` is "" for the top level or e.g. "rope_scaling"
// so messages say which nested object a field came from. A field that is present but null reads
// as absent, as transformers treats None.
class FieldReader {
 public:
  FieldReader(const json& obj, const std::string& source, std::string scope)
      : obj_(obj), source_(source), scope_(std::move(scope)) {}

  const json* find(const char* key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool has(const char* key) const { return find(key) != nullptr; }

  std::string field(const char* key) const {
    return "'" + (scope_.empty() ? std::string() : scope_ + ".") + key + "'";
  }
  Status error(StatusCode code, const char* key, const std::string& what) const {
    return Status(code, "model config '" + source_ + "': " + field(key) + " " + what);
  }
  Status missing(const char* key) const {
    return error(StatusCode::kInvalidArgument, key,
                 "is missing; it is required (is this a Hugging Face config.json?)");
  }

  // An integer in [min, max]; absent -> `fallback`, or an error when there is none.
  Status get_int(const char* key, int64_t min, int64_t max, std::optional<int64_t> fallback,
                 int64_t* out) const {
    const json* v = find(key);
    if (v == nullptr) {
      if (!fallback) return missing(key);
      *out = *fallback;
      return ok_status();
    }
    int64_t value = 0;
    if (v->is_number_unsigned()) {
      uint64_t u = v->get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return range_error(key, v->dump(), min, max);
      value = static_cast<int64_t>(u);
    } else if (v->is_number_integer()) {
      value = v->get<int64_t>();
    } else {
      return error(StatusCode::kInvalidArgument, key,
                   "must be an integer but is " + json_kind(*v) + " (" + v->dump() + ")");
    }
    if (value < min || value > max) return range_error(key, std::to_string(value), min, max);
    *out = value;
    return ok_status();
  }

  // A finite number strictly inside (min_exclusive, max_exclusive); integers are accepted
  // (configs write "rope_theta": 500000).
  Status get_number(const char* key, double min_exclusive, double max_exclusive,
                    std::optional<double> fallback, double* out) const {
    const json* v = find(key);
    if (v == nullptr) {
      if (!fallback) return missing(key);
      *out = *fallback;
      return ok_status();
    }
    if (!v->is_number())
      return error(StatusCode::kInvalidArgument, key,
                   "must be a number but is " + json_kind(*v) + " (" + v->dump() + ")");
    double value = v->get<double>();
    if (!std::isfinite(value) || !(value > min_exclusive) || !(value < max_exclusive))
      return error(StatusCode::kInvalidArgument, key,
                   "is " + v->dump() + "; it must be greater than " + fmt(min_exclusive) +
                       (std::isfinite(max_exclusive) ? " and less than " + fmt(max_exclusive)
                                                     : std::string()));
    *out = value;
    return ok_status();
  }

  Status get_bool(const char* key, bool fallback, bool* out) const {
    const json* v = find(key);
    if (v == nullptr) {
      *out = fallback;
      return ok_status();
    }
    if (!v->is_boolean())
      return error(StatusCode::kInvalidArgument, key,
                   "must be true or false but is " + json_kind(*v) + " (" + v->dump() + ")");
    *out = v->get<bool>();
    return ok_status();
  }

  // A string, or nullopt when absent.
  Status get_string(const char* key, std::optional<std::string>* out) const {
    const json* v = find(key);
    if (v == nullptr) {
      out->reset();
      return ok_status();
    }
    if (!v->is_string())
      return error(StatusCode::kInvalidArgument, key,
                   "must be a string but is " + json_kind(*v) + " (" + v->dump() + ")");
    *out = v->get<std::string>();
    return ok_status();
  }

 private:
  static std::string fmt(double x) {
    std::string s = std::to_string(x);
    while (s.size() > 1 && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }
  Status range_error(const char* key, const std::string& value, int64_t min, int64_t max) const {
    return error(StatusCode::kInvalidArgument, key,
                 "is " + value + "; it must be between " + std::to_string(min) + " and " +
                     std::to_string(max));
  }

  const json& obj_;
  const std::string& source_;
  std::string scope_;
};

Status parse_architecture(const json& root, const std::string& source, ModelConfig* c) {
  auto it = root.find("architectures");
  if (it == root.end() || !it->is_array() || it->empty() || !(*it)[0].is_string())
    return invalid_argument("model config '" + source +
                            "': 'architectures' must be a non-empty list of class names such as "
                            "[\"LlamaForCausalLM\"]");
  c->architecture_name = (*it)[0].get<std::string>();
  for (const ArchitectureEntry& e : kArchitectures) {
    if (c->architecture_name == e.name) {
      c->architecture = e.arch;
      return ok_status();
    }
  }
  return unimplemented("model config '" + source + "': architecture '" + c->architecture_name +
                       "' is not supported; supported: " + supported_architectures());
}

// Reads the rope type and its parameters from `rope` (transformers 5 `rope_parameters` or 4.x
// `rope_scaling`); `r` reads that object.
Status parse_rope_type(const FieldReader& r, ModelConfig* c) {
  std::optional<std::string> type;
  const char* type_key = "rope_type";
  ROOFLINE_RETURN_IF_ERROR(r.get_string(type_key, &type));
  if (!type) {
    type_key = "type";  // the name before transformers 4.45
    ROOFLINE_RETURN_IF_ERROR(r.get_string(type_key, &type));
  }
  RopeScaling& s = c->rope_scaling;
  s = RopeScaling();
  if (!type || *type == "default") return ok_status();
  if (*type == "linear") {
    s.type = RopeScaling::Type::kLinear;
    double factor = 0;
    ROOFLINE_RETURN_IF_ERROR(r.get_number("factor", 0.0, kMaxRopeFactor, std::nullopt, &factor));
    s.factor = static_cast<float>(factor);
    return ok_status();
  }
  if (*type == "llama3") {
    s.type = RopeScaling::Type::kLlama3;
    double factor = 0, low = 0, high = 0;
    ROOFLINE_RETURN_IF_ERROR(r.get_number("factor", 0.0, kMaxRopeFactor, std::nullopt, &factor));
    ROOFLINE_RETURN_IF_ERROR(
        r.get_number("low_freq_factor", 0.0, kMaxRopeFactor, std::nullopt, &low));
    ROOFLINE_RETURN_IF_ERROR(
        r.get_number("high_freq_factor", 0.0, kMaxRopeFactor, std::nullopt, &high));
    ROOFLINE_RETURN_IF_ERROR(r.get_int("original_max_position_embeddings", 1, kMaxPositions,
                                       std::nullopt, &s.original_max_position));
    // The llama3 ramp divides by (high - low); equal factors would divide by zero.
    if (!(high > low))
      return r.error(StatusCode::kInvalidArgument, "high_freq_factor",
                     "must be greater than low_freq_factor for llama3 rope scaling");
    s.factor = static_cast<float>(factor);
    s.low_freq_factor = static_cast<float>(low);
    s.high_freq_factor = static_cast<float>(high);
    return ok_status();
  }
  return r.error(StatusCode::kUnimplemented, type_key,
                 "is '" + *type +
                     "', a rope type roofline does not support; supported: default, "
                     "linear, llama3");
}

Status parse_rope(const json& root, const std::string& source, ModelConfig* c) {
  FieldReader top(root, source, "");
  auto params_it = root.find("rope_parameters");
  if (params_it != root.end() && !params_it->is_null()) {
    // transformers 5: {"rope_type": ..., "rope_theta": ..., <type parameters>}.
    if (!params_it->is_object())
      return top.error(StatusCode::kInvalidArgument, "rope_parameters",
                       "must be an object but is " + json_kind(*params_it));
    for (auto it = params_it->begin(); it != params_it->end(); ++it)
      if (it.value().is_object())
        return top.error(StatusCode::kUnimplemented, "rope_parameters",
                         "holds per-layer-type parameters ('" + it.key() +
                             "'); roofline supports one rope for every layer");
    FieldReader r(*params_it, source, "rope_parameters");
    // rope_theta lives inside rope_parameters in v5; a top-level one is the fallback.
    if (r.has("rope_theta")) {
      ROOFLINE_RETURN_IF_ERROR(
          r.get_number("rope_theta", kMinRopeTheta, kMaxRopeTheta, std::nullopt, &c->rope_theta));
    } else {
      ROOFLINE_RETURN_IF_ERROR(
          top.get_number("rope_theta", kMinRopeTheta, kMaxRopeTheta, 10000.0, &c->rope_theta));
    }
    return parse_rope_type(r, c);
  }
  // transformers 4.x: top-level rope_theta, rope_scaling null or an object.
  ROOFLINE_RETURN_IF_ERROR(
      top.get_number("rope_theta", kMinRopeTheta, kMaxRopeTheta, 10000.0, &c->rope_theta));
  auto scaling_it = root.find("rope_scaling");
  if (scaling_it == root.end() || scaling_it->is_null()) {
    c->rope_scaling = RopeScaling();
    return ok_status();
  }
  if (!scaling_it->is_object())
    return top.error(StatusCode::kInvalidArgument, "rope_scaling",
                     "must be null or an object but is " + json_kind(*scaling_it));
  return parse_rope_type(FieldReader(*scaling_it, source, "rope_scaling"), c);
}

Status parse_dtype(const FieldReader& r, ModelConfig* c) {
  const char* key = r.has("dtype") ? "dtype" : "torch_dtype";  // v5 renamed torch_dtype
  std::optional<std::string> s;
  ROOFLINE_RETURN_IF_ERROR(r.get_string(key, &s));
  if (!s || *s == "bfloat16") {
    c->dtype = DType::kBF16;
  } else if (*s == "float16") {
    c->dtype = DType::kF16;
  } else if (*s == "float32") {
    c->dtype = DType::kF32;
  } else {
    return r.error(StatusCode::kUnimplemented, key,
                   "is '" + *s + "'; supported: bfloat16, float16, float32");
  }
  return ok_status();
}

Status parse_token_ids(const json& root, const std::string& source, ModelConfig* c) {
  FieldReader r(root, source, "");
  int64_t bos = -1;
  ROOFLINE_RETURN_IF_ERROR(r.get_int("bos_token_id", 0, c->vocab_size - 1, -1, &bos));
  c->bos_token_id = static_cast<int32_t>(bos);

  c->eos_token_ids.clear();
  const json* eos = r.find("eos_token_id");
  if (eos == nullptr) return ok_status();
  if (eos->is_array()) {
    for (size_t i = 0; i < eos->size(); ++i) {
      // Each element is checked through a one-entry object so it gets the same messages.
      json one = json::object({{"eos_token_id", (*eos)[i]}});
      int64_t id = 0;
      ROOFLINE_RETURN_IF_ERROR(
          FieldReader(one, source, "")
              .get_int("eos_token_id", 0, c->vocab_size - 1, std::nullopt, &id));
      c->eos_token_ids.push_back(static_cast<int32_t>(id));
    }
    return ok_status();
  }
  int64_t id = 0;
  ROOFLINE_RETURN_IF_ERROR(r.get_int("eos_token_id", 0, c->vocab_size - 1, std::nullopt, &id));
  c->eos_token_ids.push_back(static_cast<int32_t>(id));
  return ok_status();
}

Status parse_attention_features(const FieldReader& r, ModelConfig* c) {
  bool attention_bias = false;
  ROOFLINE_RETURN_IF_ERROR(r.get_bool("attention_bias", false, &attention_bias));
  switch (c->architecture) {
    case Architecture::kLlama:
      // LlamaAttention: q, k, v and o all use bias=config.attention_bias.
      c->qkv_bias = attention_bias;
      c->o_bias = attention_bias;
      c->sliding_window = 0;
      break;
    case Architecture::kMistral: {
      // MistralAttention builds q, k, v, o with bias=False whatever the config says.
      c->qkv_bias = false;
      c->o_bias = false;
      ROOFLINE_RETURN_IF_ERROR(
          r.get_int("sliding_window", 1, kMaxPositions, int64_t{0}, &c->sliding_window));
      break;
    }
    case Architecture::kQwen2:
    case Architecture::kQwen3: {
      if (c->architecture == Architecture::kQwen2) {
        // Qwen2Attention: bias=True on q, k, v; bias=False on o.
        c->qkv_bias = true;
        c->o_bias = false;
      } else {
        // Qwen3Attention: q, k, v and o use bias=config.attention_bias; q/k RMSNorm per head.
        c->qkv_bias = attention_bias;
        c->o_bias = attention_bias;
        c->qk_norm = true;
      }
      bool use_sliding_window = false;
      ROOFLINE_RETURN_IF_ERROR(r.get_bool("use_sliding_window", false, &use_sliding_window));
      if (use_sliding_window)
        return r.error(StatusCode::kUnimplemented, "use_sliding_window",
                       "is true; Qwen sliding windows apply to some layers only "
                       "(max_window_layers), which roofline does not support yet");
      c->sliding_window = 0;
      break;
    }
  }
  return ok_status();
}

Status parse_config_object(const json& root, const std::string& source, ModelConfig* c) {
  if (!root.is_object())
    return invalid_argument("model config '" + source + "' is " + json_kind(root) +
                            ", not a JSON object");
  ROOFLINE_RETURN_IF_ERROR(parse_architecture(root, source, c));
  FieldReader r(root, source, "");

  ROOFLINE_RETURN_IF_ERROR(r.get_int("vocab_size", 1, kMaxVocab, std::nullopt, &c->vocab_size));
  ROOFLINE_RETURN_IF_ERROR(r.get_int("hidden_size", 1, kMaxHidden, std::nullopt, &c->hidden_size));
  ROOFLINE_RETURN_IF_ERROR(
      r.get_int("intermediate_size", 1, kMaxIntermediate, std::nullopt, &c->intermediate_size));
  ROOFLINE_RETURN_IF_ERROR(
      r.get_int("num_hidden_layers", 1, kMaxLayers, std::nullopt, &c->num_layers));
  ROOFLINE_RETURN_IF_ERROR(
      r.get_int("num_attention_heads", 1, kMaxHeads, std::nullopt, &c->num_heads));
  ROOFLINE_RETURN_IF_ERROR(
      r.get_int("num_key_value_heads", 1, kMaxHeads, c->num_heads, &c->num_kv_heads));
  if (c->num_heads % c->num_kv_heads != 0)
    return r.error(StatusCode::kInvalidArgument, "num_key_value_heads",
                   "is " + std::to_string(c->num_kv_heads) +
                       ", which does not divide "
                       "num_attention_heads (" +
                       std::to_string(c->num_heads) + ")");

  if (r.has("head_dim")) {
    ROOFLINE_RETURN_IF_ERROR(r.get_int("head_dim", 1, kMaxHeadDim, std::nullopt, &c->head_dim));
  } else {
    if (c->hidden_size % c->num_heads != 0)
      return r.error(StatusCode::kInvalidArgument, "hidden_size",
                     "(" + std::to_string(c->hidden_size) +
                         ") is not a multiple of "
                         "num_attention_heads (" +
                         std::to_string(c->num_heads) +
                         ") and there is no 'head_dim' to say the head size");
    c->head_dim = c->hidden_size / c->num_heads;
    if (c->head_dim > kMaxHeadDim)
      return r.error(StatusCode::kInvalidArgument, "hidden_size",
                     "/ num_attention_heads gives head_dim " + std::to_string(c->head_dim) +
                         ", above the limit " + std::to_string(kMaxHeadDim));
  }
  // RoPE rotates pairs of channels, so a head must have an even number of them.
  if (c->head_dim % 2 != 0)
    return r.error(StatusCode::kInvalidArgument, "head_dim",
                   "is " + std::to_string(c->head_dim) + "; rotary embeddings need it even");

  ROOFLINE_RETURN_IF_ERROR(r.get_int("max_position_embeddings", 1, kMaxPositions, int64_t{4096},
                                     &c->max_position_embeddings));
  double eps = 0;
  ROOFLINE_RETURN_IF_ERROR(r.get_number("rms_norm_eps", 0.0, 1.0, 1e-6, &eps));
  c->rms_norm_eps = static_cast<float>(eps);
  if (!(c->rms_norm_eps > 0.0f))  // a positive double below float's range rounds to 0
    return r.error(StatusCode::kInvalidArgument, "rms_norm_eps", "is too small for float32");

  std::optional<std::string> act;
  ROOFLINE_RETURN_IF_ERROR(r.get_string("hidden_act", &act));
  if (act && *act != "silu")
    return r.error(StatusCode::kUnimplemented, "hidden_act",
                   "is '" + *act + "'; roofline supports only 'silu'");
  bool mlp_bias = false;
  ROOFLINE_RETURN_IF_ERROR(r.get_bool("mlp_bias", false, &mlp_bias));
  if (mlp_bias)
    return r.error(StatusCode::kUnimplemented, "mlp_bias",
                   "is true; roofline does not support biases in the MLP");
  ROOFLINE_RETURN_IF_ERROR(r.get_bool("tie_word_embeddings", false, &c->tie_word_embeddings));

  ROOFLINE_RETURN_IF_ERROR(parse_rope(root, source, c));
  ROOFLINE_RETURN_IF_ERROR(parse_attention_features(r, c));
  ROOFLINE_RETURN_IF_ERROR(parse_dtype(r, c));
  ROOFLINE_RETURN_IF_ERROR(parse_token_ids(root, source, c));
  // The field readers above already enforce these ranges with config.json-specific messages;
  // this is the shared backstop that GGUF metadata goes through too.
  return validate_model_config(*c, source);
}

}  // namespace

Status validate_model_config(const ModelConfig& c, const std::string& source,
                             const std::function<std::string(const std::string&)>& field_name) {
  auto name = [&](const char* field) {
    return "'" + (field_name ? field_name(field) : std::string(field)) + "'";
  };
  auto fail = [&](const char* field, const std::string& what) {
    return invalid_argument("model config '" + source + "': " + name(field) + " " + what);
  };
  auto range = [&](const char* field, int64_t v, int64_t lo, int64_t hi) {
    if (v >= lo && v <= hi) return ok_status();
    return fail(field, "is " + std::to_string(v) + "; it must be between " + std::to_string(lo) +
                           " and " + std::to_string(hi));
  };
  ROOFLINE_RETURN_IF_ERROR(range("vocab_size", c.vocab_size, 1, kMaxVocab));
  ROOFLINE_RETURN_IF_ERROR(range("hidden_size", c.hidden_size, 1, kMaxHidden));
  ROOFLINE_RETURN_IF_ERROR(range("intermediate_size", c.intermediate_size, 1, kMaxIntermediate));
  ROOFLINE_RETURN_IF_ERROR(range("num_hidden_layers", c.num_layers, 1, kMaxLayers));
  ROOFLINE_RETURN_IF_ERROR(range("num_attention_heads", c.num_heads, 1, kMaxHeads));
  ROOFLINE_RETURN_IF_ERROR(range("num_key_value_heads", c.num_kv_heads, 1, kMaxHeads));
  if (c.num_heads % c.num_kv_heads != 0)
    return fail("num_key_value_heads",
                "is " + std::to_string(c.num_kv_heads) + ", which does not divide " +
                    name("num_attention_heads") + " (" + std::to_string(c.num_heads) + ")");
  ROOFLINE_RETURN_IF_ERROR(range("head_dim", c.head_dim, 1, kMaxHeadDim));
  // RoPE rotates pairs of channels, so a head must have an even number of them.
  if (c.head_dim % 2 != 0)
    return fail("head_dim",
                "is " + std::to_string(c.head_dim) + "; rotary embeddings need it even");
  ROOFLINE_RETURN_IF_ERROR(
      range("max_position_embeddings", c.max_position_embeddings, 1, kMaxPositions));
  if (!std::isfinite(c.rms_norm_eps) || !(c.rms_norm_eps > 0.0f) || !(c.rms_norm_eps < 1.0f))
    return fail("rms_norm_eps", "is " + std::to_string(c.rms_norm_eps) +
                                    "; it must be positive, below 1 and representable in float32");
  if (!(c.rope_theta > kMinRopeTheta) || !(c.rope_theta < kMaxRopeTheta))
    return fail("rope_theta", "is " + std::to_string(c.rope_theta) +
                                  "; it must be greater than 1 and less than 1e12");
  // Each factor as RoPE reads it, in float32: a positive double below float's range rounds to 0.
  const RopeScaling& s = c.rope_scaling;
  const std::pair<const char*, float> factors[] = {
      {"rope_scaling.factor", s.factor},
      {"rope_scaling.low_freq_factor", s.low_freq_factor},
      {"rope_scaling.high_freq_factor", s.high_freq_factor}};
  for (const auto& [field, v] : factors) {
    if (!(v > 0.0f) || !(v < kMaxRopeFactor))
      return fail(field,
                  "is " + std::to_string(v) + "; it must be positive in float32 and less than 1e6");
  }
  // The llama3 ramp divides by high - low, in float32.
  if (s.type == RopeScaling::Type::kLlama3 && !(s.high_freq_factor - s.low_freq_factor > 0.0f))
    return fail("rope_scaling.high_freq_factor",
                "is " + std::to_string(s.high_freq_factor) + "; it must be greater than " +
                    name("rope_scaling.low_freq_factor") + " (" +
                    std::to_string(s.low_freq_factor) + ") in float32");
  if (s.original_max_position < 1)
    return fail("rope_scaling.original_max_position_embeddings",
                "is " + std::to_string(s.original_max_position) + "; it must be positive");
  ROOFLINE_RETURN_IF_ERROR(range("bos_token_id", c.bos_token_id, -1, c.vocab_size - 1));
  for (int32_t id : c.eos_token_ids)
    ROOFLINE_RETURN_IF_ERROR(range("eos_token_id", id, 0, c.vocab_size - 1));
  return ok_status();
}

const char* architecture_name(Architecture a) {
  for (const ArchitectureEntry& e : kArchitectures)
    if (e.arch == a) return e.name;
  return "unknown";
}

StatusOr<ModelConfig> parse_model_config(const std::string& json_text, const std::string& source) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    return invalid_argument("model config '" + source + "' is not valid JSON (" + e.what() +
                            "); re-download or fix the file");
  }
  ModelConfig config;
  // The readers check types before every get<>, so nlohmann should never throw here; the catch
  // keeps that a Status rather than an escaping exception if a check is ever missed.
  try {
    ROOFLINE_RETURN_IF_ERROR(parse_config_object(root, source, &config));
  } catch (const json::exception& e) {
    return invalid_argument("model config '" + source + "' has an unexpected value (" + e.what() +
                            ")");
  }
  return config;
}

StatusOr<ModelConfig> load_model_config(const std::string& model_dir) {
  const std::string path = (model_dir.empty() || model_dir.back() == '/')
                               ? model_dir + "config.json"
                               : model_dir + "/config.json";
  auto text = read_text_file(path, kMaxConfigBytes);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound)
      return not_found("no config.json in '" + model_dir +
                       "': point to a Hugging Face model directory (config.json + safetensors)");
    return text.status();
  }
  return parse_model_config(*text, path);
}

}  // namespace roofline
