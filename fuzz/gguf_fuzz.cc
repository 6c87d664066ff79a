// libFuzzer target: GgufFile::parse on arbitrary bytes. It must return a Status for any input,
// never crash, leak or read outside [data, data + size) (ASan and UBSan watch). An accepted file
// is re-checked against the guarantees later code relies on (every tensor in bounds, disjoint,
// sized from its dims), and every small tensor of a dequantisable type is dequantised, so the
// block decoders run on hostile bytes too. Then the file is read as a model the way `--model
// x.gguf` does: its metadata into a ModelConfig (which must pass validate_model_config when
// accepted), and, for a small file, its tensors into a WeightStore under Hugging Face names, each
// with the shape the config implies.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "io/gguf.h"
#include "io/gguf_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A private exact-size copy: ASan then flags any read past the end of the input.
  std::vector<uint8_t> bytes(data, data + size);
  auto file = roofline::GgufFile::parse(bytes.data(), bytes.size(), "fuzz-input");
  if (!file.ok()) return 0;
  const uint8_t* end = bytes.data() + bytes.size();
  for (const roofline::GgufTensorInfo& t : (*file)->tensors()) {
    if (t.dims.empty() || t.dims.size() > 4) std::abort();
    const uint8_t* begin = (*file)->tensor_data(t);
    if (begin < bytes.data() || begin > end || t.size_bytes > static_cast<uint64_t>(end - begin))
      std::abort();
    int64_t block_elems = 0, block_bytes = 0;
    if (!roofline::ggml_block_layout(t.type, &block_elems, &block_bytes)) continue;
    const int64_t n = t.numel();
    if (n % block_elems != 0 ||
        static_cast<uint64_t>(n / block_elems * block_bytes) != t.size_bytes)
      std::abort();
    if (n > (int64_t{1} << 16)) continue;  // keep each input fast
    std::vector<float> out(static_cast<size_t>(n));
    if (!roofline::dequantize_to_f32(t.type, begin, n, out.data()).ok()) std::abort();
  }
  // Typed access on every key must answer with a value or a Status, never throw or crash.
  for (const auto& [key, value] : (*file)->metadata()) {
    (void)(*file)->get_int(key);
    (void)(*file)->get_float(key);
    (void)(*file)->get_string(key);
    (void)(*file)->get_float_array(key);
    (void)(*file)->array_length(key);
  }
  for (const roofline::GgufTensorInfo& t : (*file)->tensors())
    (void)roofline::hf_tensor_name(t.name);
  auto config = roofline::model_config_from_gguf(**file);
  if (!config.ok()) return 0;
  if (!roofline::validate_model_config(*config, "fuzz-input").ok()) std::abort();
  if (bytes.size() > (size_t{1} << 20)) return 0;  // keep each input fast
  auto weights = roofline::load_gguf_weights(**file, *config);
  if (!weights.ok()) return 0;
  // Every tensor the store holds is f32 under a known Hugging Face name.
  for (const std::string& name : (*weights)->names()) {
    auto view = (*weights)->get(name);
    if (!view.ok() || view->dtype != roofline::DType::kF32 || view->data == nullptr) std::abort();
  }
  return 0;
}
