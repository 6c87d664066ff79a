// CudaStream: the CUDA stream handle as op headers name it. cudaStream_t is `CUstream_st*`; this
// forward declaration lets every op header declare its <op>_cuda(params, stream) entry point
// without including CUDA headers, so CPU-only translation units and builds are unaffected.
#pragma once

struct CUstream_st;

namespace roofline {
using CudaStream = CUstream_st*;
}  // namespace roofline
