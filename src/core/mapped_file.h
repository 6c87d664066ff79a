// A read-only memory map of a whole file. Weights are used in place (zero copy); the mapping lives
// as long as the MappedFile.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "roofline/status.h"

namespace roofline {

class MappedFile {
 public:
  static StatusOr<std::unique_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size_bytes() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

// Reads a whole (small) file into a string; for config and index JSON.
StatusOr<std::string> read_text_file(const std::string& path, uint64_t max_bytes);

}  // namespace roofline
