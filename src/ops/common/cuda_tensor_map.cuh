// Tensor maps for the bulk tensor copy engine (TMA, sm_90; device side in cuda_async.cuh): the
// driver's cuTensorMapEncodeTiled, reached through the runtime's entry-point query so that nothing
// links libcuda directly. Include only from .cu files.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>

namespace roofline::cuda {

// The driver's encoder, looked up once; null when this driver does not offer it.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess)
      encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    cudaGetLastError();  // a missing entry point is an answer here, not the next launch's error
  });
  return encode;
}

// A rank-3 bf16 tensor map: dims[0] contiguous elements, then dims[1] rows stride1_bytes apart,
// then dims[2] planes stride2_bytes apart; boxes of box[0] x box[1] x box[2] elements, swizzled
// in 128-byte rows (box[0] * 2 must then be <= 128), out-of-range elements read as zeros;
// `promotion`: how far L2 widens each of the copy's requests. Returns false (map untouched) where
// the encoder is missing or refuses the description.
inline bool encode_bf16_tensor_map_3d(CUtensorMap* map, const void* base, const uint64_t dims[3],
                                      uint64_t stride1_bytes, uint64_t stride2_bytes,
                                      const uint32_t box[3], CUtensorMapL2promotion promotion) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (encode == nullptr) return false;
  const cuuint64_t global_dims[3] = {dims[0], dims[1], dims[2]};
  const cuuint64_t strides[2] = {stride1_bytes, stride2_bytes};
  const cuuint32_t box_dims[3] = {box[0], box[1], box[2]};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  CUtensorMap out;
  const CUresult r =
      encode(&out, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(base), global_dims,
             strides, box_dims, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return false;
  *map = out;
  return true;
}

}  // namespace roofline::cuda
