// safetensors: the header parser and a memory-mapped file of tensors.
//
// File layout: u64 little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}}
// then the data section; offsets are relative to its start. The file is hostile input: the header
// length, every dtype, shape, offset and the byte count implied by shape x dtype are checked before
// any tensor is handed out, and tensors may not overlap.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/tensor.h"
#include "roofline/status.h"

namespace roofline {

// Largest JSON header we accept; real checkpoints stay far below (a 70B shard: ~100 KB).
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

struct SafetensorsTensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  uint64_t begin = 0;  // byte offset in the data section
  uint64_t end = 0;    // one past the last byte
};

struct SafetensorsHeader {
  std::vector<SafetensorsTensorInfo> tensors;  // in file order
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;  // 8 + header length: start of the data section
};

// Parses and validates the header of a safetensors file whose bytes are [data, data + size).
// `source` names the file in error messages.
StatusOr<SafetensorsHeader> parse_safetensors_header(const uint8_t* data, uint64_t size,
                                                     const std::string& source);

class SafetensorsFile {
 public:
  static StatusOr<std::unique_ptr<SafetensorsFile>> open(const std::string& path);

  const SafetensorsHeader& header() const { return header_; }
  const std::string& path() const { return file_->path(); }
  // A zero-copy view of a tensor of this file, or NotFound.
  StatusOr<TensorView> tensor(const std::string& name) const;

 private:
  std::unique_ptr<MappedFile> file_;
  SafetensorsHeader header_;
  std::map<std::string, size_t> index_;
};

}  // namespace roofline
