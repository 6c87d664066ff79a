// Test helpers: a byte-level GGUF writer that can also write the malformed files a hostile
// input would be (wrong counts, offsets, types), and a tiny synthetic llama/qwen model built with
// it whose metadata and tensors each test can tweak.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "roofline/status.h"

namespace roofline::testing {

// Value type tags come from the parser's own GgufValueTypes (GgufBuilder::kString, ...).
class GgufBuilder : public GgufValueTypes {
 public:
  uint32_t version = 3;
  std::optional<uint64_t> tensor_count_override;
  std::optional<uint64_t> kv_count_override;
  uint64_t alignment = 32;  // used to place data; write general.alignment yourself to change it

  // A key with an already-encoded value (everything after the type tag).
  void kv_raw(const std::string& key, uint32_t type, const std::vector<uint8_t>& value) {
    kvs_.push_back({key, type, value});
  }
  void kv_u32(const std::string& key, uint32_t v) { kv_raw(key, kU32, pod(v)); }
  void kv_u64(const std::string& key, uint64_t v) { kv_raw(key, kU64, pod(v)); }
  void kv_i32(const std::string& key, int32_t v) { kv_raw(key, kI32, pod(v)); }
  void kv_f32(const std::string& key, float v) { kv_raw(key, kF32, pod(v)); }
  void kv_f64(const std::string& key, double v) { kv_raw(key, kF64, pod(v)); }
  void kv_bool(const std::string& key, bool v) { kv_raw(key, kBool, {static_cast<uint8_t>(v)}); }
  void kv_str(const std::string& key, const std::string& v) { kv_raw(key, kString, str(v)); }
  void kv_str_array(const std::string& key, const std::vector<std::string>& v) {
    std::vector<uint8_t> b = pod(uint32_t{kString});
    append(b, pod(static_cast<uint64_t>(v.size())));
    for (const std::string& s : v) append(b, str(s));
    kv_raw(key, kArray, b);
  }
  void kv_i32_array(const std::string& key, const std::vector<int32_t>& v) {
    std::vector<uint8_t> b = pod(uint32_t{kI32});
    append(b, pod(static_cast<uint64_t>(v.size())));
    for (int32_t x : v) append(b, pod(x));
    kv_raw(key, kArray, b);
  }
  void remove_kv(const std::string& key) {
    for (size_t i = 0; i < kvs_.size(); ++i)
      if (kvs_[i].key == key) kvs_.erase(kvs_.begin() + static_cast<long>(i--));
  }
  void set_kv_str(const std::string& key, const std::string& v) {
    remove_kv(key);
    kv_str(key, v);
  }
  void set_kv_u32(const std::string& key, uint32_t v) {
    remove_kv(key);
    kv_u32(key, v);
  }

  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;  // ggml order
    uint32_t type = 0;
    std::vector<uint8_t> data;
    std::optional<uint64_t> offset_override;
  };
  Tensor& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                 std::vector<uint8_t> data) {
    tensors_.push_back({name, std::move(dims), type, std::move(data), std::nullopt});
    return tensors_.back();
  }
  Tensor& tensor_f32(const std::string& name, std::vector<uint64_t> dims,
                     const std::vector<float>& values) {
    std::vector<uint8_t> data(values.size() * 4);
    std::memcpy(data.data(), values.data(), data.size());
    return tensor(name, std::move(dims), 0, std::move(data));
  }
  Tensor* find(const std::string& name) {
    for (Tensor& t : tensors_)
      if (t.name == name) return &t;
    return nullptr;
  }
  void remove_tensor(const std::string& name) {
    for (size_t i = 0; i < tensors_.size(); ++i)
      if (tensors_[i].name == name) tensors_.erase(tensors_.begin() + static_cast<long>(i--));
  }

  std::vector<uint8_t> build() const {
    std::vector<uint8_t> b = {'G', 'G', 'U', 'F'};
    append(b, pod(version));
    append(b, pod(tensor_count_override.value_or(tensors_.size())));
    append(b, pod(kv_count_override.value_or(kvs_.size())));
    for (const Kv& kv : kvs_) {
      append(b, str(kv.key));
      append(b, pod(kv.type));
      append(b, kv.value);
    }
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const Tensor& t : tensors_) {
      offsets.push_back(t.offset_override.value_or(next));
      next += (t.data.size() + alignment - 1) / alignment * alignment;
    }
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const Tensor& t = tensors_[i];
      append(b, str(t.name));
      append(b, pod(static_cast<uint32_t>(t.dims.size())));
      for (uint64_t d : t.dims) append(b, pod(d));
      append(b, pod(t.type));
      append(b, pod(offsets[i]));
    }
    if (tensors_.empty()) return b;
    b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
    // The file ends right after the last tensor's bytes (no trailing padding), so every strict
    // prefix of it is truncated.
    const size_t data_start = b.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (tensors_[i].offset_override || tensors_[i].data.empty()) continue;
      const size_t at = data_start + offsets[i];
      if (b.size() < at + tensors_[i].data.size()) b.resize(at + tensors_[i].data.size(), 0);
      std::memcpy(b.data() + at, tensors_[i].data.data(), tensors_[i].data.size());
    }
    return b;
  }

  template <typename T>
  static std::vector<uint8_t> pod(T v) {
    std::vector<uint8_t> b(sizeof(T));
    std::memcpy(b.data(), &v, sizeof(T));
    return b;
  }
  static std::vector<uint8_t> str(const std::string& s) {
    std::vector<uint8_t> b = pod(static_cast<uint64_t>(s.size()));
    b.insert(b.end(), s.begin(), s.end());
    return b;
  }
  static void append(std::vector<uint8_t>& b, const std::vector<uint8_t>& more) {
    b.insert(b.end(), more.begin(), more.end());
  }

 private:
  struct Kv {
    std::string key;
    uint32_t type;
    std::vector<uint8_t> value;
  };
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
};

// A one-layer model: hidden 8, 2 heads of 4 (kv_heads of them for k/v), ffn 12, vocab 16, f32
// tensors whose element i of tensor number n is n + i / 1024 (every value distinct and exact).
struct TinyModelOptions {
  std::string arch = "llama";
  uint32_t kv_heads = 2;
  bool biases = false;   // attn_q/k/v/output.bias
  bool qk_norm = false;  // attn_q_norm / attn_k_norm
  bool tied = false;     // no output.weight
};

inline GgufBuilder tiny_model(const TinyModelOptions& o) {
  constexpr uint32_t kHidden = 8, kHeads = 2, kHeadDim = 4, kFfn = 12, kVocab = 16;
  GgufBuilder b;
  const std::string a = o.arch;
  b.kv_str("general.architecture", a);
  b.kv_u32(a + ".block_count", 1);
  b.kv_u32(a + ".context_length", 64);
  b.kv_u32(a + ".embedding_length", kHidden);
  b.kv_u32(a + ".feed_forward_length", kFfn);
  b.kv_u32(a + ".attention.head_count", kHeads);
  b.kv_u32(a + ".attention.head_count_kv", o.kv_heads);
  b.kv_f32(a + ".rope.freq_base", 10000.0f);
  b.kv_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
  std::vector<std::string> tokens;
  for (uint32_t i = 0; i < kVocab; ++i) tokens.push_back("<t" + std::to_string(i) + ">");
  b.kv_str("tokenizer.ggml.model", "gpt2");
  b.kv_str_array("tokenizer.ggml.tokens", tokens);
  b.kv_u32("tokenizer.ggml.bos_token_id", 1);
  b.kv_u32("tokenizer.ggml.eos_token_id", 2);
  int n = 0;
  auto add = [&](const std::string& name, std::vector<uint64_t> dims) {
    uint64_t count = 1;
    for (uint64_t d : dims) count *= d;
    std::vector<float> v(count);
    for (uint64_t i = 0; i < count; ++i)
      v[i] = static_cast<float>(n) + static_cast<float>(i) / 1024;
    ++n;
    b.tensor_f32(name, std::move(dims), v);
  };
  const uint64_t q = kHeads * kHeadDim, kv = o.kv_heads * kHeadDim;
  add("token_embd.weight", {kHidden, kVocab});
  add("output_norm.weight", {kHidden});
  if (!o.tied) add("output.weight", {kHidden, kVocab});
  add("blk.0.attn_norm.weight", {kHidden});
  add("blk.0.ffn_norm.weight", {kHidden});
  add("blk.0.attn_q.weight", {kHidden, q});
  add("blk.0.attn_k.weight", {kHidden, kv});
  add("blk.0.attn_v.weight", {kHidden, kv});
  add("blk.0.attn_output.weight", {q, kHidden});
  if (o.biases) {
    add("blk.0.attn_q.bias", {q});
    add("blk.0.attn_k.bias", {kv});
    add("blk.0.attn_v.bias", {kv});
    if (o.arch != "qwen2") add("blk.0.attn_output.bias", {kHidden});
  }
  if (o.qk_norm) {
    add("blk.0.attn_q_norm.weight", {kHeadDim});
    add("blk.0.attn_k_norm.weight", {kHeadDim});
  }
  add("blk.0.ffn_gate.weight", {kHidden, kFfn});
  add("blk.0.ffn_up.weight", {kHidden, kFfn});
  add("blk.0.ffn_down.weight", {kFfn, kHidden});
  return b;
}

// The Status of a Status or StatusOr, for EXPECT_ERROR.
inline Status status_of(const Status& s) { return s; }
template <typename T>
Status status_of(const StatusOr<T>& s) {
  return s.status();
}

}  // namespace roofline::testing

// Expects an error of `code` whose message contains `needle`.
#define EXPECT_ERROR(expr, want_code, needle)                                           \
  do {                                                                                  \
    const ::roofline::Status s_ = ::roofline::testing::status_of(expr);                 \
    ASSERT_FALSE(s_.ok()) << "accepted: expected " #want_code " containing " << needle; \
    EXPECT_EQ(s_.code(), ::roofline::StatusCode::want_code) << s_.to_string();          \
    EXPECT_NE(s_.message().find(needle), std::string::npos) << s_.to_string();          \
  } while (0)
