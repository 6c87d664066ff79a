// Sizes in bytes as users write them on a command line: "8GiB", "512MiB", "1.5GB", "4096".
#pragma once

#include <cstdint>
#include <string>

#include "roofline/status.h"

namespace roofline {

// A non-negative number (integer or decimal) with an optional unit: B, KB/MB/GB/TB (powers of
// 1000), KiB/MiB/GiB/TiB (powers of 1024); units are case-insensitive, a space may separate them.
// Errors name the text and the accepted forms; results beyond 2^62 bytes are out of range.
StatusOr<int64_t> parse_byte_size(const std::string& text);

}  // namespace roofline
