// parse_byte_size (see byte_size.h).
#include "core/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace roofline {

namespace {

Status bad(const std::string& text, const std::string& why) {
  return invalid_argument(
      "'" + text + "' is not a byte size (" + why +
      "): write a number with an optional unit, e.g. 8GiB, 512MiB, 1.5GB, 4096");
}

}  // namespace

StatusOr<int64_t> parse_byte_size(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  const size_t num_begin = i;
  bool digits = false, dot = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      digits = true;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (!digits) return bad(text, "no number");
  const double value = std::strtod(text.substr(num_begin, i - num_begin).c_str(), nullptr);
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  std::string unit;
  for (; i < text.size(); ++i) {
    if (std::isspace(static_cast<unsigned char>(text[i]))) break;
    unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  }
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  if (i != text.size()) return bad(text, "text after the unit");
  double scale = 0;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "kb")
    scale = 1e3;
  else if (unit == "mb")
    scale = 1e6;
  else if (unit == "gb")
    scale = 1e9;
  else if (unit == "tb")
    scale = 1e12;
  else if (unit == "kib")
    scale = 1024.0;
  else if (unit == "mib")
    scale = 1024.0 * 1024;
  else if (unit == "gib")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "tib")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else
    return bad(text, "unknown unit '" + unit + "'");
  const double bytes = std::floor(value * scale);
  if (!(bytes <= 4611686018427387904.0)) return out_of_range("'" + text + "' is beyond 2^62 bytes");
  return static_cast<int64_t>(bytes);
}

}  // namespace roofline
