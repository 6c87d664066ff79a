// Typed host <-> device transfers for the GPU op tests (CUDA builds only): upload f32 values as a
// given element type (rounding to nearest even, as the GPU consumes them), read a device buffer
// back as f32, and the rounded values themselves so the CPU twin sees exactly what the GPU saw.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "ops/testing/gpu_test_util.h"

namespace roofline::testing {

// Element bits of `values` in dtype (f32, f16 or bf16).
inline std::vector<uint8_t> encode(const std::vector<float>& values, DType dtype) {
  const size_t size = static_cast<size_t>(dtype_size_bytes(dtype));
  std::vector<uint8_t> bytes(values.size() * size);
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(bytes.data() + i * 4, &values[i], 4);
    } else {
      ROOFLINE_CHECK(dtype == DType::kBF16 || dtype == DType::kF16);
      const uint16_t bits =
          dtype == DType::kBF16 ? f32_to_bf16_bits(values[i]) : f32_to_f16_bits(values[i]);
      std::memcpy(bytes.data() + i * 2, &bits, 2);
    }
  }
  return bytes;
}

inline std::vector<float> decode(const std::vector<uint8_t>& bytes, DType dtype) {
  const size_t n = bytes.size() / static_cast<size_t>(dtype_size_bytes(dtype));
  std::vector<float> values(n);
  convert_to_f32(bytes.data(), dtype, static_cast<int64_t>(n), values.data());
  return values;
}

// The values `values` become when stored in dtype.
inline std::vector<float> round_to(const std::vector<float>& values, DType dtype) {
  return dtype == DType::kF32 ? values : decode(encode(values, dtype), dtype);
}

inline DeviceBuffer upload_as(const std::vector<float>& values, DType dtype) {
  return DeviceBuffer::from_host(encode(values, dtype));
}

inline std::vector<float> download_as_f32(const DeviceBuffer& buffer, DType dtype) {
  return decode(buffer.to_host<uint8_t>(), dtype);
}

}  // namespace roofline::testing
