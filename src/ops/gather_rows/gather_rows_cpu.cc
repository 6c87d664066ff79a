// gather_rows on the CPU: a bounds-checked row copy of any element type.
#include <cstring>

#include "core/check.h"
#include "ops/gather_rows/gather_rows.h"

namespace roofline {

void gather_rows_cpu(const GatherRowsParams& p) {
  const int64_t row_bytes = p.hidden * dtype_size_bytes(p.dtype);
  const auto* x = static_cast<const uint8_t*>(p.x);
  auto* out = static_cast<uint8_t*>(p.out);
  for (int64_t r = 0; r < p.num_out_rows; ++r) {
    ROOFLINE_CHECK(p.index[r] >= 0 && p.index[r] < p.num_in_rows);
    std::memcpy(out + r * row_bytes, x + p.index[r] * row_bytes, static_cast<size_t>(row_bytes));
  }
}

}  // namespace roofline
