// .npy reader/writer. The reader treats the file as hostile: header length, dtype, shape and the
// payload size are all checked before any element is read.
#include "core/npy.h"

#include <cstring>
#include <fstream>
#include <limits>

#include "core/mapped_file.h"

namespace roofline {

Status write_npy_f32(const std::string& path, const std::vector<int64_t>& shape,
                     const float* data) {
  std::string shape_str = "(";
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    shape_str += std::to_string(shape[i]);
    shape_str += (shape.size() == 1 || i + 1 < shape.size()) ? "," : "";
    if (i + 1 < shape.size()) shape_str += " ";
    n *= shape[i];
  }
  shape_str += ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_str + ", }";
  size_t total = 10 + header.size() + 1;
  size_t pad = (64 - total % 64) % 64;
  header.append(pad, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) return io_error("cannot write '" + path + "'");
  const char magic[] = "\x93NUMPY\x01\x00";
  out.write(magic, 8);
  uint16_t hl = static_cast<uint16_t>(header.size());
  char hlb[2] = {static_cast<char>(hl & 0xff), static_cast<char>(hl >> 8)};
  out.write(hlb, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * 4));
  if (!out) return io_error("write to '" + path + "' failed (disk full?)");
  return ok_status();
}

namespace {

// Finds 'key': in the header dict and returns the text after it.
std::string value_after(const std::string& h, const std::string& key) {
  size_t p = h.find("'" + key + "'");
  if (p == std::string::npos) return "";
  p = h.find(':', p);
  if (p == std::string::npos) return "";
  return h.substr(p + 1);
}

}  // namespace

StatusOr<NpyArray> read_npy(const std::string& path) {
  ROOFLINE_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  const uint8_t* p = file->data();
  uint64_t size = file->size_bytes();
  if (size < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0)
    return data_loss("'" + path + "' is not a .npy file (bad magic)");
  uint64_t header_len = 0, offset = 0;
  if (p[6] == 1) {
    header_len = p[8] | (p[9] << 8);
    offset = 10;
  } else if (p[6] == 2 || p[6] == 3) {
    if (size < 12) return data_loss("'" + path + "' is truncated");
    header_len = p[8] | (p[9] << 8) | (uint64_t(p[10]) << 16) | (uint64_t(p[11]) << 24);
    offset = 12;
  } else {
    return unimplemented("'" + path + "' has .npy version " + std::to_string(p[6]));
  }
  if (offset + header_len > size) return data_loss("'" + path + "' header runs past the file");
  std::string h(reinterpret_cast<const char*>(p + offset), header_len);
  std::string descr = value_after(h, "descr");
  int esize = 0;
  char kind = 0;
  for (const char* d : {"<f4", "<f8", "<i4", "<i8"}) {
    if (descr.find(std::string("'") + d + "'") != std::string::npos) {
      kind = d[1];
      esize = d[2] - '0';
    }
  }
  if (!esize)
    return unimplemented("'" + path + "' has dtype " + descr.substr(0, 12) +
                         "; need <f4, <f8, <i4 or <i8");
  if (value_after(h, "fortran_order").find("False") == std::string::npos)
    return unimplemented("'" + path + "' is Fortran-ordered");
  std::string sh = value_after(h, "shape");
  size_t open = sh.find('('), close = sh.find(')');
  if (open == std::string::npos || close == std::string::npos || close < open)
    return data_loss("'" + path + "' has no readable shape");
  NpyArray arr;
  int64_t n = 1;
  std::string inner = sh.substr(open + 1, close - open - 1);
  size_t i = 0;
  while (i < inner.size()) {
    while (i < inner.size() && (inner[i] == ' ' || inner[i] == ',')) ++i;
    if (i >= inner.size()) break;
    int64_t v = 0;
    size_t start = i;
    while (i < inner.size() && inner[i] >= '0' && inner[i] <= '9') {
      if (v > (std::numeric_limits<int64_t>::max() - 9) / 10)
        return data_loss("'" + path + "' shape overflows");
      v = v * 10 + (inner[i++] - '0');
    }
    if (i == start) return data_loss("'" + path + "' has a malformed shape");
    if (v > 0 && n > std::numeric_limits<int64_t>::max() / v)
      return data_loss("'" + path + "' shape overflows");
    n *= v;
    arr.shape.push_back(v);
  }
  uint64_t payload = offset + header_len;
  if (static_cast<uint64_t>(n) > (size - payload) / esize)
    return data_loss("'" + path + "' holds fewer elements than its shape says (truncated?)");
  arr.data.resize(static_cast<size_t>(n));
  const uint8_t* d = p + payload;
  for (int64_t k = 0; k < n; ++k) {
    const uint8_t* e = d + k * esize;
    if (kind == 'f' && esize == 4) {
      float v;
      std::memcpy(&v, e, 4);
      arr.data[k] = v;
    } else if (kind == 'f') {
      double v;
      std::memcpy(&v, e, 8);
      arr.data[k] = static_cast<float>(v);
    } else if (esize == 4) {
      int32_t v;
      std::memcpy(&v, e, 4);
      arr.data[k] = static_cast<float>(v);
    } else {
      int64_t v;
      std::memcpy(&v, e, 8);
      arr.data[k] = static_cast<float>(v);
    }
  }
  return arr;
}

}  // namespace roofline
