// gather_rows: out[i] = x[index[i]] row by row (each sequence's last token before the LM head).
#pragma once

#include <cstdint>

#include "core/cuda_stream.h"
#include "core/dtype.h"

namespace roofline {

struct GatherRowsParams {
  const void* x = nullptr;         // [num_in_rows, hidden] in dtype
  const int32_t* index = nullptr;  // [num_out_rows], each in [0, num_in_rows)
  void* out = nullptr;             // [num_out_rows, hidden] in dtype
  int64_t num_in_rows = 0;
  int64_t num_out_rows = 0;
  int64_t hidden = 0;
  DType dtype = DType::kF32;
};

void gather_rows_cpu(const GatherRowsParams& p);
void gather_rows_cuda(const GatherRowsParams& p, CudaStream stream);

}  // namespace roofline
