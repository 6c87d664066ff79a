// ROOFLINE_HD: a function compiled for both the host and the device where nvcc builds the file
// (the CPU twin and the kernel share one definition, so a CPU test covers what the kernel runs),
// and a plain inline function in host-only builds.
#pragma once

#if defined(__CUDACC__)
#define ROOFLINE_HD __host__ __device__ __forceinline__
#else
#define ROOFLINE_HD inline
#endif
