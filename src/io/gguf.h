// GGUF (version 2 and 3): the llama.cpp model file. Header, metadata key/values, tensor infos and a
// memory map of the tensor data, all validated before use (the file is hostile input: counts,
// string lengths, array lengths, dims, types, offsets and sizes are range-checked; nothing is read
// past the end of the map), plus dequantisation of the supported block types to f32.
//
// Layout: magic "GGUF", u32 version, u64 tensor_count, u64 kv_count, kv_count key/values, then
// tensor_count infos {string name, u32 n_dims, u64 dims[n_dims] (ggml order: dims[0] is the
// fastest-varying, i.e. the reversed PyTorch shape), u32 type, u64 offset}, then padding to
// `general.alignment` (default 32), then the data section; offsets are relative to it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "core/mapped_file.h"
#include "roofline/status.h"

namespace roofline {

// ggml tensor types roofline knows by number; only those with a dequantiser are loadable.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ6_K = 14,
  kBF16 = 30,
};

// "Q4_K", or "type 99" for numbers ggml does not define (then in a thread-local buffer that the
// next call on the same thread overwrites).
const char* ggml_type_name(uint32_t type);
// Elements per block and bytes per block of a supported type; false for unsupported types.
bool ggml_block_layout(uint32_t type, int64_t* block_elems, int64_t* block_bytes);
// The same for every type ggml defines, dequantisable or not (the parser sizes and places every
// tensor with it); false only for type numbers ggml does not know.
bool ggml_storage_layout(uint32_t type, int64_t* block_elems, int64_t* block_bytes);

// Dequantises n elements (n a multiple of the type's block size) of `type` from src to dst.
// Unimplemented for types roofline does not support (the message names the type).
Status dequantize_to_f32(uint32_t type, const uint8_t* src, int64_t n, float* dst);

// GGUF metadata value type tags: the u32 the file writes before every value (and every array's
// element type). Shared by the parser and the tests that build hostile files.
struct GgufValueTypes {
  enum : uint32_t {
    kU8 = 0,
    kI8 = 1,
    kU16 = 2,
    kI16 = 3,
    kU32 = 4,
    kI32 = 5,
    kF32 = 6,
    kBool = 7,
    kString = 8,
    kArray = 9,
    kU64 = 10,
    kI64 = 11,
    kF64 = 12,
  };
};

// A metadata value. Arrays hold one element type; nested arrays are not supported (no model
// roofline loads uses them) and are rejected at parse time.
struct GgufValue {
  using Array = std::variant<std::vector<int64_t>, std::vector<double>, std::vector<std::string>,
                             std::vector<bool>>;
  std::variant<int64_t, double, bool, std::string, Array> value;
  uint32_t gguf_type = 0;   // the file's type tag (u8 = 0 ... f64 = 12)
  uint32_t array_type = 0;  // for arrays (gguf_type 9): the element's type tag
};

struct GgufTensorInfo {
  std::string name;
  uint32_t type = 0;
  std::vector<int64_t> dims;  // ggml order (dims[0] fastest)
  uint64_t offset = 0;        // within the data section
  uint64_t size_bytes = 0;    // computed from dims and type; 0 for type numbers ggml lacks
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
};

class GgufFile {
 public:
  static StatusOr<std::unique_ptr<GgufFile>> open(const std::string& path);
  // Parses from memory (the fuzz target's entry point); `data` must outlive the GgufFile.
  static StatusOr<std::unique_ptr<GgufFile>> parse(const uint8_t* data, uint64_t size,
                                                   const std::string& source);

  uint32_t version() const { return version_; }
  const std::string& source() const { return source_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  const uint8_t* tensor_data(const GgufTensorInfo& t) const {
    return data_ + data_offset_ + t.offset;
  }

  // Typed metadata access; NotFound if the key is absent, InvalidArgument (naming key and file)
  // if it has another type. Integers of any width and sign read as int64; f32/f64 as double.
  StatusOr<int64_t> get_int(const std::string& key) const;
  StatusOr<double> get_float(const std::string& key) const;  // also accepts integers
  StatusOr<bool> get_bool(const std::string& key) const;
  StatusOr<std::string> get_string(const std::string& key) const;
  StatusOr<std::vector<std::string>> get_string_array(const std::string& key) const;
  StatusOr<std::vector<int64_t>> get_int_array(const std::string& key) const;
  StatusOr<std::vector<double>> get_float_array(const std::string& key) const;
  bool has(const std::string& key) const { return metadata_.count(key) != 0; }
  // Element count of an array value without copying it (tokenizer vocabularies are large); -1 if
  // the key is absent or not an array.
  int64_t array_length(const std::string& key) const;

 private:
  std::unique_ptr<MappedFile> file_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t data_offset_ = 0;
  uint32_t version_ = 0;
  std::string source_;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;  // name -> index into tensors_
};

}  // namespace roofline
