// Test helpers for the io tests: build small safetensors files in memory and write them into a
// per-test temporary directory that is removed afterwards.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace roofline::testing {

struct TestTensor {
  std::string name;
  std::string dtype;  // safetensors name: "F32", "BF16", ...
  std::vector<int64_t> shape;
  std::string bytes;  // raw little-endian data, numel * dtype size bytes
};

// f32 values as raw bytes (the test hosts are little-endian, as is the format).
inline std::string f32_bytes(const std::vector<float>& v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

// Prefixes `header_json`, padded with spaces to a multiple of 8 bytes as real writers do, with
// its little-endian length, then appends `data`.
inline std::string make_safetensors_raw(std::string header_json, const std::string& data) {
  while (header_json.size() % 8 != 0) header_json += ' ';
  std::string out(8, '\0');
  uint64_t n = header_json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header_json + data;
}

// A well-formed file holding `tensors` back to back in the given order.
inline std::string make_safetensors(const std::vector<TestTensor>& tensors,
                                    const std::map<std::string, std::string>& metadata = {}) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const TestTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  return make_safetensors_raw(header.dump(), data);
}

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "roofline_io_" + std::to_string(::getpid()) + "_" +
                       (info ? std::string(info->test_suite_name()) + "_" + info->name() : "x");
    path_ = (std::filesystem::temp_directory_path() / name).string();
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  void write(const std::string& name, const std::string& contents) const {
    std::ofstream out(file(name), std::ios::binary);
    out << contents;
  }

 private:
  std::string path_;
};

}  // namespace roofline::testing
